"""A scheduling cycle with queues: fair order, limits, then reclaim or preemption if needed.

Pure. Each step takes the next gang in the ordering's order (queues by share, root level
first; within a queue by priority and arrival), asked again after every placement; a gang
whose queue (or an ancestor) would go over a limit stays pending with the reason; a gang that
does not fit may evict whole gangs (`preemption.py`). Gangs placed in this cycle are never
evicted in the same cycle.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.decision import Decision
from voltpack.model.snapshot import NO_GPU_MODEL, ClusterSnapshot
from voltpack.model.work import Eviction, GpuAmounts, RunningGang, gpus_by_model
from voltpack.model.workload import PodGroup
from voltpack.policies.fair_share import QueueOrdering
from voltpack.policies.hetero.model_choice import ModelChoice
from voltpack.scheduler.placement import Scheduler
from voltpack.scheduler.preemption import PreemptionRules, VictimPool, find_victims
from voltpack.scheduler.queues import (
    QueueTree,
    QueueUsage,
    at_limit,
    borrowed,
    exceeded,
)
from voltpack.scheduler.statement import Statement

Reserve = Callable[[Decision], str | None]
"""The Reserve step: devices for a gang just placed; None when reserved, else why not."""


@dataclass(frozen=True)
class PendingGang:
    """A gang waiting to be placed, in a queue, with a priority and an arrival rank."""

    group: PodGroup
    queue: str
    priority: int = 0
    arrival: int = 0
    """Lower arrived earlier."""
    preemptible: bool = False
    model_choice: ModelChoice | None = None
    """The allocation's order of GPU models (heterogeneity-aware training): each is tried
    alone, in order, before the gang's other accepted models."""
    awaiting_victims: str | None = None
    """Why the gang may not preempt now: the pods it preempted before still terminate on its
    nominated nodes (kube-scheduler's `PodEligibleToPreemptOthers`). None: it may."""

    @property
    def gpus(self) -> float:
        """GPUs the whole gang asks for."""
        return sum(p.gpu_request_milli for p in self.group.pods) / MILLI_PER_GPU


@dataclass
class QueueReport:
    """What one queue (with its subtree) holds and waits for after the cycle."""

    allocated_gpus: GpuAmounts
    borrowed_gpus: GpuAmounts
    pending_gangs: int
    at_limit: list[str] = field(default_factory=list)
    """One message per reached limit, e.g. 'queue a: A100 16 of limit 16 GPUs'."""
    held_by_limit: int = 0
    """Gangs of this queue's subtree kept pending by this queue's limit."""


@dataclass
class QueueCyclePlan:
    """Decisions in the order tried, evictions to carry out, and the queues' reports."""

    decisions: list[Decision] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    placed: list[RunningGang] = field(default_factory=list)
    reports: dict[str, QueueReport] = field(default_factory=dict)


def snapshot_capacity(snapshot: ClusterSnapshot) -> GpuAmounts:
    """GPUs per GPU model in the cluster."""
    capacity: GpuAmounts = {}
    for row, model_index in enumerate(snapshot.node_gpu_model):
        if model_index != NO_GPU_MODEL:
            model = snapshot.gpu_models[int(model_index)]
            capacity[model] = capacity.get(model, 0.0) + float(snapshot.gpu_count[row])
    return capacity


def accepted_models(snapshot: ClusterSnapshot, group: PodGroup) -> list[str]:
    """GPU models of the cluster that every GPU pod of the gang accepts."""
    models = list(snapshot.gpu_models)
    for pod in group.pods:
        if pod.num_gpu and pod.gpu_models:
            models = [m for m in models if m in pod.gpu_models]
    return models


def restricted(group: PodGroup, models: Sequence[str]) -> PodGroup:
    """The gang with every GPU pod limited to `models`."""
    pods = tuple(
        pod.model_copy(update={"gpu_models": tuple(models)}) if pod.num_gpu else pod
        for pod in group.pods
    )
    return group.model_copy(update={"pods": pods})


