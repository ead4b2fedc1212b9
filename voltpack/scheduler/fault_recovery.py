"""What to do about a fault: what to take out of service, and how the affected gang recovers.

Pure decisions, shared by the operator and the fault simulator:

- `isolation_for`: a GPU fault cordons that GPU only (`isolation="gpu"`) or its whole node
  (`"node"`, the usual baseline); a host or link fault always cordons the node; a software
  fault cordons nothing.
- `recovery_for`: an elastic gang that keeps at least its minimum of healthy workers shrinks in
  place (the healthy ranks keep their state and go on with a smaller data-parallel degree, the
  global batch kept); anything else restarts the whole gang from its last checkpoint.
- `restart_workers`: the size a restarting gang is placed at: all its workers when they fit,
  else (elastic, shrinking allowed) the most that fit and are at least its minimum.
- `RestartBudget`: at most `max_restarts` re-placements of one gang in a sliding window, and an
  exponential backoff between them, so a flapping GPU does not churn the cluster.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from voltpack.policies.schema import RecoverySpec


class FaultScope(StrEnum):
    """What a fault takes out: one GPU, its whole node, or nothing (a software fault)."""

    GPU = "gpu"
    NODE = "node"
    JOB = "job"


class RecoveryKind(StrEnum):
    """How a gang hit by a fault goes on."""

    SHRINK = "shrink"
    """In place, without the failed workers: no rollback, a short reconfiguration pause."""
    RESTART = "restart"
    """The whole gang stops and is placed again from its last checkpoint."""


@dataclass(frozen=True)
class RecoveryPolicy:
    """How faults are isolated and gangs recovered."""

    isolation: Literal["gpu", "node"] = "gpu"
    """Cordon granularity for a GPU fault."""
    shrink: bool = True
    """Elastic gangs shrink (in place, or when restarted into less room) instead of waiting."""
    max_restarts: int = 3
    """Re-placements of one gang allowed within `budget_window_s`."""
    budget_window_s: float = 3600.0
    backoff_s: float = 60.0
    """Wait before the second re-placement in a window; doubles for each further one."""

    def __post_init__(self) -> None:
        if self.max_restarts < 1:
            raise ValueError(f"max_restarts must be >= 1, got {self.max_restarts}")
        if self.budget_window_s <= 0 or self.backoff_s < 0:
            raise ValueError("budget_window_s must be > 0 and backoff_s >= 0")


def recovery_policy(spec: RecoverySpec) -> RecoveryPolicy:
    """The recovery settings of a policy file's `spec.recovery`."""
    return RecoveryPolicy(**spec.model_dump())


RESTART_ALL = RecoveryPolicy(isolation="node", shrink=False)
"""The baseline: node-level cordon, every fault restarts the whole gang at full size."""


@dataclass(frozen=True)
class Isolation:
    """What a fault takes out of the scheduler's capacity."""

    gpus: frozenset[tuple[int, int]] = frozenset()
    """(node, GPU index) pairs cordoned."""
    nodes: frozenset[int] = frozenset()
    """Whole nodes cordoned."""

    def covers(self, node: int, gpu: int) -> bool:
        """True when this isolation takes GPU `gpu` of node `node` out."""
        return node in self.nodes or (node, gpu) in self.gpus


def isolation_for(scope: FaultScope, node: int, gpu: int, policy: RecoveryPolicy) -> Isolation:
    """What to cordon for a fault of `scope` seen on GPU `gpu` of node `node`."""
    if scope is FaultScope.JOB:
        return Isolation()
    if scope is FaultScope.GPU and policy.isolation == "gpu":
        return Isolation(gpus=frozenset({(node, gpu)}))
    return Isolation(nodes=frozenset({node}))


@dataclass(frozen=True)
class GangShape:
    """A gang's size in workers (pods), and what it accepts."""

    workers: int
    """Workers running now."""
    full_workers: int
    """Workers asked for (the size it grows back to)."""
    min_workers: int
    """Fewest workers it runs with (== full_workers: not elastic)."""

    def __post_init__(self) -> None:
        if not 1 <= self.min_workers <= self.full_workers:
            raise ValueError(
                f"need 1 <= min_workers <= full_workers, got {self.min_workers}, "
                f"{self.full_workers}"
            )

    @property
    def elastic(self) -> bool:
        return self.min_workers < self.full_workers


