"""What a power policy sees of one domain, and what it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
from numpy.typing import NDArray

from voltpack.policies.power.ladder import FloatArray, IntArray, LadderTable

BoolArray = NDArray[np.bool_]


SHED_GROUPS = 3
"""Low-priority latency-tolerant work, low-priority throughput-bound work, high priority."""


def shed_group_index(high_priority: BoolArray, throughput_bound: BoolArray | None) -> IntArray:
    """Each GPU's shed group (0, 1, 2 in the order `DomainView.shed_groups` gives watts);
    without throughput information every low-priority GPU is in group 0."""
    bound = np.zeros_like(high_priority) if throughput_bound is None else throughput_bound
    return np.where(high_priority, 2, np.where(bound, 1, 0)).astype(np.int64)


@dataclass(frozen=True)
class DomainView:
    """One domain at one control tick; per-GPU arrays share one order."""

    name: str
    budget_w: float
    now_s: float
    interval_s: float
    actuation_latency_s: float
    history_w: FloatArray
    """The domain's accounted power at past ticks, oldest first; the last entry is now."""
    power_w: FloatArray
    """Each GPU's power now: its reading, or its worst case when its telemetry is stale."""
    rung: IntArray
    """Each GPU's commanded rung (0: no action)."""
    high_priority: BoolArray
    stale: BoolArray
    ladders: LadderTable
    late: BoolArray | None = None
    """GPUs whose last reading is older than `late_after_s` but not yet stale: a policy should
    not give watts back on their account. None: none are late."""
    unthrottled_w: FloatArray | None = None
    """Each GPU's power had it not been slowed (its reading scaled back to no action; a
    capped GPU's last estimate from an uncapped reading). None: not known."""
    unthrottled_history_w: FloatArray | None = None
    """What the domain would have drawn at past ticks had no GPU been slowed (each reading
    scaled back to no action from the rung it was taken at), oldest first. Its rises are the
    workload's own, free of the steps a policy's releases cause. None: not known."""
    throughput_bound: BoolArray | None = None
    """GPUs whose work loses throughput when slowed (training, batch jobs); request-driven
    inference below saturation loses only latency. None: all are."""
    group_unthrottled_history_w: FloatArray | None = None
    """`[tick, shed group]`: the unthrottled history split by `shed_group_index`. None: not
    known."""

    @property
    def any_late(self) -> bool:
        """Whether some GPU's reading is late."""
        return self.late is not None and bool(self.late.any())

    def shed_groups(self) -> list[BoolArray]:
        """GPU groups in the order they give watts: low-priority latency-tolerant work,
        low-priority throughput-bound work, then high priority."""
        low = ~self.high_priority
        if self.throughput_bound is None:
            return [low, self.high_priority]
        return [low & ~self.throughput_bound, low & self.throughput_bound, self.high_priority]

    def room_w(self, rung: IntArray) -> FloatArray:
        """Per shed group, how far its GPUs can still rise at `rung`: the sum of each GPU's
        worst case there less its estimated power (a capped GPU cannot rise past its cap)."""
        room = np.maximum(self.ladders.at(self.ladders.bound_w, rung) - self.estimate_w(rung), 0.0)
        groups = shed_group_index(self.high_priority, self.throughput_bound)
        return np.bincount(groups, weights=room, minlength=SHED_GROUPS).astype(np.float64)

    def estimate_w(self, rung: IntArray) -> FloatArray:
        """Each GPU's estimated power at `rung` (from its unthrottled power when known)."""
        if self.unthrottled_w is None:
            return self.ladders.estimate_w(self.power_w, self.rung, rung)
        return self.ladders.estimate_w(self.unthrottled_w, np.zeros_like(rung), rung)

    @property
    def commanded_power_w(self) -> float:
        """The domain's power once the commanded rungs have all taken effect (estimated)."""
        return self.power_now_w + float(np.sum(self.estimate_w(self.rung)) - np.sum(self.power_w))

    @property
    def rise_history_w(self) -> FloatArray:
        """The history whose rises are the workload's: unthrottled when known."""
        return self.history_w if self.unthrottled_history_w is None else self.unthrottled_history_w

    @property
    def power_now_w(self) -> float:
        """The domain's accounted power now."""
        return float(self.history_w[-1])


@dataclass(frozen=True)
class DomainPlan:
    """A policy's answer: the rung of every GPU, a level name for reports, and its memory."""

    rung: IntArray
    level: str
    memory: Any = None


class PowerPolicy(Protocol):
    """A power policy: given a domain and its own memory from the last tick, choose rungs."""

    name: ClassVar[str]

    def plan(self, view: DomainView, memory: Any) -> DomainPlan: ...


def clamp_rungs(rung: IntArray, ladders: LadderTable) -> IntArray:
    """Rungs limited to each GPU's ladder."""
    return np.clip(rung, 0, ladders.top).astype(np.int64)
