"""The cluster at a glance and its nodes (`/cluster`, `/nodes`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response

from voltpack.api.paging import (
    AFTER_TEXT,
    CONTINUE_TEXT,
    DEFAULT_LIMIT,
    LIMIT_TEXT,
    MAX_LIMIT,
    MAX_TOKEN_CHARS,
    send_page,
)
from voltpack.api.problems import ApiProblemError
from voltpack.api.routers import resource_router
from voltpack.api.routers.access import CanGet
from voltpack.api.routers.reading import read, start_of
from voltpack.model.admin import ClusterSummary, NodeView

router = resource_router("cluster")


@router.get("/cluster", response_model=ClusterSummary)
def cluster(caller: CanGet) -> ClusterSummary:
    """The cluster at a glance: nodes, GPUs per model, jobs, queues and power."""
    return read(caller.deps.cluster.summary)


@router.get("/nodes", response_model=list[NodeView])
def nodes(
    caller: CanGet,
    response: Response,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description=LIMIT_TEXT)] = DEFAULT_LIMIT,
    continue_: Annotated[
        str | None,
        Query(alias="continue", max_length=MAX_TOKEN_CHARS, description=CONTINUE_TEXT),
    ] = None,
    after: Annotated[str | None, Query(max_length=512, description=AFTER_TEXT)] = None,
) -> list[NodeView]:
    """Nodes by name with their GPUs' health, allocation and power, a page at a time: while
    more follow, `X-Continue` holds the token for the next page (see the API docs)."""
    start = start_of("nodes", continue_, after)
    page = read(lambda: caller.deps.cluster.node_page(start.after, limit))
    send_page(response, "nodes", page, start)
    return page.items


@router.get("/nodes/{name}", response_model=NodeView)
def node(name: str, caller: CanGet) -> NodeView:
    """One node."""
    found = read(lambda: caller.deps.cluster.node(name))
    if found is None:
        raise ApiProblemError(
            404, "not-found", "No such node", f"node {name!r} is not in the cluster"
        )
    return found
