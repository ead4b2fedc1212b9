"""One scheduling cycle of the operator: the core decides, nothing is written yet."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from voltpack.model.decision import Decision, Placement
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.operator.scheduling.cluster_view import PendingWork
from voltpack.policies.fair_share import FairShareOrdering, QueueOrdering
from voltpack.policies.hetero.model_choice import ModelChoice
from voltpack.scheduler.cycle import Scheduler
from voltpack.scheduler.preemption import Eviction, PreemptionRules, RunningGang
from voltpack.scheduler.queue_cycle import PendingGang, QueueReport, schedule_queues
from voltpack.scheduler.queues import DEFAULT_QUEUE, QueueTree


@dataclass
class QueueContext:
    """The queues of a cycle: the tree, the rules, what runs, and each pending gang's queue."""

    tree: QueueTree = field(default_factory=lambda: QueueTree.build({}))
    ordering: QueueOrdering = field(default_factory=FairShareOrdering)
    rules: PreemptionRules = field(default_factory=PreemptionRules)
    running: list[RunningGang] = field(default_factory=list)
    gangs: dict[str, tuple[str, bool]] = field(default_factory=dict)
    """Pending gang name -> (queue, preemptible); absent: the default queue, not preemptible."""
    now_s: float = 0.0
    model_choices: dict[str, ModelChoice] = field(default_factory=dict)
    """Gang name -> the allocation's order of GPU models (heterogeneity-aware training)."""


@dataclass
class CyclePlan:
    """Gangs to evict, gangs to bind (each all together) and pods that stay pending, why."""

    gangs: list[tuple[Placement, ...]] = field(default_factory=list)
    unplaced: dict[str, str] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    queue_reports: dict[str, QueueReport] = field(default_factory=dict)


def plan_cycle(
    scheduler: Scheduler,
    snapshot: ClusterSnapshot,
    work: PendingWork,
    rng: np.random.Generator,
    observed: set[str] | None = None,
    queues: QueueContext | None = None,
) -> CyclePlan:
    """Decide every pending gang on `snapshot` (which the decisions change), queue by queue.

    `observed` holds the pods the strategy has already seen arrive; new ones are shown to it
    (and added) before scheduling, as the simulator does on arrival. Without `queues`, every
    gang is in the default queue and nothing is preempted.
    """
    context = queues or QueueContext()
    plan = CyclePlan(unplaced=dict(work.held))
    pending = []
    for arrival, group in enumerate(work.groups):
        queue, preemptible = context.gangs.get(group.name, (DEFAULT_QUEUE, False))
        priority = max(pod.priority for pod in group.pods)
        choice = context.model_choices.get(group.name)
        pending.append(PendingGang(group, queue, priority, arrival, preemptible, choice))

    def observe(gang: PendingGang) -> None:
        for pod in gang.group.pods:
            if observed is not None and pod.name not in observed:
                scheduler.observe_arrival(pod)
                observed.add(pod.name)

    result = schedule_queues(
        scheduler, snapshot, context.tree, pending, context.running,
        context.ordering, context.rules, context.now_s, rng, observe,
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
