"""The seam between a cycle's decision and the cluster: what the cycle read, and the writers.

The operator's cycle reads its caches into a `CycleInput`, asks the core's session for a
`Plan` (`voltpack/scheduler/session.py`), and then, as leader, hands both to each
`PlanWriter` in turn: bindings, evictions, Events, statuses, jobs. A writer only writes; it
decides nothing the session did not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.topology import ClusterTopology
from voltpack.operator.dra.support import ClaimReserver
from voltpack.operator.scheduling.gpu_faults import GpuFaultSeen
from voltpack.operator.scheduling.hetero import HeteroCycle
from voltpack.scheduler.fault_recovery import FaultedGang, Isolation
from voltpack.scheduler.queues import QueueTree
from voltpack.scheduler.session import Plan


@dataclass
class OperatorStats:
    """What the operator did since it started (the metrics and the tests read these)."""

    cycles: int = 0
    bound: int = 0
    bind_failures: int = 0
    evicted_gangs: int = 0
    nominated: int = 0
    """Pods given a `nominatedNodeName` while the pods they preempted terminate."""
    undone_gangs: int = 0
    """Gangs bound in part and undone (a failed binding, or found partly bound later)."""
    moved_jobs: int = 0
    """Training jobs preempted at a round boundary to run on another GPU model."""
    events: int = 0
    failed_cycles: int = 0
    last_plan: Plan | None = field(default=None, repr=False)


@dataclass
class CycleInput:
    """What one cycle read from the caches (the cached objects themselves, never changed) and
    derived before the session decided."""

    pods: list[dict[str, Any]]
    by_key: dict[str, dict[str, Any]]
    """Pods by `namespace/name`."""
    nodes: list[dict[str, Any]]
    gpujobs: Sequence[dict[str, Any]]
    snapshot: ClusterSnapshot
    """After the session: this cycle's decisions are in it."""
    faults: list[GpuFaultSeen]
    isolation: Isolation
    """What the faults take out of service (the recovery policy's granularity)."""
    faulted: list[FaultedGang] | None
    """The gangs on a fault, prepared for the session's recovery step; None: not prepared
    (this replica did not lead when the cycle began)."""
    topology_objects: Sequence[dict[str, Any]]
    topology_statuses: dict[str, dict[str, Any]]
    topology: ClusterTopology | None
    queue_objects: Sequence[dict[str, Any]]
    tree: QueueTree
    hetero: HeteroCycle
    topology_gangs: set[str]
    """Gangs with a topology request (their placement reason is recorded on the pods)."""
    reserver: ClaimReserver
    """The Reserve step's results: the claim writes of each gang it reserved."""
    gated: set[str] = field(default_factory=set)
    """Pods held for their scheduling gates."""
    assumed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Pods bound by this cycle, as the binding made them (for the writers after it)."""

    def pods_after_binding(self) -> list[dict[str, Any]]:
        """The pods with this cycle's bindings in them."""
        if not self.assumed:
            return list(self.pods)
        return [self.assumed.get(key, pod) for key, pod in self.by_key.items()]


class PlanWriter(Protocol):
    """Carries out one kind of a plan's changes (bindings, evictions, Events, statuses)."""

    def apply(self, plan: Plan, cycle: CycleInput) -> None:
        """Write what `plan` says for this writer's kind, against what `cycle` read."""
        ...