def recovery_for(
    scope: FaultScope, gang: GangShape, lost_workers: int, policy: RecoveryPolicy
) -> RecoveryKind:
    """Shrink in place when the gang is elastic and keeps its minimum, else restart it."""
    if scope is FaultScope.JOB or not policy.shrink or lost_workers <= 0:
        return RecoveryKind.RESTART
    if gang.workers - lost_workers >= gang.min_workers:
        return RecoveryKind.SHRINK
    return RecoveryKind.RESTART


def restart_workers(gang: GangShape, workers_that_fit: int, policy: RecoveryPolicy) -> int | None:
    """Workers to place a restarting (or growing) gang with; None: it must wait."""
    if workers_that_fit >= gang.full_workers:
        return gang.full_workers
    if policy.shrink and gang.elastic and workers_that_fit >= gang.min_workers:
        return workers_that_fit
    return None


@dataclass
class RestartBudget:
    """Re-placements per gang within a sliding window, with exponential backoff."""

    policy: RecoveryPolicy
    _history: dict[str, deque[float]] = field(default_factory=dict)

    def next_allowed_s(self, gang: str, now_s: float) -> float:
        """Earliest time (>= now_s) at which `gang` may be re-placed again."""
        times = self._recent(gang, now_s)
        if not times:
            return now_s
        if len(times) >= self.policy.max_restarts:
            return max(now_s, times[0] + self.policy.budget_window_s)
        backoff = self.policy.backoff_s * 2.0 ** (len(times) - 1)
        return max(now_s, times[-1] + backoff)

    def record(self, gang: str, now_s: float) -> None:
        """Count a re-placement of `gang` at `now_s` (call only when `next_allowed_s` allows)."""
        if self.next_allowed_s(gang, now_s) > now_s:
            raise ValueError(f"gang {gang}: re-placement at {now_s} is over its budget")
        self._history.setdefault(gang, deque()).append(now_s)

    def count(self, gang: str, now_s: float) -> int:
        """Re-placements of `gang` within the window ending at `now_s`."""
        return len(self._recent(gang, now_s))

    def times(self, gang: str, now_s: float) -> tuple[float, ...]:
        """Times of the re-placements of `gang` within the window ending at `now_s`."""
        return tuple(self._recent(gang, now_s))

    def _recent(self, gang: str, now_s: float) -> deque[float]:
        times = self._history.get(gang, deque())
        while times and times[0] <= now_s - self.policy.budget_window_s:
            times.popleft()
        return times


@dataclass(frozen=True)
class FaultedGang:
    """A running gang some of whose workers sit on a fault (a cordoned GPU or node)."""

    name: str
    scope: FaultScope
    """The widest scope among the faults its workers sit on."""
    shape: GangShape
    hit_workers: int
    """Workers on the fault."""
    elastic: bool
    """It may run with fewer workers (shrink in place) at all."""
    restart_deferred_until_s: float | None
    """When its restart budget next allows a re-placement, if not now (None: now)."""
    pods: frozenset[str] = frozenset()
    """Its running workers (pod names): while it recovers, it is no preemption victim."""


@dataclass(frozen=True)
class RecoveryChoice:
    """What the session chose for a faulted gang: shrink, restart, or wait for its budget."""

    kind: RecoveryKind | None
    """None: the restart is deferred until `deferred_until_s`."""
    deferred_until_s: float | None = None


def choose_recovery(gang: FaultedGang, policy: RecoveryPolicy) -> RecoveryChoice:
    """Shrink an elastic gang in place when it keeps its minimum; else restart it from its
    checkpoint when its budget allows, or defer the restart until it does."""
    kind = (
        recovery_for(gang.scope, gang.shape, gang.hit_workers, policy)
        if gang.elastic
        else RecoveryKind.RESTART
    )
    if kind is RecoveryKind.SHRINK:
        return RecoveryChoice(RecoveryKind.SHRINK)
    if gang.restart_deferred_until_s is not None:
        return RecoveryChoice(None, gang.restart_deferred_until_s)
    return RecoveryChoice(RecoveryKind.RESTART)
