"""Queues in the core: the tree, limits, fair order, reclaim, priority preemption, the guard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from tests.unit.builders import (
    cpu_node,
    cpu_pod,
    gpu_node,
    scheduler_for,
    snapshot_of,
    whole_pod,
)
from voltpack.model import PodGroup, PolicyError
from voltpack.model.constraints.pod_constraints import PodConstraints
from voltpack.model.resources import QueueSpec
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.work import RunningGang
from voltpack.policies.fair_share import (
    FairShareOrdering,
    PriorityFifoOrdering,
    dominant_share,
    make_ordering,
)
from voltpack.policies.schema import parse_policy
from voltpack.policies.strategy import pick_best_fit_gpus
from voltpack.scheduler.preemption import PreemptionRules
from voltpack.scheduler.queue_cycle import PendingGang, QueueCyclePlan, schedule_queues
from voltpack.scheduler.queues import DEFAULT_QUEUE, QueueTree, QueueUsage

RULES = PreemptionRules(min_runtime_s=60.0)


def queue(
    parent: str | None = None, weight: float = 1.0, **quotas: tuple[float, float | None]
) -> QueueSpec:
    """A QueueSpec; quotas as model=(guaranteed, limit), `any` for '*'."""
    entries = [
        {"gpuModel": "*" if model == "any" else model, "guaranteed": g, "limit": limit}
        for model, (g, limit) in quotas.items()
    ]
    return QueueSpec.model_validate({"weight": weight, "parent": parent, "quotas": entries})


def gang(name: str, workers: int, gpus: int = 1, models: Sequence[str] = ()) -> PodGroup:
    pods = tuple(whole_pod(f"{name}-{i}", gpus, models=models) for i in range(workers))
    return PodGroup(name=name, pods=pods, min_member=workers)


def run(
    snapshot: ClusterSnapshot,
    name: str,
    queue_name: str,
    workers: int,
    *,
    gpus: int = 1,
    node: str | None = None,
    priority: int = 0,
    preemptible: bool = False,
    started_s: float = 0.0,
) -> RunningGang:
    """Put a gang on the snapshot (first nodes with room, or `node`) and describe it."""
    placed = []
    for pod in gang(name, workers, gpus).pods:
        rows = [snapshot.node_index(node)] if node else range(snapshot.node_count)
        for row in rows:
            free = snapshot.gpu_present[row] & (snapshot.gpu_free_milli[row] >= 1000)
            if free.sum() >= gpus:
                indices = pick_best_fit_gpus(snapshot, row, pod)
                snapshot.allocate(row, pod, indices)
                placed.append((pod, row, indices))
                break
        else:
            raise AssertionError(f"no room for {pod.name}")
    return RunningGang(name, queue_name, priority, preemptible, started_s, tuple(placed))


def cycle(
    snapshot: ClusterSnapshot,
    specs: dict[str, QueueSpec],
    pending: Sequence[PendingGang],
    running: Sequence[RunningGang] = (),
    *,
    now_s: float = 1000.0,
    rules: PreemptionRules = RULES,
    ordering: Any = None,
) -> QueueCyclePlan:
    scheduler = scheduler_for("best-fit", snapshot)
    return schedule_queues(
        scheduler,
        snapshot,
        QueueTree.build(specs),
        pending,
        running,
        ordering or FairShareOrdering(),
        rules,
        now_s,
        np.random.default_rng(0),
    )


def outcome(plan: QueueCyclePlan) -> dict[str, bool]:
    return {d.subject: d.placed for d in plan.decisions}


# --- the resource model ----------------------------------------------------------------------


def test_quota_rules_are_checked_by_the_model() -> None:
    with pytest.raises(ValidationError, match="limit=2 is below guaranteed=4"):
        queue(A100=(4, 2))
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        queue(A100=(-1, None))
    with pytest.raises(ValidationError, match="'A100' twice"):
        QueueSpec.model_validate(
            {"quotas": [{"gpuModel": "A100", "guaranteed": 1}, {"gpuModel": "A100"}]}
        )


def test_the_tree_names_each_bad_queue_and_keeps_the_good_ones() -> None:
    tree = QueueTree.build(
        {
            "root": queue(),
            "team": queue(parent="root"),
            "orphan": queue(parent="nowhere"),
            "loop-a": queue(parent="loop-b"),
            "loop-b": queue(parent="loop-a"),
            "under-orphan": queue(parent="orphan"),
        }
    )
    assert set(tree.queues) == {"root", "team", DEFAULT_QUEUE}
    assert "parent 'nowhere' is not a queue" in tree.invalid["orphan"]
    assert "parent 'nowhere'" in tree.invalid["under-orphan"]
    assert "cycle: loop-a -> loop-b -> loop-a" in tree.invalid["loop-a"]
    assert tree.chain("team") == ("team", "root")
    assert tree.problem("loop-b") is not None and "invalid" in str(tree.problem("loop-b"))
    assert "does not exist" in str(tree.problem("ghost"))


def test_usage_sums_over_the_subtree_and_borrowed_gpus_are_reported() -> None:
    tree = QueueTree.build({"org": queue(A100=(8, None)), "team": queue("org", A100=(2, None))})
    usage = QueueUsage(tree)
    usage.add("team", {"A100": 3.0})
    usage.add("org", {"A100": 1.0, "T4": 1.0})
    assert usage.of("org") == {"A100": 4.0, "T4": 1.0}
    assert usage.of("team") == {"A100": 3.0}


def test_the_policy_file_names_the_ordering_and_the_guard() -> None:
    policy = parse_policy(
        "apiVersion: voltpack.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: q}\n"
        "spec:\n  scoring: {strategy: best-fit}\n"
        "  queueing: {ordering: priority-fifo, min_runtime_s: 300}\n"
    )
    assert policy.spec.queueing.ordering == "priority-fifo"
    assert policy.spec.queueing.min_runtime_s == 300
    with pytest.raises(PolicyError, match=r"spec\.queueing\.ordering.*allowed values: fair-share"):
        make_ordering("lottery")


def test_dominant_share_divided_by_weight() -> None:
    capacity = {"A100": 16.0, "T4": 4.0}
    assert dominant_share({"A100": 4.0, "T4": 2.0}, capacity) == 0.5
    ordering = FairShareOrdering()
    assert ordering.queue_share({"A100": 8.0}, capacity, weight=2.0) == 0.25


# --- limits and order ------------------------------------------------------------------------


def test_a_gang_over_its_queue_limit_waits_and_says_which_limit() -> None:
    snapshot = snapshot_of(gpu_node("a", 8, "A100"))
    specs = {"q": queue(A100=(0, 4))}
    running = [run(snapshot, "old", "q", 3)]
    plan = cycle(snapshot, specs, [PendingGang(gang("new", 2), "q")], running)
    assert outcome(plan) == {"new": False}
    assert "queue q: A100 5 of limit 4 GPUs" in plan.decisions[0].reason
    assert plan.reports["q"].held_by_limit == 1
    plan = cycle(snapshot, specs, [PendingGang(gang("one", 1), "q")], running)
    assert outcome(plan) == {"one": True}
    assert plan.reports["q"].at_limit == ["queue q: A100 4 of limit 4 GPUs"]


def test_a_parent_limit_holds_its_children() -> None:
    snapshot = snapshot_of(gpu_node("a", 8, "A100"))
    specs = {"org": queue(any=(0, 2)), "team": queue("org")}
    plan = cycle(snapshot, specs, [PendingGang(gang("g", 3), "team")])
    assert outcome(plan) == {"g": False}
    assert "queue org: * 3 of limit 2 GPUs" in plan.decisions[0].reason


def test_a_limit_on_one_model_sends_the_gang_to_another() -> None:
    snapshot = snapshot_of(gpu_node("a", 8, "A100"), gpu_node("t", 4, "T4"))
    plan = cycle(snapshot, {"q": queue(A100=(0, 0))}, [PendingGang(gang("g", 2), "q")])
    assert outcome(plan) == {"g": True}
    assert {p.node for p in plan.decisions[0].placements} == {"t"}


def test_fair_share_serves_the_queue_with_the_smaller_weighted_share_first() -> None:
    specs = {"heavy": queue(weight=1), "light": queue(weight=1)}
    pending = [
        PendingGang(gang("h", 4), "heavy", arrival=0),
        PendingGang(gang("l", 4), "light", arrival=1),
    ]
    snapshot = snapshot_of(gpu_node("a", 8, "A100"))
    plan = cycle(snapshot, specs, pending, [run(snapshot, "held", "heavy", 4)])
    assert [d.subject for d in plan.decisions] == ["l", "h"]
    assert outcome(plan) == {"l": True, "h": False}
    fifo = cycle(
        snapshot_of(gpu_node("a", 8, "A100")), specs, pending, ordering=PriorityFifoOrdering()
    )
    assert [d.subject for d in fifo.decisions] == ["h", "l"]


def test_a_larger_weight_earns_a_larger_share() -> None:
    specs = {"big": queue(weight=4), "small": queue(weight=1)}
    snapshot = snapshot_of(gpu_node("a", 8, "A100"))
    running = [run(snapshot, "b", "big", 4), run(snapshot, "s", "small", 2)]
    pending = [
        PendingGang(gang("s2", 1), "small", arrival=0),
        PendingGang(gang("b2", 1), "big", arrival=1),
    ]
    plan = cycle(snapshot, specs, pending, running)  # big: 4/8/4 = 0.125 < small: 2/8 = 0.25
    assert [d.subject for d in plan.decisions] == ["b2", "s2"]


def test_within_a_queue_priority_then_arrival() -> None:
    snapshot = snapshot_of(gpu_node("a", 8, "A100"))
    pending = [
        PendingGang(gang("first", 1), "q", priority=0, arrival=0),
        PendingGang(gang("urgent", 1), "q", priority=10, arrival=5),
        PendingGang(gang("second", 1), "q", priority=0, arrival=1),
    ]
    plan = cycle(snapshot, {"q": queue()}, pending)
    assert [d.subject for d in plan.decisions] == ["urgent", "first", "second"]


# --- reclaim and preemption ------------------------------------------------------------------


def borrowed_cluster() -> tuple[ClusterSnapshot, list[RunningGang], dict[str, QueueSpec]]:
    """Queue `a` (no guarantee) holds all 8 GPUs in four 2-GPU gangs; `b` is guaranteed 4."""
    snapshot = snapshot_of(gpu_node("n", 8, "A100"))
    running = [
        run(snapshot, f"a{i}", "a", 2, priority=i, preemptible=True, started_s=float(i))
        for i in range(4)
    ]
    return snapshot, running, {"a": queue(), "b": queue(A100=(4, None))}


def test_a_queue_under_its_guarantee_reclaims_exactly_what_it_needs() -> None:
    snapshot, running, specs = borrowed_cluster()
    plan = cycle(snapshot, specs, [PendingGang(gang("b", 1, gpus=4), "b")], running)
    assert outcome(plan) == {"b": True}
    evicted = [e.gang.name for e in plan.evictions]
    assert evicted == ["a0", "a1"]  # lowest priority first, and no more than needed
    assert "reclaim: queue a: A100 8 of guaranteed 0 GPUs" in plan.evictions[0].reason
    assert "preempted for gang b (queue b" in plan.evictions[0].reason
    assert plan.reports["a"].allocated_gpus == {"A100": 4.0}
    assert plan.reports["b"].allocated_gpus == {"A100": 4.0}
    assert int(snapshot.gpu_free_milli.sum()) == 0


def test_a_gang_beyond_its_guarantee_reclaims_nothing() -> None:
    snapshot, running, specs = borrowed_cluster()
    plan = cycle(snapshot, specs, [PendingGang(gang("b", 1, gpus=6), "b")], running)
    assert outcome(plan) == {"b": False}
    assert plan.evictions == []
    assert "no gang may be preempted" in plan.decisions[0].reason


def test_a_gang_no_node_can_hold_says_why_preemption_cannot_help() -> None:
    snapshot = snapshot_of(gpu_node("n", 8, "T4"))
    plan = cycle(snapshot, {"a": queue()}, [PendingGang(gang("g", 1, models=["A100"]), "a")])
    reason = plan.decisions[0].reason
    assert outcome(plan) == {"g": False}
    assert reason.endswith("no preemption: no node has a GPU of a model it accepts (A100)")
    bare = snapshot_of(gpu_node("cpu-only", 0, "T4"))
    plan = cycle(bare, {"a": queue()}, [PendingGang(gang("g", 1), "a")])
    assert plan.decisions[0].reason.endswith("no preemption: no node has GPUs")


def test_the_minimum_runtime_protects_young_gangs() -> None:
    snapshot, running, specs = borrowed_cluster()
    plan = cycle(snapshot, specs, [PendingGang(gang("b", 2), "b")], running, now_s=30.0)
    assert outcome(plan) == {"b": False}
    assert plan.evictions == []
    assert "ran less than the minimum 60 s" in plan.decisions[0].reason


def test_a_queue_within_its_guarantee_is_never_reclaimed_from() -> None:
    snapshot = snapshot_of(gpu_node("n", 8, "A100"))
    running = [run(snapshot, f"a{i}", "a", 2, preemptible=True) for i in range(4)]
    specs = {"a": queue(A100=(8, None)), "b": queue(A100=(4, None))}
    plan = cycle(snapshot, specs, [PendingGang(gang("b", 2), "b")], running)
    assert outcome(plan) == {"b": False}
    assert plan.evictions == []


def test_siblings_reclaim_below_their_common_parent() -> None:
    snapshot = snapshot_of(gpu_node("n", 8, "A100"))
    specs = {
        "org": queue(A100=(8, None)),
        "x": queue("org", A100=(4, None)),
        "y": queue("org", A100=(4, None)),
    }
    running = [run(snapshot, f"x{i}", "x", 4, started_s=float(i)) for i in range(2)]
    plan = cycle(snapshot, specs, [PendingGang(gang("y", 2, gpus=2), "y")], running)
    assert outcome(plan) == {"y": True}
    assert [e.gang.name for e in plan.evictions] == ["x1"]  # same priority: latest start


def test_higher_priority_preempts_only_preemptible_gangs_of_its_queue() -> None:
    snapshot = snapshot_of(gpu_node("n", 4, "A100"))
    running = [
        run(snapshot, "keep", "q", 2, priority=0, preemptible=False),
        run(snapshot, "spot", "q", 2, priority=0, preemptible=True),
    ]
    plan = cycle(snapshot, {"q": queue()}, [PendingGang(gang("vip", 2), "q", priority=5)], running)
    assert outcome(plan) == {"vip": True}
    assert [e.gang.name for e in plan.evictions] == ["spot"]
    assert "priority: 5 over 0 (preemptible)" in plan.evictions[0].reason
    snapshot2 = snapshot_of(gpu_node("n", 4, "A100"))
    equal = [run(snapshot2, "spot", "q", 4, priority=5, preemptible=True)]
    plan = cycle(snapshot2, {"q": queue()}, [PendingGang(gang("same", 2), "q", priority=5)], equal)
    assert plan.evictions == []


def test_a_gang_is_evicted_whole_even_across_nodes() -> None:
    snapshot = snapshot_of(gpu_node("n0", 4, "A100"), gpu_node("n1", 4, "A100"))
    running = [run(snapshot, "wide", "a", 8)]  # 8 pods over both nodes
    specs = {"a": queue(), "b": queue(A100=(2, None))}
    plan = cycle(snapshot, specs, [PendingGang(gang("b", 1, gpus=2), "b")], running)
    assert [e.gang.name for e in plan.evictions] == ["wide"]
    assert int((snapshot.gpu_free_milli == 1000).sum()) == 6  # all 8 freed, 2 taken by b


# --- kube-scheduler's rule: any lower-priority pod, any resource ------------------------------

KUBE_RULES = PreemptionRules(min_runtime_s=0.0, any_lower_priority=True)


def cpu_running(snapshot: ClusterSnapshot, name: str, cpu: int, priority: int) -> RunningGang:
    """A one-pod CPU-only gang placed on the snapshot's only node."""
    pod = cpu_pod(name, cpu=cpu, memory=1)
    snapshot.allocate(0, pod, ())
    return RunningGang(name, DEFAULT_QUEUE, priority, False, 0.0, ((pod, 0, ()),))


