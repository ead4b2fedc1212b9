"""Queues with usage against quota (`/queues`)."""

from __future__ import annotations

from voltpack.api.routers import resource_router
from voltpack.api.routers.access import CanGet
from voltpack.api.routers.reading import read
from voltpack.model.admin import QueueView

router = resource_router("workloads")


@router.get("/queues", response_model=list[QueueView])
def queues(caller: CanGet) -> list[QueueView]:
    """Queues with usage against quota."""
    return read(caller.deps.cluster.queues)
