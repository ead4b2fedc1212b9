"""One scheduling session: every decision of a cycle, in order, through one statement.

In the manner of KAI-Scheduler's session, the steps run inside the core, in this order:

0. **recovery**: each gang hit by a fault shrinks in place, restarts from its checkpoint, or
   waits for its restart budget (`fault_recovery.choose_recovery`); a gang that recovers is
   no preemption victim in the same session. Its pods keep their GPUs until they are gone
   (a pod being deleted still runs), so recovery frees nothing within the session;
1. **queue order and quotas**: the next gang of the queue with the lowest share (within a
   queue by priority, then arrival), and no gang beyond a limit (`queue_cycle.py`);
2. **placement** with topology (a gang with a topology request as one unit);
3. **Reserve**: the gang's devices (e.g. DRA claims) through `DeviceReserver`; a gang whose
   devices cannot be had there is rolled back within the statement, and waits;
4. **preemption and reclaim**: victims released inside the statement, every trial rolled
   back to a checkpoint (the snapshot is never copied).

Drivers (the operator, the queue simulator `sim/queues.py`, the policy dry run) build the
input, call `decide`, and apply the plan; nothing here does I/O or reads a clock. The packing
simulators place pod by pod through the same `Scheduler.place` the session calls (their
protocols have no queues).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from voltpack.model.decision import Decision, Placement
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.work import Eviction, PendingWork, RunningGang
from voltpack.policies.fair_share import FairShareOrdering, QueueOrdering
from voltpack.policies.hetero.model_choice import ModelChoice
from voltpack.scheduler.fault_recovery import (
    FaultedGang,
    RecoveryChoice,
    RecoveryPolicy,
    choose_recovery,
)
from voltpack.scheduler.placement import Scheduler
from voltpack.scheduler.preemption import PreemptionRules
from voltpack.scheduler.queue_cycle import PendingGang, QueueReport, schedule_queues
from voltpack.scheduler.queues import DEFAULT_QUEUE, QueueTree

DEFAULT_RECOVERY = RecoveryPolicy()


class DeviceReserver(Protocol):
    """The Reserve step: devices (e.g. DRA claims) for a gang the session just placed."""

    def reserve(self, gang: str, placements: Sequence[Placement]) -> str | None:
        """Reserve them for the rest of the session: None when done, else why they cannot be
        had on the chosen nodes (the gang is rolled back and waits with that reason)."""
        ...


@dataclass
class SessionQueues:
    """The queues of a session: the tree, the rules, what runs, and each pending gang's queue."""

    tree: QueueTree = field(default_factory=lambda: QueueTree.build({}))
    ordering: QueueOrdering = field(default_factory=FairShareOrdering)
    rules: PreemptionRules = field(default_factory=PreemptionRules)
    running: list[RunningGang] = field(default_factory=list)
    gangs: dict[str, tuple[str, bool]] = field(default_factory=dict)
    """Pending gang name -> (queue, preemptible); absent: the default queue, not preemptible."""
    now_s: float = 0.0
    model_choices: dict[str, ModelChoice] = field(default_factory=dict)
    """Gang name -> the allocation's order of GPU models (heterogeneity-aware training)."""
    awaiting_victims: dict[str, str] = field(default_factory=dict)
    """Gang name -> why it waits for its earlier victims to terminate instead of preempting."""


@dataclass
class Plan:
    """Gangs to evict, gangs to bind (each all together) and pods that stay pending, why."""

    gangs: list[tuple[Placement, ...]] = field(default_factory=list)
    unplaced: dict[str, str] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    queue_reports: dict[str, QueueReport] = field(default_factory=dict)
    recoveries: dict[str, RecoveryChoice] = field(default_factory=dict)
    """Faulted gang -> how it recovers (the driver carries it out)."""


def decide(
    scheduler: Scheduler,
    snapshot: ClusterSnapshot,
    work: PendingWork,
    rng: np.random.Generator,
    observed: set[str] | None = None,
    queues: SessionQueues | None = None,
    reserver: DeviceReserver | None = None,
    faulted: Sequence[FaultedGang] = (),
    recovery: RecoveryPolicy = DEFAULT_RECOVERY,
) -> Plan:
    """Decide every pending gang on `snapshot` (which the decisions change), queue by queue.

    `observed` holds the pods the strategy has already seen arrive; new ones are shown to it
    (and added) before they are tried, as the simulator does on arrival. Without `queues`,
    every gang is in the default queue and nothing is preempted; without `reserver`,
    placement needs no devices beyond the snapshot's. `faulted` are the running gangs on a
    fault; `recovery` the policy that chooses for them.
    """
    context = queues or SessionQueues()
    plan = Plan(unplaced=dict(work.held))
    plan.recoveries = {gang.name: choose_recovery(gang, recovery) for gang in faulted}
    recovering = {
        pod for gang in faulted if plan.recoveries[gang.name].kind is not None for pod in gang.pods
    }
    running = (
        [g for g in context.running if not any(p.name in recovering for p, _, _ in g.pods)]
        if recovering
        else context.running
    )
    pending = []
    for arrival, group in enumerate(work.groups):
        queue, preemptible = context.gangs.get(group.name, (DEFAULT_QUEUE, False))
        priority = max(pod.priority for pod in group.pods)
        choice = context.model_choices.get(group.name)
        awaiting = context.awaiting_victims.get(group.name)
        pending.append(PendingGang(group, queue, priority, arrival, preemptible, choice, awaiting))

    def observe(gang: PendingGang) -> None:
        for pod in gang.group.pods:
            if observed is not None and pod.name not in observed:
                scheduler.observe_arrival(pod)
                observed.add(pod.name)

    def reserve(decision: Decision) -> str | None:
        assert reserver is not None
        return reserver.reserve(decision.subject, decision.placements)

    result = schedule_queues(
        scheduler, snapshot, context.tree, pending, running, context.ordering,
        context.rules, context.now_s, rng, observe, reserve if reserver is not None else None,
    )  # fmt: skip
    groups = {group.name: group for group in work.groups}
    for decision in result.decisions:
        plan.decisions.append(decision)
        group = groups[decision.subject]
        placed = {p.pod for p in decision.placements} if decision.placed else set()
        if decision.placed:
            plan.gangs.append(decision.placements)
        for pod in group.pods:
            if pod.name not in placed:
                plan.unplaced[pod.name] = decision.reason
    plan.evictions = result.evictions
    plan.queue_reports = result.reports
    return plan
