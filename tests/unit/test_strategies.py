"""Each scoring strategy's defining preference, on clusters small enough to reason about.

Every test gives the tie-break to the node the strategy should NOT pick, so only the score can
make it pick the right one.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.builders import (
    cpu_pod,
    gpu_node,
    occupy,
    scheduler_for,
    share_pod,
    snapshot_of,
    whole_pod,
)
from voltpack.model import Pod, PolicyError
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.policies.registry import make_strategy, strategy_names, strategy_summaries
from voltpack.policies.strategy import MAX_NODE_SCORE, ScoringStrategy
from voltpack.scheduler.placement import Scheduler


def pick(
    strategy: str, snapshot: ClusterSnapshot, pod: Pod, *prefer: str
) -> tuple[str, tuple[int, ...]]:
    """Node and GPUs the strategy chooses, with ties going to the `prefer` nodes."""
    decision = scheduler_for(strategy, snapshot, *prefer).schedule_pod(
        snapshot, pod, np.random.default_rng(0)
    )
    assert decision.placed, decision.reason
    [placement] = decision.placements
    return placement.node, placement.gpu_indices


def scores(strategy: str, snapshot: ClusterSnapshot, pod: Pod) -> list[int]:
    candidates = np.arange(snapshot.node_count)
    values = make_strategy(strategy).score(snapshot, pod, candidates, np.random.default_rng(0))
    return [int(v) for v in values]


def fuller_and_emptier() -> ClusterSnapshot:
    return snapshot_of(
        gpu_node("fuller", 4, cpu=32_000, cpu_free=8000, gpu_free=[0, 0, 1000, 1000]),
        gpu_node("emptier", 4, cpu=32_000),
    )


# --- best-fit and least-allocated ------------------------------------------------------------


@pytest.mark.parametrize(
    "pod", [whole_pod("w"), share_pod("s"), cpu_pod("c")], ids=lambda p: p.name
)
def test_best_fit_picks_the_fuller_node(pod: Pod) -> None:
    assert pick("best-fit", fuller_and_emptier(), pod, "emptier")[0] == "fuller"


@pytest.mark.parametrize(
    "pod", [whole_pod("w"), share_pod("s"), cpu_pod("c")], ids=lambda p: p.name
)
def test_least_allocated_picks_the_emptier_node(pod: Pod) -> None:
    assert pick("least-allocated", fuller_and_emptier(), pod, "fuller")[0] == "emptier"


def test_best_fit_weighs_cpu_and_gpu_equally() -> None:
    # "cpu-full" has 1/4 of the largest node's CPU left, "gpu-full" 1/4 of its GPUs left.
    snapshot = snapshot_of(
        gpu_node("cpu-full", 4, cpu=32_000, cpu_free=8000, gpu_free=[1000, 1000, 1000, 0]),
        gpu_node("gpu-full", 4, cpu=32_000, cpu_free=16_000, gpu_free=[1000, 0, 0, 0]),
    )
    # cpu-full leaves 7000 CPU + 2 GPUs, gpu-full leaves 15000 CPU + 0 GPUs.
    assert scores("best-fit", snapshot, whole_pod(cpu=1000)) == [
        int(100 * (1 - (7000 / 32000 + 2000 / 4000) / 2)),
        int(100 * (1 - (15000 / 32000 + 0 / 4000) / 2)),
    ]
    assert pick("best-fit", snapshot, whole_pod(cpu=1000), "cpu-full")[0] == "gpu-full"


def test_least_allocated_counts_memory() -> None:
    def cluster() -> ClusterSnapshot:
        return snapshot_of(
            gpu_node("memory-used", 4, memory=100_000, memory_free=10_000),
            gpu_node("memory-free", 4, memory=100_000),
        )

    assert pick("least-allocated", cluster(), cpu_pod(), "memory-used")[0] == "memory-free"
    # best-fit ignores memory: the two nodes tie there and the rank decides.
    assert pick("best-fit", cluster(), cpu_pod(), "memory-used")[0] == "memory-used"


# --- dot-product -----------------------------------------------------------------------------


def cpu_rich_and_gpu_rich() -> ClusterSnapshot:
    return snapshot_of(
        gpu_node("cpu-rich", 8, cpu=64_000, gpu_free=[0] * 6 + [1000] * 2),
        gpu_node("gpu-rich", 8, cpu=64_000, cpu_free=8000, gpu_free=[0] * 2 + [1000] * 6),
    )


def test_dot_product_picks_the_smaller_free_resource_dot_product() -> None:
    # For a GPU-heavy pod: "cpu-rich" has much free CPU but few free GPUs, "gpu-rich" the
    # opposite. Dot products (normalised): cpu-rich 1.0*c + 0.25*g, gpu-rich 0.125*c + 0.75*g.
    pod = whole_pod(count=2, cpu=1000)
    cpu_share, gpu_share = 1000 / 64_000, 2000 / 8000
    dot_cpu_rich = 1.0 * cpu_share + 0.25 * gpu_share
    dot_gpu_rich = 0.125 * cpu_share + 0.75 * gpu_share
    assert scores("dot-product", cpu_rich_and_gpu_rich(), pod) == [
        int(100 * (1 - dot_cpu_rich / 2)),
        int(100 * (1 - dot_gpu_rich / 2)),
    ]
    assert pick("dot-product", cpu_rich_and_gpu_rich(), pod, "gpu-rich")[0] == "cpu-rich"
    # best-fit prefers the other node here: the two strategies differ.
    assert pick("best-fit", cpu_rich_and_gpu_rich(), pod, "cpu-rich")[0] == "gpu-rich"


def test_dot_product_for_a_cpu_heavy_pod_prefers_less_free_cpu() -> None:
    pod = cpu_pod(cpu=4000)
    assert pick("dot-product", cpu_rich_and_gpu_rich(), pod, "cpu-rich")[0] == "gpu-rich"


# --- gpu-packing -----------------------------------------------------------------------------


def packing_cluster(with_partial_gpu: bool) -> ClusterSnapshot:
    nodes = [
        gpu_node("idle-node", 4),
        gpu_node("used-node", 4, gpu_free=[0, 1000, 1000, 1000]),
    ]
    if with_partial_gpu:
        nodes.append(gpu_node("partial-gpu", 4, gpu_free=[1000, 1000, 600, 1000]))
    return snapshot_of(*nodes)


def test_gpu_packing_prefers_a_partly_used_gpu() -> None:
    snapshot = packing_cluster(with_partial_gpu=True)
    node, gpus = pick("gpu-packing", snapshot, share_pod(milli=500), "idle-node", "used-node")
    assert (node, gpus) == ("partial-gpu", (2,))


def test_gpu_packing_then_prefers_an_idle_gpu_on_a_used_node() -> None:
    snapshot = packing_cluster(with_partial_gpu=False)
    node, gpus = pick("gpu-packing", snapshot, share_pod(milli=500), "idle-node")
    assert (node, gpus) == ("used-node", (1,))
    assert pick("gpu-packing", packing_cluster(False), whole_pod(count=2), "idle-node") == (
        "used-node",
        (1, 2),
    )


def test_gpu_packing_takes_a_wholly_idle_node_last() -> None:
    snapshot = packing_cluster(with_partial_gpu=True)
    idle, used, partial = scores("gpu-packing", snapshot, share_pod(milli=500))
    assert partial > used > idle
    # A partly used GPU that is too small for the pod does not count as one: both used nodes
    # would give the pod an idle GPU.
    assert scores("gpu-packing", packing_cluster(True), share_pod(milli=700))[1:] == [49, 49]


def test_gpu_packing_prefers_the_fuller_partly_used_gpu() -> None:
    snapshot = snapshot_of(
        gpu_node("roomy", 2, gpu_free=[800, 1000]),
        gpu_node("tight", 2, gpu_free=[300, 1000]),
    )
    assert pick("gpu-packing", snapshot, share_pod(milli=200), "roomy") == ("tight", (0,))


def test_gpu_packing_is_indifferent_for_cpu_only_pods() -> None:
    assert set(scores("gpu-packing", packing_cluster(True), cpu_pod())) == {0}


# --- gpu-clustering --------------------------------------------------------------------------


def clustering_cluster() -> ClusterSnapshot:
    snapshot = snapshot_of(gpu_node("idle", 4), gpu_node("sharing", 4), gpu_node("whole", 4))
    occupy(snapshot, "sharing", share_pod("resident-share", 500), [0])
    occupy(snapshot, "whole", whole_pod("resident-whole", 1), [0])
    return snapshot


def test_gpu_clustering_puts_a_share_with_shares() -> None:
    node, _ = pick("gpu-clustering", clustering_cluster(), share_pod(milli=300), "whole", "idle")
    assert node == "sharing"


def test_gpu_clustering_puts_whole_gpus_with_whole_gpus() -> None:
    node, _ = pick("gpu-clustering", clustering_cluster(), whole_pod(count=1), "sharing", "idle")
    assert node == "whole"


def test_gpu_clustering_tells_apart_pods_of_different_gpu_counts() -> None:
    snapshot = clustering_cluster()
    occupy(snapshot, "idle", whole_pod("resident-pair", 2), [0, 1])
    # "idle" now runs a 2-GPU pod, "whole" a 1-GPU pod.
    assert pick("gpu-clustering", snapshot, whole_pod(count=2), "whole")[0] == "idle"


def test_gpu_clustering_prefers_a_node_without_gpu_pods_to_one_of_another_kind() -> None:
    snapshot = snapshot_of(gpu_node("idle", 4), gpu_node("whole", 4))
    occupy(snapshot, "whole", whole_pod("resident-whole", 1), [0])
    assert pick("gpu-clustering", snapshot, share_pod(), "whole")[0] == "idle"


def test_gpu_clustering_prefers_a_node_of_only_this_kind_to_a_mixed_one() -> None:
    snapshot = snapshot_of(gpu_node("mixed", 4), gpu_node("pure", 4))
    occupy(snapshot, "mixed", share_pod("s1", 500), [0])
    occupy(snapshot, "mixed", whole_pod("w1", 1), [1])
    occupy(snapshot, "pure", share_pod("s2", 500), [0])
    # "mixed" is fuller, so only the same-kind-only bonus makes "pure" win.
    assert pick("gpu-clustering", snapshot, share_pod(), "mixed")[0] == "pure"


# --- random ----------------------------------------------------------------------------------


def test_random_spreads_over_nodes_across_seeds() -> None:
    chosen = set()
    for seed in range(40):
        snapshot = fuller_and_emptier()
        decision = scheduler_for("random", snapshot).schedule_pod(
            snapshot, share_pod(), np.random.default_rng(seed)
        )
        chosen.add(decision.placements[0].node)
    assert chosen == {"fuller", "emptier"}


def test_random_with_the_same_seed_gives_the_same_pick() -> None:
    picks = []
    for _ in range(2):
        snapshot = snapshot_of(*(gpu_node(f"n{i}") for i in range(8)))
        generator = np.random.default_rng(1234)
        scheduler = Scheduler.with_random_ranks(make_strategy("random"), 8, generator)
        picks.append(
            [scheduler.schedule_pod(snapshot, share_pod(f"s{i}"), generator) for i in range(12)]
        )
    assert picks[0] == picks[1]
    assert len({d.placements[0].node for d in picks[0]}) > 1


def test_random_scores_one_candidate_at_the_maximum() -> None:
    values = scores("random", fuller_and_emptier(), share_pod())
    assert sorted(values) == [0, MAX_NODE_SCORE]


# --- scores are integers in 0..100 -----------------------------------------------------------


@pytest.mark.parametrize("strategy", strategy_names())
@pytest.mark.parametrize(
    "pod", [cpu_pod("c"), share_pod("s"), whole_pod("w", 2)], ids=lambda p: p.name
)
def test_scores_are_integers_within_range(strategy: str, pod: Pod) -> None:
    snapshot = clustering_cluster()
    values = make_strategy(strategy).score(
        snapshot, pod, np.arange(snapshot.node_count), np.random.default_rng(0)
    )
    assert values.dtype == np.int64
    assert values.shape == (snapshot.node_count,)
    assert ((values >= 0) & (values <= MAX_NODE_SCORE)).all()


# --- registry --------------------------------------------------------------------------------


def test_registry_offers_the_baseline_strategies() -> None:
    baselines = {
        "random",
        "best-fit",
        "least-allocated",
        "dot-product",
        "gpu-packing",
        "gpu-clustering",
    }
    assert baselines <= set(strategy_names())
    assert len(set(strategy_names())) == len(strategy_names())
    assert set(strategy_summaries()) == set(strategy_names())


@pytest.mark.parametrize("name", strategy_names())
def test_every_name_makes_its_strategy_with_a_one_sentence_summary(name: str) -> None:
    strategy = make_strategy(name)
    assert isinstance(strategy, ScoringStrategy)
    assert strategy.name == name
    summary = strategy.summary
    assert summary == strategy_summaries()[name]
    assert summary[0].isupper()
    assert summary.endswith(".")
    assert summary.count(". ") == 0, "more than one sentence"
    assert len(summary.split()) >= 6


def test_make_strategy_returns_a_new_instance() -> None:
    assert make_strategy("best-fit") is not make_strategy("best-fit")


@pytest.mark.parametrize("name", ["worst-fit", "Best-Fit", "", "best_fit"])
def test_unknown_strategy_name_raises_policy_error(name: str) -> None:
    with pytest.raises(PolicyError) as error:
        make_strategy(name)
    message = str(error.value)
    assert repr(name) in message
    for known in strategy_names():
        assert known in message