def test_with_kube_rules_any_lower_priority_gang_of_the_queue_is_a_victim() -> None:
    snapshot = snapshot_of(gpu_node("n", 4, "A100"))
    running = [run(snapshot, "batch", "q", 4, priority=1, preemptible=False)]
    vip = [PendingGang(gang("vip", 2), "q", priority=5)]
    assert cycle(snapshot, {"q": queue()}, vip, running).evictions == []  # voltpack's rule
    plan = cycle(snapshot, {"q": queue()}, vip, running, rules=KUBE_RULES)
    assert outcome(plan) == {"vip": True}
    assert [e.gang.name for e in plan.evictions] == ["batch"]
    assert "priority: 5 over 1 in queue q" in plan.evictions[0].reason


def test_with_kube_rules_a_cpu_pod_preempts_the_fewest_lowest_priority_pods() -> None:
    # kubernetes test/e2e/scheduling/preemption.go, "runs ReplicaSets to verify preemption
    # running path": 1000 units, pods of 200 (p1), 300 (p2), 450 (p3); a 500 (p4) preemptor
    # evicts p1 and p2, never p3
    def setup() -> tuple[ClusterSnapshot, list[RunningGang]]:
        snapshot = snapshot_of(cpu_node("n", cpu=1000))
        sizes = [("pod1", 200, 1), ("pod2", 300, 2), ("pod3", 450, 3)]
        return snapshot, [cpu_running(snapshot, n, cpu, p) for n, cpu, p in sizes]

    preemptor = PodGroup(name="pod4", pods=(cpu_pod("pod4", cpu=500, memory=1),), min_member=1)
    pending = [PendingGang(preemptor, DEFAULT_QUEUE, priority=4)]
    snapshot, running = setup()
    kept = cycle(snapshot, {DEFAULT_QUEUE: queue()}, pending, running)
    assert outcome(kept) == {"pod4": False} and kept.evictions == []  # voltpack's rule
    snapshot, running = setup()
    plan = cycle(snapshot, {DEFAULT_QUEUE: queue()}, pending, running, rules=KUBE_RULES)
    assert outcome(plan) == {"pod4": True}
    assert sorted(e.gang.name for e in plan.evictions) == ["pod1", "pod2"]
    assert all(" on " not in e.reason for e in plan.evictions)  # no GPU model in the reason


