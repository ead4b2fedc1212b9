"""Preemption and reclaim: which running gangs (whole) to evict so that a pending gang fits.

Pure. Two reasons to evict a running gang, each only once it has run `min_runtime_s` (so that
two queues cannot take GPUs back and forth every cycle):

- *reclaim*: the pending gang stays within its queue's guarantee on a GPU model, and the
  victim's queue borrows (its usage is above its guarantee) below the two queues' lowest common
  ancestor: a queue never loses GPUs within its guarantee to another queue;
- *priority*: the victim is in the same queue, with a lower priority, and preemptible
  (annotated so; or any pod, for any resource, with `any_lower_priority`, as kube-scheduler
  preempts: then gangs that ask for no GPU preempt as well).

Victims are tried greedily (reclaim before priority, those whose eviction a PodDisruptionBudget
allows before those it does not, preemptible before not, lowest priority, most recently
started), each set checked by placing the gang with
the victims' pods released (inside the session's statement, rolled back to a checkpoint);
then every victim the gang can do without is dropped again.
An elastic victim (`min_pods`) is first only shrunk to its minimum (its last pods evicted);
only if shrinking every candidate is not enough are victims evicted whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.decision import Decision
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.work import Eviction, GpuAmounts, RunningGang, gpus_by_model
from voltpack.model.workload import Pod, PodGroup
from voltpack.policies.schema import QueueingSpec
from voltpack.scheduler.placement import Scheduler
from voltpack.scheduler.queues import QueueUsage, borrowing, exceeded
from voltpack.scheduler.statement import Statement


@dataclass(frozen=True)
class PreemptionPlan:
    """Victims to evict (whole gangs) and where the pending gang then goes."""

    evictions: tuple[Eviction, ...]
    decision: Decision
    pods: dict[str, Pod]
    """The pending gang's pods by name (as placed, with their GPU-model restriction)."""


@dataclass(frozen=True)
class PreemptionRules:
    """When running gangs may be evicted."""

    min_runtime_s: float = 60.0
    reclaim: bool = True
    priority_preemption: bool = True
    any_lower_priority: bool = False
    """Priority preemption may take any lower-priority pod of the queue (kube-scheduler's
    rule), not only gangs annotated preemptible, and frees any resource, not only GPUs."""

    @classmethod
    def of(cls, queueing: QueueingSpec) -> PreemptionRules:
        """The rules a policy file's `spec.queueing` sets."""
        return cls(
            queueing.min_runtime_s,
            queueing.reclaim,
            queueing.priority_preemption,
            queueing.priority_victims == "any",
        )


class VictimPool:
    """Running gangs that may be evicted, indexed by queue, so that a cycle with many pending
    gangs and many running ones looks only at queues that could give something up."""

    def __init__(self, gangs: Iterable[RunningGang], snapshot: ClusterSnapshot) -> None:
        self.by_queue: dict[str, list[RunningGang]] = {}
        self.preemptible: dict[str, list[RunningGang]] = {}
        self.models: dict[str, GpuAmounts] = {}
        for gang in gangs:
            self.by_queue.setdefault(gang.queue, []).append(gang)
            if gang.preemptible:
                self.preemptible.setdefault(gang.queue, []).append(gang)
            self.models[gang.name] = gang.gpus_by_model(snapshot)

    def remove(self, gang: RunningGang) -> None:
        """Take an evicted (or shrunk) gang out, by name."""
        self.by_queue[gang.queue] = [g for g in self.by_queue[gang.queue] if g.name != gang.name]
        if gang.queue in self.preemptible:
            kept = [g for g in self.preemptible[gang.queue] if g.name != gang.name]
            self.preemptible[gang.queue] = kept

    def plausible(
        self,
        usage: QueueUsage,
        gang_queue: str,
        gang_priority: int,
        model: str | None,
        amount_gpus: float,
        rules: PreemptionRules,
    ) -> Iterator[RunningGang]:
        """Gangs whose queue could give GPUs (or, with no `model`, other resources) up to this
        gang (each still checked one by one)."""
        tree = usage.tree
        for queue, gangs in self.by_queue.items():
            if queue == gang_queue:
                if rules.priority_preemption:
                    lower = gangs if rules.any_lower_priority else self.preemptible.get(queue, [])
                    for gang in lower:
                        if gang.priority < gang_priority:
                            yield gang
                continue
            if not rules.reclaim or not gangs or model is None:
                continue
            mine = tree.below_common_ancestor(gang_queue, queue)
            if exceeded(usage, mine, model, amount_gpus, "guaranteed") is not None:
                continue
            theirs = tree.below_common_ancestor(queue, gang_queue)
            if borrowing(usage, theirs, sorted(usage.of(queue))) is not None:
                yield from gangs


