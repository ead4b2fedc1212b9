"""The filter (which nodes can hold a pod) and the scheduling cycle (node and GPU choice)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.builders import (
    assert_empty,
    assert_state_equal,
    cpu_node,
    cpu_pod,
    gpu_node,
    occupy,
    scheduler_for,
    share_pod,
    snapshot_of,
    state_of,
    whole_pod,
)
from voltpack.model import Pod, PodGroup
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.policies.registry import make_strategy, strategy_names
from voltpack.scheduler.filter import GPU_MODEL_REASON, describe_request, filter_nodes
from voltpack.scheduler.placement import Scheduler

RNG_SEED = 7


def rng() -> np.random.Generator:
    return np.random.default_rng(RNG_SEED)


def feasible(snapshot: ClusterSnapshot, pod: Pod) -> list[str]:
    result = filter_nodes(snapshot, pod)
    return [snapshot.node_names[i] for i in np.flatnonzero(result.feasible)]


# --- filter ----------------------------------------------------------------------------------


def test_filter_checks_cpu() -> None:
    snapshot = snapshot_of(gpu_node("small", cpu=4000), gpu_node("big", cpu=8000))
    assert feasible(snapshot, cpu_pod(cpu=4000)) == ["small", "big"]
    assert feasible(snapshot, cpu_pod(cpu=4001)) == ["big"]
    assert feasible(snapshot, whole_pod(cpu=8001)) == []


def test_filter_checks_memory() -> None:
    snapshot = snapshot_of(gpu_node("small", memory=1024), gpu_node("big", memory=2048))
    assert feasible(snapshot, share_pod(memory=1024)) == ["small", "big"]
    assert feasible(snapshot, share_pod(memory=1025)) == ["big"]


def test_filter_uses_free_not_capacity() -> None:
    snapshot = snapshot_of(gpu_node("used", cpu=8000, cpu_free=1000), gpu_node("idle", cpu=2000))
    assert feasible(snapshot, cpu_pod(cpu=1500)) == ["idle"]


def test_filter_checks_gpu_count() -> None:
    snapshot = snapshot_of(
        gpu_node("two", 2),
        gpu_node("four-half-used", 4, gpu_free=[0, 1000, 0, 1000]),
        gpu_node("eight", 8),
    )
    assert feasible(snapshot, whole_pod(count=2)) == ["two", "four-half-used", "eight"]
    assert feasible(snapshot, whole_pod(count=3)) == ["eight"]
    assert feasible(snapshot, whole_pod(count=8)) == ["eight"]


def test_filter_checks_gpu_share() -> None:
    snapshot = snapshot_of(
        gpu_node("a", 2, gpu_free=[300, 0]),
        gpu_node("b", 2, gpu_free=[600, 299]),
        gpu_node("c", 1, gpu_free=[1000]),
    )
    assert feasible(snapshot, share_pod(milli=300)) == ["a", "b", "c"]
    assert feasible(snapshot, share_pod(milli=301)) == ["b", "c"]
    assert feasible(snapshot, share_pod(milli=601)) == ["c"]
    # A whole GPU needs an idle one: partly used GPUs do not add up.
    assert feasible(snapshot, whole_pod()) == ["c"]


def test_filter_checks_gpu_model_case_insensitively() -> None:
    snapshot = snapshot_of(gpu_node("t4", 2, "T4"), gpu_node("v100", 2, "V100M16"), cpu_node("cpu"))
    assert feasible(snapshot, whole_pod(models=["v100m16"])) == ["v100"]
    assert feasible(snapshot, whole_pod(models=["T4", "V100M16"])) == ["t4", "v100"]
    assert feasible(snapshot, share_pod(models=["A100"])) == []
    assert feasible(snapshot, whole_pod()) == ["t4", "v100"]


def test_node_without_gpus_never_matches_a_model_constraint() -> None:
    snapshot = snapshot_of(cpu_node("cpu"), gpu_node("t4", 1, "T4"))
    pod = share_pod(models=["T4"])
    assert feasible(snapshot, pod) == ["t4"]
    result = filter_nodes(snapshot, pod)
    assert result.rejected_by[GPU_MODEL_REASON] == 1


def test_cpu_only_pod_fits_gpu_less_nodes_and_ignores_models() -> None:
    snapshot = snapshot_of(cpu_node("cpu"), gpu_node("t4", 1, "T4"))
    assert feasible(snapshot, cpu_pod()) == ["cpu", "t4"]
    constrained = Pod(name="p", cpu_milli=1, memory_mib=1, gpu_models=("V100M16",))
    assert feasible(snapshot, constrained) == ["cpu", "t4"]


def test_filter_counts_each_node_under_its_first_failing_filter() -> None:
    snapshot = snapshot_of(
        gpu_node("wrong-model", 4, "T4", cpu=100),
        gpu_node("no-cpu", 4, "A10", cpu=100),
        gpu_node("no-memory", 4, "A10", memory=10),
        gpu_node("no-gpu", 4, "A10", gpu_free=[0, 0, 0, 500]),
        gpu_node("fits", 4, "A10"),
    )
    result = filter_nodes(snapshot, whole_pod(count=2, cpu=1000, memory=1024, models=["A10"]))
    assert result.rejected_by == {
        GPU_MODEL_REASON: 1,
        "Insufficient cpu": 1,
        "Insufficient memory": 1,
        "node(s) didn't have 2 free GPU(s)": 1,
    }
    assert result.feasible.tolist() == [False, False, False, False, True]
    assert result.feasible_count == 1


def test_cpu_only_pod_is_not_filtered_on_gpus() -> None:
    snapshot = snapshot_of(gpu_node("full", 1, gpu_free=[0]))
    result = filter_nodes(snapshot, cpu_pod())
    assert not result.rejected_by
    assert result.feasible_count == 1


@pytest.mark.parametrize(
    ("pod", "text"),
    [
        (cpu_pod(cpu=8000, memory=30517), "8000m CPU, 30517 MiB"),
        (share_pod(milli=810, cpu=1, memory=2), "1m CPU, 2 MiB, 810 milli of 1 GPU"),
        (whole_pod(count=1, cpu=1, memory=2), "1m CPU, 2 MiB, 1 whole GPU"),
        (whole_pod(count=4, cpu=1, memory=2, models=["T4", "A10"]), "4 whole GPUs, model T4|A10"),
    ],
)
def test_describe_request(pod: Pod, text: str) -> None:
    assert describe_request(pod).endswith(text)


# --- decisions -------------------------------------------------------------------------------


def test_rejection_reason_names_the_counts() -> None:
    snapshot = snapshot_of(
        gpu_node("a", 1, cpu=500),
        gpu_node("b", 1, gpu_free=[200]),
        gpu_node("c", 2, gpu_free=[0, 100]),
        cpu_node("d"),
    )
    before = state_of(snapshot)
    pod = share_pod("hungry", milli=400, cpu=1000)
    decision = scheduler_for("best-fit", snapshot).schedule_pod(snapshot, pod, rng())
    assert not decision.placed
    assert decision.subject == "hungry"
    assert decision.placements == ()
    assert decision.reason == (
        "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't have a GPU with 400 "
        "milli-GPU free. Pod hungry asks for 1000m CPU, 1024 MiB, 400 milli of 1 GPU."
    )
    assert_state_equal(snapshot, before)


def test_rejection_reason_names_model_mismatch() -> None:
    snapshot = snapshot_of(gpu_node("a", 1, "T4"), gpu_node("b", 1, "T4"), cpu_node("c"))
    decision = scheduler_for("best-fit", snapshot).schedule_pod(
        snapshot, whole_pod("picky", models=["H100"]), rng()
    )
    assert not decision.placed
    assert decision.reason.startswith(
        "0/3 nodes are available: 3 node(s) didn't have the requested GPU model."
    )


def test_rejection_on_an_empty_cluster() -> None:
    snapshot = snapshot_of()
    decision = scheduler_for("best-fit", snapshot).schedule_pod(snapshot, cpu_pod("p"), rng())
    assert not decision.placed
    assert "0/0 nodes" in decision.reason
    assert "no nodes" in decision.reason


def test_placed_decision_has_node_gpus_and_reason() -> None:
    snapshot = snapshot_of(gpu_node("only", 2, "A10", cpu=8000, memory=4096))
    pod = whole_pod("trainer", count=2, cpu=3000, memory=1000)
    decision = scheduler_for("best-fit", snapshot).schedule_pod(snapshot, pod, rng())
    assert decision.placed
    assert decision.subject == "trainer"
    [placement] = decision.placements
    assert (placement.pod, placement.node, placement.gpu_indices) == ("trainer", "only", (0, 1))
    assert placement.gpu_milli == 1000
    assert "trainer" in decision.reason
    assert "only" in decision.reason
    assert "GPUs [0, 1]" in decision.reason
    # ... and the snapshot now holds the pod.
    assert snapshot.cpu_free_milli.tolist() == [5000]
    assert snapshot.memory_free_mib.tolist() == [3096]
    assert snapshot.gpu_free_milli.tolist() == [[0, 0]]
    assert snapshot.gpu_pod_kinds[0, 2] == 1


def test_placed_cpu_pod_has_no_gpus() -> None:
    snapshot = snapshot_of(cpu_node("cpu"))
    decision = scheduler_for("best-fit", snapshot).schedule_pod(snapshot, cpu_pod("c"), rng())
    assert decision.placed
    assert decision.placements[0].gpu_indices == ()
    assert decision.placements[0].gpu_milli == 0
    assert "GPUs" not in decision.reason


@pytest.mark.parametrize("strategy", strategy_names())
def test_single_feasible_node_is_taken(strategy: str) -> None:
    snapshot = snapshot_of(
        gpu_node("too-small", 1, cpu=500),
        gpu_node("fits", 2, gpu_free=[0, 1000]),
        gpu_node("full", 2, gpu_free=[0, 0]),
    )
    scheduler = scheduler_for(strategy, snapshot, "too-small", "full")
    decision = scheduler.schedule_pod(snapshot, whole_pod("w", cpu=1000), rng())
    assert decision.placements[0].node == "fits"
    assert decision.placements[0].gpu_indices == (1,)
    assert "the only feasible node" in decision.reason


# --- GPU choice inside the chosen node -------------------------------------------------------


@pytest.mark.parametrize(
    ("milli", "gpu"),
    [(250, 1), (300, 1), (301, 2), (600, 2), (601, 0), (1000, 0)],
)
def test_sharing_pod_takes_the_fullest_gpu_that_fits(milli: int, gpu: int) -> None:
    snapshot = snapshot_of(gpu_node("n", 4, gpu_free=[1000, 300, 600, 1000]))
    pod = Pod(name="s", cpu_milli=1, memory_mib=1, num_gpu=1, gpu_milli=milli)
    decision = scheduler_for("best-fit", snapshot).schedule_pod(snapshot, pod, rng())
    assert decision.placements[0].gpu_indices == (gpu,)


def test_equally_full_gpus_go_lowest_index_first() -> None:
    snapshot = snapshot_of(gpu_node("n", 4, gpu_free=[1000, 500, 800, 500]))
    decision = scheduler_for("best-fit", snapshot).schedule_pod(snapshot, share_pod(), rng())
    assert decision.placements[0].gpu_indices == (1,)


@pytest.mark.parametrize("strategy", strategy_names())
def test_whole_gpu_pods_take_the_first_idle_gpus_by_index(strategy: str) -> None:
    snapshot = snapshot_of(gpu_node("n", 8, gpu_free=[0, 1000, 500, 1000, 1000, 0, 1000, 1000]))
    decision = scheduler_for(strategy, snapshot).schedule_pod(snapshot, whole_pod(count=3), rng())
    assert decision.placements[0].gpu_indices == (1, 3, 4)


def test_random_strategy_takes_a_random_fitting_gpu() -> None:
    free = [1000, 400, 800, 0, 600]
    chosen = set()
    for seed in range(40):
        snapshot = snapshot_of(gpu_node("n", 5, gpu_free=free))
        decision = scheduler_for("random", snapshot).schedule_pod(
            snapshot, share_pod(milli=500), np.random.default_rng(seed)
        )
        chosen.update(decision.placements[0].gpu_indices)
    assert chosen == {0, 2, 4}


def test_random_strategy_gpu_choice_is_reproducible() -> None:
    picks = []
    for _ in range(2):
        snapshot = snapshot_of(gpu_node("n", 8))
        scheduler = scheduler_for("random", snapshot)
        generator = np.random.default_rng(3)
        picks.append(
            [
                scheduler.schedule_pod(snapshot, share_pod(f"s{i}", 300), generator)
                .placements[0]
                .gpu_indices
                for i in range(10)
            ]
        )
    assert picks[0] == picks[1]


# --- ties between nodes ----------------------------------------------------------------------


@pytest.mark.parametrize("strategy", [n for n in strategy_names() if n != "random"])
def test_ties_are_broken_by_tie_break_rank(strategy: str) -> None:
    for ranks, expected in (([2, 0, 1], "b"), ([1, 2, 0], "c"), ([0, 1, 2], "a")):
        snapshot = snapshot_of(gpu_node("a"), gpu_node("b"), gpu_node("c"))
        scheduler = Scheduler(make_strategy(strategy), np.array(ranks, dtype=np.int64))
        decision = scheduler.schedule_pod(snapshot, share_pod(), rng())
        assert decision.placements[0].node == expected, ranks
        assert "3 tied, won on rank" in decision.reason


def test_a_better_score_beats_a_better_rank() -> None:
    snapshot = snapshot_of(gpu_node("idle"), gpu_node("used", gpu_free=[1000, 1000, 1000, 0]))
    decision = scheduler_for("best-fit", snapshot, "idle").schedule_pod(
        snapshot, whole_pod(), rng()
    )
    assert decision.placements[0].node == "used"
    assert "best of 2 feasible nodes" in decision.reason
    assert "tied" not in decision.reason


def test_random_ranks_are_a_seeded_permutation() -> None:
    strategy = make_strategy("best-fit")
    first = Scheduler.with_random_ranks(strategy, 50, np.random.default_rng(11))
    second = Scheduler.with_random_ranks(strategy, 50, np.random.default_rng(11))
    other = Scheduler.with_random_ranks(strategy, 50, np.random.default_rng(12))
    assert sorted(first.tie_break_rank.tolist()) == list(range(50))
    assert first.tie_break_rank.tolist() == second.tie_break_rank.tolist()
    assert first.tie_break_rank.tolist() != other.tie_break_rank.tolist()


def test_ties_spread_over_the_cluster_with_random_ranks() -> None:
    winners = set()
    for seed in range(30):
        snapshot = snapshot_of(*(gpu_node(f"n{i}") for i in range(6)))
        generator = np.random.default_rng(seed)
        scheduler = Scheduler.with_random_ranks(make_strategy("best-fit"), 6, generator)
        winners.add(scheduler.schedule_pod(snapshot, share_pod(), generator).placements[0].node)
    assert len(winners) > 1


# --- gangs -----------------------------------------------------------------------------------


def test_gang_that_fits_is_placed_whole() -> None:
    snapshot = snapshot_of(gpu_node("a", 2), gpu_node("b", 2))
    group = PodGroup(name="gang", pods=tuple(whole_pod(f"w{i}") for i in range(4)), min_member=4)
    decision = scheduler_for("best-fit", snapshot).schedule_group(snapshot, group, rng())
    assert decision.placed
    assert decision.subject == "gang"
    assert [p.pod for p in decision.placements] == ["w0", "w1", "w2", "w3"]
    assert "4/4 pods placed" in decision.reason
    assert snapshot.gpu_free_milli.sum() == 0


def test_gang_that_does_not_fit_leaves_the_snapshot_unchanged() -> None:
    snapshot = snapshot_of(gpu_node("a", 2), gpu_node("b", 2))
    occupy(snapshot, "a", share_pod("resident", 300), [1])
    before = state_of(snapshot)
    group = PodGroup(name="gang", pods=tuple(whole_pod(f"w{i}") for i in range(4)), min_member=4)
    decision = scheduler_for("best-fit", snapshot).schedule_group(snapshot, group, rng())
    assert not decision.placed
    assert decision.placements == ()
    assert "only 3 of min 4 pods fit, nothing placed" in decision.reason
    assert "w3" in decision.reason
    assert_state_equal(snapshot, before)


def test_gang_with_min_member_below_size_keeps_the_pods_that_fit() -> None:
    snapshot = snapshot_of(gpu_node("a", 2))
    group = PodGroup(name="gang", pods=tuple(whole_pod(f"w{i}") for i in range(3)), min_member=2)
    decision = scheduler_for("best-fit", snapshot).schedule_group(snapshot, group, rng())
    assert decision.placed
    assert [p.pod for p in decision.placements] == ["w0", "w1"]
    assert "2/3 pods placed" in decision.reason
    assert "not placed" in decision.reason
    assert snapshot.gpu_free_milli.tolist() == [[0, 0]]


def test_rolled_back_gang_frees_everything_on_an_empty_cluster() -> None:
    snapshot = snapshot_of(gpu_node("a", 2), cpu_node("b"))
    group = PodGroup(
        name="gang",
        pods=(cpu_pod("c"), share_pod("s"), whole_pod("w", 2)),
        min_member=3,
    )
    decision = scheduler_for("gpu-packing", snapshot).schedule_group(snapshot, group, rng())
    assert not decision.placed
    assert_empty(snapshot)
