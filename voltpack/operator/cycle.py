"""One scheduling cycle of the operator: the core decides, nothing is written yet."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from voltpack.model.decision import Decision, Placement
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.operator.cluster_view import PendingWork
from voltpack.scheduler.cycle import Scheduler


@dataclass
class CyclePlan:
    """Gangs to bind (each all together) and pods that stay pending, with the reason."""

    gangs: list[tuple[Placement, ...]] = field(default_factory=list)
    unplaced: dict[str, str] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)


def plan_cycle(
    scheduler: Scheduler,
    snapshot: ClusterSnapshot,
    work: PendingWork,
    rng: np.random.Generator,
    observed: set[str] | None = None,
) -> CyclePlan:
    """Decide every pending gang on `snapshot` (which the decisions change).

    `observed` holds the pods the strategy has already seen arrive; new ones are shown to it
    (and added) before scheduling, as the simulator does on arrival.
    """
    plan = CyclePlan(unplaced=dict(work.held))
    for group in work.groups:
        for pod in group.pods:
            if observed is not None and pod.name not in observed:
                scheduler.observe_arrival(pod)
                observed.add(pod.name)
        if len(group.pods) == 1 and group.min_member == 1:
            decision = scheduler.schedule_pod(snapshot, group.pods[0], rng)
        else:
            decision = scheduler.schedule_group(snapshot, group, rng)
        plan.decisions.append(decision)
        if decision.placed:
            plan.gangs.append(decision.placements)
            placed = {p.pod for p in decision.placements}
            for pod in group.pods:
                if pod.name not in placed:
                    plan.unplaced[pod.name] = decision.reason
        else:
            for pod in group.pods:
                plan.unplaced[pod.name] = decision.reason
    return plan