def schedule_queues(
    scheduler: Scheduler,
    snapshot: ClusterSnapshot,
    tree: QueueTree,
    pending: Sequence[PendingGang],
    running: Sequence[RunningGang],
    ordering: QueueOrdering,
    rules: PreemptionRules,
    now_s: float,
    rng: np.random.Generator,
    before_each: Callable[[PendingGang], None] | None = None,
    reserve: Reserve | None = None,
) -> QueueCyclePlan:
    """Decide every pending gang on `snapshot` (which the decisions change).

    `before_each` is called with each gang just before it is tried (e.g. to show the scoring
    strategy its arrival, as the simulator does). `reserve` is the Reserve step: called with
    each gang just placed, it returns None when the gang's devices are reserved, or why not;
    the gang is then rolled back (its victims too) and waits with that reason.

    Running gangs of an unknown or invalid queue keep running; they count for no queue and are
    never evicted.
    """
    plan = QueueCyclePlan()
    statement = Statement(snapshot)
    usage = QueueUsage(tree)
    victims = VictimPool((g for g in running if g.queue in tree.queues), snapshot)
    for holder in (g for gangs in victims.by_queue.values() for g in gangs):
        usage.add(holder.queue, victims.models[holder.name])
    capacity = snapshot_capacity(snapshot)
    waiting: dict[str, list[PendingGang]] = {}
    held_by_limit: dict[str, int] = {}
    for gang in pending:
        problem = tree.problem(gang.queue)
        if problem is not None:
            plan.decisions.append(
                Decision(subject=gang.group.name, placed=False, reason=f"gang waits: {problem}")
            )
            continue
        waiting.setdefault(gang.queue, []).append(gang)
    queued: dict[str, deque[PendingGang]] = {
        queue: deque(
            sorted(gangs, key=lambda g: (ordering.gang_key(g.priority, g.arrival), g.group.name))
        )
        for queue, gangs in waiting.items()
    }
    unplaced: list[PendingGang] = []
    step = _Step(scheduler, statement, tree, usage, victims, rules, now_s, rng, reserve)

    def attempt(gang: PendingGang) -> None:
        if before_each is not None:
            before_each(gang)
        decision = step.decide(gang, plan, held_by_limit)
        plan.decisions.append(decision)
        if not decision.placed:
            unplaced.append(gang)

    for gang in _nominated_first(queued, ordering):
        attempt(gang)
    while queued:

        def rank(queue: str) -> tuple[tuple[float, ...], tuple[int, ...], str]:
            head = queued[queue][0]
            path = tuple(
                ordering.queue_share(usage.of(q), capacity, tree.queues[q].weight)
                for q in reversed(tree.chain(queue))
            )
            return path, ordering.gang_key(head.priority, head.arrival), head.group.name

        queue = min(queued, key=rank)
        gang = queued[queue].popleft()
        if not queued[queue]:
            del queued[queue]
        attempt(gang)
    statement.commit()
    plan.reports = _reports(tree, usage, unplaced, held_by_limit)
    return plan


def _nominated_first(
    queued: dict[str, deque[PendingGang]], ordering: QueueOrdering
) -> list[PendingGang]:
    """The gangs an earlier cycle's preemption nominated to nodes (a pod with
    `status.nominatedNodeName`), taken out of `queued`, highest priority first: they are tried
    before every other gang, so what their victims freed is not taken by a gang of another
    queue that fair share happens to serve first (kube-scheduler counts a nominated pod on its
    node for every pod of lower or equal priority; here for every pod)."""
    nominated = [
        gang
        for gangs in queued.values()
        for gang in gangs
        if any(p.constraints is not None and p.constraints.nominated_node for p in gang.group.pods)
    ]
    if not nominated:
        return []
    names = {gang.group.name for gang in nominated}
    for queue in list(queued):
        queued[queue] = deque(g for g in queued[queue] if g.group.name not in names)
        if not queued[queue]:
            del queued[queue]
    return sorted(nominated, key=lambda g: (ordering.gang_key(g.priority, g.arrival), g.group.name))


