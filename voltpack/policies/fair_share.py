"""Queue orderings: which pending gang the scheduler tries next, as named in a policy file.

The mechanism (`voltpack/scheduler/queues.py`) asks the ordering for a share per queue on the
path from the root to the gang's queue, compares those paths (lowest first, root level first),
then compares gangs of the chosen queue by `gang_key`. It asks again after every placement, so
a queue that just got GPUs falls behind the others (progressive filling).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel

from voltpack.policies.named import NamedRegistry
from voltpack.policies.strategy import NoParams


class QueueOrdering(ABC):
    """A named rule that orders queues by a share and gangs within a queue by a key."""

    name: ClassVar[str]
    summary: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, params: BaseModel | None = None) -> None:
        self.params = params if params is not None else self.Params()

    @abstractmethod
    def queue_share(
        self, used_gpus: Mapping[str, float], capacity_gpus: Mapping[str, float], weight: float
    ) -> float:
        """The queue's share of the cluster (lower goes first); GPUs per GPU model."""

    def gang_key(self, priority: int, arrival: int) -> tuple[int, int]:
        """Within a queue: higher priority first, then earlier arrival."""
        return (-priority, arrival)


def dominant_share(used_gpus: Mapping[str, float], capacity_gpus: Mapping[str, float]) -> float:
    """The largest fraction of any GPU model's capacity that `used_gpus` takes (DRF)."""
    shares = [
        used / capacity_gpus[model]
        for model, used in used_gpus.items()
        if capacity_gpus.get(model, 0.0) > 0
    ]
    return max(shares, default=0.0)


class FairShareOrdering(QueueOrdering):
    """Weighted dominant resource fairness over GPU models."""

    name = "fair-share"
    summary = (
        "queues by dominant GPU-model share divided by queue weight (lowest first); "
        "within a queue by priority, then arrival"
    )

    def queue_share(
        self, used_gpus: Mapping[str, float], capacity_gpus: Mapping[str, float], weight: float
    ) -> float:
        """max over GPU models of used/capacity, divided by the queue's weight."""
        return dominant_share(used_gpus, capacity_gpus) / weight


class PriorityFifoOrdering(QueueOrdering):
    """No fairness between queues: priority, then arrival, over all queues."""

    name = "priority-fifo"
    summary = "all gangs by priority, then arrival, whatever their queue"

    def queue_share(
        self, used_gpus: Mapping[str, float], capacity_gpus: Mapping[str, float], weight: float
    ) -> float:
        """Every queue ranks the same."""
        del used_gpus, capacity_gpus, weight
        return 0.0


ORDERINGS: NamedRegistry[QueueOrdering] = NamedRegistry(
    "ordering",
    "spec.queueing.ordering",
    "spec.queueing.params",
    (FairShareOrdering, PriorityFifoOrdering),
)


def ordering_summaries() -> dict[str, str]:
    """Name to one-sentence definition of every queue ordering."""
    return ORDERINGS.summaries()


def make_ordering(name: str, params: Mapping[str, Any] | None = None) -> QueueOrdering:
    """A new queue ordering called `name`, with its parameters validated."""
    return ORDERINGS.make(name, params)