def _candidate_reason(
    usage: QueueUsage,
    gang_queue: str,
    gang_priority: int,
    victim: RunningGang,
    model: str | None,
    amount_gpus: float,
    victim_models: Sequence[str],
    rules: PreemptionRules,
) -> tuple[int, str] | None:
    """(0 for reclaim, 1 for priority, the reason) if `victim` may make room, else None.
    Reclaim is of GPUs: a gang that asks for none (`model` None) may only preempt."""
    tree = usage.tree
    if rules.reclaim and victim.queue != gang_queue and model is not None:
        mine = tree.below_common_ancestor(gang_queue, victim.queue)
        theirs = tree.below_common_ancestor(victim.queue, gang_queue)
        if exceeded(usage, mine, model, amount_gpus, "guaranteed") is None:
            over = borrowing(usage, theirs, victim_models)
            if over is not None:
                return 0, f"reclaim: {over.describe('guaranteed')} (borrowed)"
    if (
        rules.priority_preemption
        and victim.queue == gang_queue
        and (victim.preemptible or rules.any_lower_priority)
        and victim.priority < gang_priority
    ):
        marked = " (preemptible)" if victim.preemptible else ""
        return 1, f"priority: {gang_priority} over {victim.priority}{marked} in queue {gang_queue}"
    return None


def find_victims(
    scheduler: Scheduler,
    statement: Statement,
    group: PodGroup,
    gang_queue: str,
    gang_priority: int,
    model: str | None,
    running: VictimPool,
    usage: QueueUsage,
    now_s: float,
    rules: PreemptionRules,
    rng: np.random.Generator,
) -> tuple[PreemptionPlan | None, str]:
    """The fewest victims (greedy, then pruned) that let `group` fit on GPU model `model`
    (None: a gang that asks for no GPU, which only `any_lower_priority` lets preempt).

    `group`'s pods must already be restricted to `model`. A victim must hold GPUs of `model`,
    unless `any_lower_priority`, where any lower-priority pod may be in the way (its CPU, its
    ports, its anti-affinity), as kube-scheduler counts them. Each set of victims is tried inside
    `statement` and rolled back to a checkpoint (the snapshot is never copied). Returns
    (plan, "") or (None, why not).
    """
    snapshot = statement.snapshot
    amount_gpus = sum(p.gpu_request_milli for p in group.pods) / MILLI_PER_GPU
    candidates: list[tuple[tuple[int, int, int, int, float, str], RunningGang, str]] = []
    too_young = 0
    on_model = f" on {model}" if model is not None else ""
    for victim in running.plausible(usage, gang_queue, gang_priority, model, amount_gpus, rules):
        victim_models = sorted(running.models[victim.name])
        if model not in victim_models and not rules.any_lower_priority:
            continue
        found = _candidate_reason(
            usage, gang_queue, gang_priority, victim, model, amount_gpus, victim_models, rules
        )
        if found is None:
            continue
        if victim.runtime_s(now_s) < rules.min_runtime_s:
            too_young += 1
            continue
        kind, reason = found
        started = victim.started_s if victim.started_s is not None else now_s
        key = (
            kind,
            victim.budget_violations,
            int(not victim.preemptible),
            victim.priority,
            -started,
            victim.name,
        )
        candidates.append((key, victim, reason))
    candidates.sort(key=lambda item: item[0])
    young = (
        f" ({too_young} ran less than the minimum {rules.min_runtime_s:g} s)" if too_young else ""
    )
    if not candidates:
        return None, f"no gang may be preempted for it{on_model}{young}"

    def attempt(victims: Sequence[RunningGang]) -> Decision | None:
        return _placement_without(scheduler, statement, group, victims, usage, gang_queue, rng)

    # elastic victims shrunk to their minimum first; evicted whole only if that is not enough
    shrunk = [(key, victim.shed() or victim, reason) for key, victim, reason in candidates]
    result = None
    if any(s is not v for (_, v, _), (_, s, _) in zip(candidates, shrunk, strict=True)):
        result = _fewest(shrunk, attempt, usage, gang_queue, snapshot)
    result = result or _fewest(candidates, attempt, usage, gang_queue, snapshot)
    if result is None:
        return None, (
            f"evicting all {len(candidates)} gangs that may be preempted{on_model} would not "
            f"make room{young}"
        )
    chosen, decision = result
    whole = {victim.name: victim for _, victim, _ in candidates}

    def what(victim: RunningGang) -> str:
        size = len(whole[victim.name].pods)
        if victim is whole[victim.name]:
            return "preempted"
        return f"shrunk from {size} to {size - len(victim.pods)} pods (elastic)"

    evictions = tuple(
        Eviction(
            gang=victim,
            by=group.name,
            reason=(
                f"gang {victim.name} (queue {victim.queue}, priority {victim.priority}) "
                f"{what(victim)} for gang {group.name} (queue {gang_queue}, priority "
                f"{gang_priority}){on_model}: {reason}"
            ),
            shrink=victim is not whole[victim.name],
            kind="reclaim" if reason.startswith("reclaim") else "priority",
        )
        for victim, reason in chosen
    )
    return PreemptionPlan(evictions, decision, {p.name: p for p in group.pods}), ""