@dataclass
class _Step:
    """Decides one pending gang inside the session's statement: limits, placement (by the
    allocation's model order first), Reserve, and preemption when it does not fit."""

    scheduler: Scheduler
    statement: Statement
    tree: QueueTree
    usage: QueueUsage
    victims: VictimPool
    rules: PreemptionRules
    now_s: float
    rng: np.random.Generator
    reserve: Reserve | None

    def decide(
        self, gang: PendingGang, plan: QueueCyclePlan, held_by_limit: dict[str, int]
    ) -> Decision:
        snapshot, usage = self.statement.snapshot, self.usage
        group, chain = gang.group, self.tree.chain(gang.queue)
        needs_gpus = gang.gpus > 0
        models = accepted_models(snapshot, group) if needs_gpus else []
        allowed = [m for m in models if exceeded(usage, chain, m, gang.gpus, "limit") is None]
        if needs_gpus and models and not allowed:
            bound = exceeded(usage, chain, models[0], gang.gpus, "limit")
            assert bound is not None
            held_by_limit[bound.queue] = held_by_limit.get(bound.queue, 0) + 1
            return Decision(
                subject=group.name,
                placed=False,
                reason=(
                    f"gang {group.name} waits: {bound.describe('limit')} in use with it, over "
                    f"the limit (the gang needs {gang.gpus:g} GPUs)"
                ),
            )
        if gang.model_choice is not None and needs_gpus:
            chosen = self._place_by_allocation(gang, allowed)
            if chosen is not None:
                one_model, decision = chosen
                self._record(gang, one_model, decision, plan)
                return decision
        trial_group = restricted(group, allowed) if allowed and allowed != models else group
        decision = self._placed_and_reserved(trial_group)
        if decision.placed:
            self._record(gang, trial_group, decision, plan)
            return decision
        if not (self.rules.reclaim or self.rules.priority_preemption):
            return decision
        if not needs_gpus and not (
            self.rules.priority_preemption and self.rules.any_lower_priority
        ):
            return decision  # voltpack's queues account GPUs: only kube's rule frees the rest
        if any(p.constraints is not None and p.constraints.never_preempts for p in group.pods):
            return decision.model_copy(
                update={"reason": f"{decision.reason}; no preemption: preemptionPolicy is Never"}
            )
        if gang.awaiting_victims is not None:
            return decision.model_copy(
                update={"reason": f"{decision.reason}; no preemption: {gang.awaiting_victims}"}
            )
        return self._preempt(gang, decision, allowed, plan)

    def _placed_and_reserved(self, group: PodGroup) -> Decision:
        """`group` placed and its devices reserved, or rolled back with the reason."""
        mark = self.statement.checkpoint()
        decision = self.scheduler.place(self.statement.snapshot, group, self.rng)
        if not decision.placed:
            return decision
        why = self.reserve(decision) if self.reserve is not None else None
        if why is None:
            return decision
        self.statement.rollback(to=mark)
        return Decision(subject=group.name, placed=False, reason=why)

    def _place_by_allocation(
        self, gang: PendingGang, allowed: Sequence[str]
    ) -> tuple[PodGroup, Decision] | None:
        """The gang on the first model of its allocation order that takes it whole now, or
        None. The gang is narrowed to one model per attempt; the decision's reason says why
        that model (share and relative throughput) and which preferred models had no room."""
        assert gang.model_choice is not None
        tried: list[str] = []
        for model in (m for m in gang.model_choice.models if m in allowed):
            one_model = restricted(gang.group, [model])
            decision = self._placed_and_reserved(one_model)
            if not decision.placed:
                tried.append(model)
                continue
            parts = [gang.model_choice.reason(model)]
            if tried:
                parts.append(f"{', '.join(tried)} had no room for the whole gang now")
            parts.append(decision.reason)
            return one_model, decision.model_copy(update={"reason": "; ".join(parts)})
        return None

    def _preempt(
        self, gang: PendingGang, decision: Decision, allowed: Sequence[str], plan: QueueCyclePlan
    ) -> Decision:
        """Evict whole gangs (or shrink elastic ones) so that `gang` fits, model by model."""
        snapshot, usage, statement = self.statement.snapshot, self.usage, self.statement
        group, chain = gang.group, self.tree.chain(gang.queue)
        reasons = []
        models: list[str | None] = (
            list(_guaranteed_first(usage, chain, allowed, gang.gpus)) if gang.gpus > 0 else [None]
        )
        for model in models:
            one_model = restricted(group, [model]) if model is not None else group
            found, why = find_victims(
                self.scheduler, statement, one_model, gang.queue, gang.priority, model,
                self.victims, usage, self.now_s, self.rules, self.rng,
            )  # fmt: skip
            if found is None:
                reasons.append(why)
                continue
            mark = statement.checkpoint()
            for eviction in found.evictions:
                for pod, node, gpus in eviction.gang.pods:
                    statement.release(node, pod, gpus)
            for placement in found.decision.placements:
                node = snapshot.node_index(placement.node)
                statement.allocate(node, found.pods[placement.pod], placement.gpu_indices)
            refused = self.reserve(found.decision) if self.reserve is not None else None
            if refused is not None:
                statement.rollback(to=mark)
                where = f"on {model} " if model is not None else ""
                reasons.append(f"{where}after preemption: {refused}")
                continue
            for eviction in found.evictions:
                usage.add(eviction.gang.queue, eviction.gang.gpus_by_model(snapshot), sign=-1.0)
                self.victims.remove(eviction.gang)
                plan.evictions.append(eviction)
            names = ", ".join(e.gang.name for e in found.evictions)
            placed = found.decision.model_copy(
                update={"reason": f"{found.decision.reason}; after preempting {names}"}
            )
            self._record(gang, one_model, placed, plan)
            return placed
        if not reasons:  # no GPU model the gang accepts is in the cluster: nothing to free
            reasons.append(_no_model_reason(group))
        return decision.model_copy(
            update={"reason": f"{decision.reason}; no preemption: " + "; ".join(reasons)}
        )

    def _record(
        self, gang: PendingGang, group: PodGroup, decision: Decision, plan: QueueCyclePlan
    ) -> None:
        snapshot = self.statement.snapshot
        pods = {p.name: p for p in group.pods}
        placed = tuple(
            (pods[p.pod], snapshot.node_index(p.node), p.gpu_indices) for p in decision.placements
        )
        running = RunningGang(
            name=group.name,
            queue=gang.queue,
            priority=gang.priority,
            preemptible=gang.preemptible,
            started_s=self.now_s,
            pods=placed,
        )
        self.usage.add(gang.queue, gpus_by_model(snapshot, ((p, n) for p, n, _ in placed)))
        plan.placed.append(running)