def test_a_pod_with_preemption_policy_never_waits_and_says_so() -> None:
    snapshot = snapshot_of(cpu_node("n", cpu=1000))
    running = [cpu_running(snapshot, "low", 1000, 0)]
    pod = cpu_pod("polite", cpu=500, memory=1).model_copy(
        update={"constraints": PodConstraints(never_preempts=True)}
    )
    pending = [PendingGang(PodGroup(name="polite", pods=(pod,), min_member=1), DEFAULT_QUEUE, 9)]
    plan = cycle(snapshot, {DEFAULT_QUEUE: queue()}, pending, running, rules=KUBE_RULES)
    assert plan.evictions == [] and outcome(plan) == {"polite": False}
    assert plan.decisions[0].reason.endswith("no preemption: preemptionPolicy is Never")


def test_a_gang_nominated_by_preemption_is_placed_before_other_queues_take_its_room() -> None:
    """What the victims freed goes to the gang nominated for it, though fair share would serve
    the other queue first (its share is smaller)."""
    specs = {"big": queue(), "small": queue()}
    snapshot = snapshot_of(gpu_node("a", 8, "A100"))
    running = [run(snapshot, "held", "big", 4)]  # big holds 4 of 8: the larger share
    nominee = gang("vip", 4)
    nominee = nominee.model_copy(
        update={
            "pods": tuple(
                p.model_copy(update={"constraints": PodConstraints(nominated_node="a")})
                for p in nominee.pods
            )
        }
    )
    pending = [
        PendingGang(gang("newcomer", 4), "small", arrival=0),
        PendingGang(nominee, "big", priority=5, arrival=1),
    ]
    plan = cycle(snapshot, specs, pending, running)
    assert [d.subject for d in plan.decisions] == ["vip", "newcomer"]
    assert outcome(plan) == {"vip": True, "newcomer": False}
    unnominated = snapshot_of(gpu_node("a", 8, "A100"))
    without = cycle(
        unnominated,
        specs,
        [pending[0], PendingGang(gang("vip", 4), "big", priority=5, arrival=1)],
        [run(unnominated, "held", "big", 4)],
    )
    assert outcome(without) == {"newcomer": True, "vip": False}  # fair share's order