def _fewest(
    candidates: Sequence[tuple[Any, RunningGang, str]],
    attempt: Callable[[Sequence[RunningGang]], Decision | None],
    usage: QueueUsage,
    gang_queue: str,
    snapshot: ClusterSnapshot,
) -> tuple[list[tuple[RunningGang, str]], Decision] | None:
    """The fewest victims (greedy in `candidates`' order, then pruned) that make room."""
    chosen: list[tuple[RunningGang, str]] = []
    decision: Decision | None = None
    for _, victim, reason in candidates:
        if not _still_borrowing(victim, reason, chosen, usage, gang_queue, snapshot):
            continue
        chosen.append((victim, reason))
        decision = attempt([v for v, _ in chosen])
        if decision is not None:
            break
    if decision is None:
        return None
    for victim, _reason in reversed(list(chosen)):  # prune: latest additions first
        fewer = [v for v, _ in chosen if v is not victim]
        smaller = attempt(fewer) if fewer else None
        if smaller is not None:
            chosen = [(v, r) for v, r in chosen if v is not victim]
            decision = smaller
    return chosen, decision


def _still_borrowing(
    victim: RunningGang,
    reason: str,
    chosen: Sequence[tuple[RunningGang, str]],
    usage: QueueUsage,
    gang_queue: str,
    snapshot: ClusterSnapshot,
) -> bool:
    """A reclaim victim's queue must still borrow once the victims chosen before it are gone."""
    if not reason.startswith("reclaim"):
        return True
    after = usage.copy()
    for earlier, _ in chosen:
        after.add(earlier.queue, earlier.gpus_by_model(snapshot), sign=-1.0)
    theirs = usage.tree.below_common_ancestor(victim.queue, gang_queue)
    return borrowing(after, theirs, sorted(victim.gpus_by_model(snapshot))) is not None


def _placement_without(
    scheduler: Scheduler,
    statement: Statement,
    group: PodGroup,
    victims: Sequence[RunningGang],
    usage: QueueUsage,
    gang_queue: str,
    rng: np.random.Generator,
) -> Decision | None:
    """Where `group` goes once `victims` are gone, within its limits: tried in the statement
    and rolled back (victims and placement) before returning."""
    snapshot = statement.snapshot
    mark = statement.checkpoint()
    after = usage.copy()
    try:
        for victim in victims:
            for pod, node, gpus in victim.pods:
                statement.release(node, pod, gpus)
            after.add(victim.queue, victim.gpus_by_model(snapshot), sign=-1.0)
        decision = scheduler.place(snapshot, group, rng)
    finally:
        statement.rollback(to=mark)
    if not decision.placed:
        return None
    pods = {p.name: p for p in group.pods}
    placed = gpus_by_model(
        snapshot, [(pods[p.pod], snapshot.node_index(p.node)) for p in decision.placements]
    )
    for model, amount in placed.items():
        if exceeded(after, after.tree.chain(gang_queue), model, amount, "limit") is not None:
            return None
    return decision