def _no_model_reason(group: PodGroup) -> str:
    """Why preemption cannot help a gang whose accepted GPU models no node has."""
    wanted = sorted({m for pod in group.pods if pod.num_gpu for m in pod.gpu_models})
    if wanted:
        return f"no node has a GPU of a model it accepts ({', '.join(wanted)})"
    return "no node has GPUs"


def _guaranteed_first(
    usage: QueueUsage, chain: Sequence[str], models: Sequence[str], gpus: float
) -> list[str]:
    """`models`, those on which the gang stays within its guarantees first."""
    return sorted(models, key=lambda m: exceeded(usage, chain, m, gpus, "guaranteed") is not None)


def _reports(
    tree: QueueTree,
    usage: QueueUsage,
    unplaced: Sequence[PendingGang],
    held_by_limit: dict[str, int],
) -> dict[str, QueueReport]:
    pending: dict[str, int] = {}
    for gang in unplaced:
        for queue in tree.chain(gang.queue):
            pending[queue] = pending.get(queue, 0) + 1
    return {
        name: QueueReport(
            allocated_gpus={m: round(v, 6) for m, v in sorted(usage.of(name).items())},
            borrowed_gpus=borrowed(usage, name),
            pending_gangs=pending.get(name, 0),
            at_limit=[b.describe("limit") for b in at_limit(usage, name)],
            held_by_limit=held_by_limit.get(name, 0),
        )
        for name in sorted(tree.queues)
    }
