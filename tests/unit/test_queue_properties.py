"""Properties of queues over random trees, guarantees and job streams (hypothesis).

A small cycle-by-cycle simulation drives `schedule_queues`: gangs of 1-GPU workers arrive,
run for some cycles or forever, and come back pending when evicted (as a GPUJob's workers do).
Guarantees are feasible: per GPU model, the roots' guarantees fit the cluster and children's
guarantees fit their parent's. Then:

(a) starvation freedom: once arrivals stop, every pending gang whose queue chain stays within
    its guarantees with it (on a model it accepts) runs within a bounded number of cycles;
(b) no queue ever uses more than a limit;
(c) a queue within its guarantee is never reclaimed from;
(d) gangs are evicted whole: the snapshot always equals the running gangs' pods exactly.

Derandomised: every run tries the same examples (and the pinned ones), so `make test` and CI
cannot flake on a new random draw. `HYPOTHESIS_EXPLORE=1` searches afresh (random, or the
seed of `--hypothesis-seed=N`); pin what it finds with `@example`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.unit.builders import gpu_node, scheduler_for, snapshot_of, whole_pod
from voltpack.model import PodGroup
from voltpack.model.resources import QueueSpec
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.work import RunningGang
from voltpack.policies.fair_share import FairShareOrdering
from voltpack.scheduler.preemption import PreemptionRules
from voltpack.scheduler.queue_cycle import (
    PendingGang,
    QueueCyclePlan,
    schedule_queues,
    snapshot_capacity,
)
from voltpack.scheduler.queues import QueueTree, QueueUsage, borrowing, exceeded

MODELS = ("A100", "T4")
CYCLE_S = 10.0
RULES = PreemptionRules(min_runtime_s=20.0)
ARRIVAL_CYCLES = 6
SETTLE_CYCLES = 12
"""After arrivals stop: every job either runs or finishes within this many cycles."""
FOREVER = -1
EXPLORE = os.environ.get("HYPOTHESIS_EXPLORE") == "1"


@dataclass
class Job:
    name: str
    queue: str
    workers: int
    model: str | None
    priority: int
    preemptible: bool
    duration_cycles: int
    arrival_cycle: int


@dataclass
class World:
    nodes: list[tuple[str, int, str]]
    specs: dict[str, QueueSpec]
    leaves: list[str]
    jobs: list[Job]


def split(draw: st.DrawFn, total: int, parts: int) -> list[int]:
    """`parts` non-negative integers with a sum of at most `total`."""
    cuts = sorted(draw(st.lists(st.integers(0, total), min_size=parts, max_size=parts)))
    values, last = [], 0
    for cut in cuts:
        values.append(cut - last)
        last = cut
    return values


@st.composite
def worlds(draw: st.DrawFn) -> World:
    nodes = []
    for index in range(draw(st.integers(1, 3))):
        nodes.append((f"n{index}", draw(st.sampled_from((2, 4, 8))), draw(st.sampled_from(MODELS))))
    capacity = {m: sum(g for _, g, model in nodes if model == m) for m in MODELS}
    specs: dict[str, QueueSpec] = {}
    leaves: list[str] = []
    roots = draw(st.integers(1, 3))
    root_guarantees = {m: split(draw, capacity[m], roots) for m in MODELS}

    def quotas(guaranteed: dict[str, int]) -> list[dict[str, object]]:
        entries: list[dict[str, object]] = []
        for model, amount in guaranteed.items():
            limit = draw(st.one_of(st.none(), st.integers(amount, amount + 4)))
            if amount or limit is not None:
                entries.append({"gpuModel": model, "guaranteed": amount, "limit": limit})
        return entries

    for r in range(roots):
        name = f"r{r}"
        mine = {m: root_guarantees[m][r] for m in MODELS}
        weight = draw(st.sampled_from((1.0, 2.0)))
        specs[name] = QueueSpec.model_validate({"weight": weight, "quotas": quotas(mine)})
        children = draw(st.integers(0, 2))
        if not children:
            leaves.append(name)
            continue
        shares = {m: split(draw, mine[m], children) for m in MODELS}
        for c in range(children):
            child = f"{name}c{c}"
            theirs = {m: shares[m][c] for m in MODELS}
            specs[child] = QueueSpec.model_validate({"parent": name, "quotas": quotas(theirs)})
            leaves.append(child)
    jobs = []
    for index in range(draw(st.integers(1, 14))):
        jobs.append(
            Job(
                name=f"j{index:02d}",
                queue=draw(st.sampled_from(leaves)),
                workers=draw(st.integers(1, 3)),
                model=draw(st.one_of(st.none(), st.sampled_from(MODELS))),
                priority=draw(st.integers(0, 2)),
                preemptible=draw(st.booleans()),
                duration_cycles=draw(st.sampled_from((1, 2, 4, FOREVER))),
                arrival_cycle=draw(st.integers(0, ARRIVAL_CYCLES - 1)),
            )
        )
    return World(nodes, specs, leaves, jobs)


def _job(name: str, queue: str, workers: int, duration: int, arrival: int) -> Job:
    return Job(name, queue, workers, None, 0, False, duration, arrival)


RECLAIM_AFTER_A_PLACEMENT_IN_THE_CYCLE = World(
    nodes=[("n0", 2, "A100"), ("n1", 4, "A100"), ("n2", 4, "T4")],
    specs={
        name: QueueSpec.model_validate(spec)
        for name, spec in {
            "r0": {"quotas": [{"gpuModel": "T4", "guaranteed": 1}]},
            "r0c0": {
                "parent": "r0",
                "quotas": [
                    {"gpuModel": "A100", "guaranteed": 0, "limit": 0},
                    {"gpuModel": "T4", "guaranteed": 1},
                ],
            },
            "r0c1": {"parent": "r0"},
            "r1": {"quotas": [{"gpuModel": "T4", "guaranteed": 1}]},
            "r2": {},
            "r2c0": {"parent": "r2"},
            "r2c1": {"parent": "r2"},
        }.items()
    },
    leaves=["r0c0", "r0c1", "r1", "r2c0", "r2c1"],
    jobs=[
        _job("j00", "r2c0", 1, FOREVER, 0),
        _job("j01", "r0c0", 1, 1, 1),
        _job("j02", "r0c0", 3, 1, 0),
        _job("j03", "r0c0", 1, 1, 0),
        _job("j04", "r0c0", 2, 1, 1),
        _job("j05", "r2c0", 3, FOREVER, 0),
        _job("j06", "r1", 3, 4, 1),
        _job("j07", "r0c0", 1, 1, 0),
        _job("j08", "r0c0", 1, 1, 0),
        _job("j09", "r0c0", 1, 1, 0),
        _job("j10", "r0c0", 1, 1, 0),
        _job("j11", "r0c0", 1, 4, 0),
        _job("j12", "r1", 1, 1, 4),
    ],
)
"""Found with --hypothesis-seed=20: at 40 s, r0c0 (1 T4 at the cycle's start, guaranteed 1)
gets j04 placed (3 T4: borrowing 2), then j12 of r1 (no T4, guaranteed 1) reclaims j11 from
it. Right by the core; the old check judged the reclaim on the usage at the cycle's start."""


def group_of(job: Job) -> PodGroup:
    models = (job.model,) if job.model else ()
    pods = tuple(whole_pod(f"{job.name}-{i}", 1, models=models) for i in range(job.workers))
    return PodGroup(name=job.name, pods=pods, min_member=job.workers)


def eligible(usage: QueueUsage, job: Job, capacity: dict[str, float]) -> bool:
    """The job's queue chain stays within its guarantees with it, on a model it accepts."""
    chain = usage.tree.chain(job.queue)
    models = [job.model] if job.model else list(MODELS)
    return any(
        capacity.get(m, 0) and exceeded(usage, chain, m, job.workers, "guaranteed") is None
        for m in models
    )


def usage_of(tree: QueueTree, snapshot: ClusterSnapshot, running: list[RunningGang]) -> QueueUsage:
    usage = QueueUsage(tree)
    for gang in running:
        usage.add(gang.queue, gang.gpus_by_model(snapshot))
    return usage


def check_limits(usage: QueueUsage) -> None:
    for name, node in usage.tree.queues.items():
        used = usage.of(name)
        for model, quota in node.quotas.items():
            if quota.limit is not None:
                assert used.get(model, 0.0) <= quota.limit + 1e-9, (name, model, used)


def check_reclaims_take_only_borrowed(
    tree: QueueTree,
    snapshot: ClusterSnapshot,
    before: QueueUsage,
    plan: QueueCyclePlan,
    jobs: dict[str, Job],
) -> None:
    """(c), judged on the usage at the moment of each reclaim: the cycle's decisions in their
    order, each gang placed earlier in the cycle counted and each gang evicted earlier taken
    back (a queue within its guarantee at the start of a cycle may borrow by a placement
    earlier in that cycle, and is then rightly reclaimed from)."""
    usage = before.copy()
    placed = {gang.name: gang for gang in plan.placed}
    for decision in plan.decisions:
        for eviction in (e for e in plan.evictions if e.by == decision.subject):
            victim = eviction.gang
            if eviction.reason.split(": ", 2)[1].startswith("reclaim"):
                theirs = tree.below_common_ancestor(victim.queue, jobs[eviction.by].queue)
                models = sorted(victim.gpus_by_model(snapshot))
                assert borrowing(usage, theirs, models) is not None, eviction.reason
            usage.add(victim.queue, victim.gpus_by_model(snapshot), sign=-1.0)
        if decision.placed and decision.subject in placed:
            gang = placed[decision.subject]
            usage.add(gang.queue, gang.gpus_by_model(snapshot))


def check_snapshot_matches(snapshot: ClusterSnapshot, nodes: list, running: list) -> None:
    rebuilt = snapshot_of(*(gpu_node(n, g, m) for n, g, m in nodes))
    for gang in running:
        for pod, node, gpus in gang.pods:
            rebuilt.allocate(node, pod, gpus)
    np.testing.assert_array_equal(rebuilt.gpu_free_milli, snapshot.gpu_free_milli)


@settings(max_examples=150, deadline=None, derandomize=not EXPLORE)
@given(worlds(), st.integers(0, 2**16))
@example(RECLAIM_AFTER_A_PLACEMENT_IN_THE_CYCLE, 0)
def test_queues_are_starvation_free_within_limits_and_reclaim_only_borrowed(
    world: World, seed: int
) -> None:
    snapshot = snapshot_of(*(gpu_node(n, g, m) for n, g, m in world.nodes))
    capacity = snapshot_capacity(snapshot)
    tree = QueueTree.build(world.specs)
    assert not tree.invalid
    scheduler = scheduler_for("best-fit", snapshot)
    rng = np.random.default_rng(seed)
    jobs = {job.name: job for job in world.jobs}
    pending: dict[str, Job] = {}
    running: list[RunningGang] = []
    finish_at: dict[str, int] = {}
    waited_eligible: dict[str, int] = {}
    for cycle in range(ARRIVAL_CYCLES + SETTLE_CYCLES):
        now_s = cycle * CYCLE_S
        for gang in list(running):
            if finish_at.get(gang.name) == cycle:
                for pod, node, gpus in gang.pods:
                    snapshot.release(node, pod, gpus)
                running.remove(gang)
        for job in world.jobs:
            if job.arrival_cycle == cycle:
                pending[job.name] = job
        before = usage_of(tree, snapshot, running)
        for name, job in pending.items():
            waited_eligible[name] = (
                waited_eligible.get(name, 0) + 1 if eligible(before, job, capacity) else 0
            )
        gangs = [
            PendingGang(group_of(j), j.queue, j.priority, int(j.arrival_cycle), j.preemptible)
            for j in sorted(pending.values(), key=lambda j: (j.arrival_cycle, j.name))
        ]
        plan = schedule_queues(
            scheduler, snapshot, tree, gangs, running, FairShareOrdering(), RULES, now_s, rng
        )
        check_reclaims_take_only_borrowed(tree, snapshot, before, plan, jobs)
        for eviction in plan.evictions:
            victim = eviction.gang
            assert victim in running
            running.remove(victim)
            pending[victim.name] = jobs[victim.name]  # re-created, waits again
            finish_at.pop(victim.name, None)
        for gang in plan.placed:
            job = jobs[gang.name]
            running.append(gang)
            del pending[gang.name]
            waited_eligible.pop(gang.name, None)
            if job.duration_cycles != FOREVER:
                finish_at[gang.name] = cycle + job.duration_cycles
        check_limits(usage_of(tree, snapshot, running))
        check_snapshot_matches(snapshot, world.nodes, running)
        if cycle >= ARRIVAL_CYCLES:
            # min runtime (2 cycles) + one cycle to reclaim + jobs ahead in the same queue
            stuck = {n: w for n, w in waited_eligible.items() if w > 6}
            assert not stuck, (stuck, [d.reason for d in plan.decisions])
