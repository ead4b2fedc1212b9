"""CPU stranding: the fluid measure, the switch to all pods' CPU when CPU is short, and FGD
with the stranding term sending CPU away from nodes whose GPUs would go hungry."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.builders import (
    cpu_pod,
    gpu_node,
    ranks_preferring,
    share_pod,
    snapshot_of,
    whole_pod,
)
from voltpack.model import Pod, PolicyError
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.policies.cpu_stranding import (
    CpuPerGpu,
    free_gpu_milli,
    stranded_gpu_milli,
    stranding_change,
)
from voltpack.policies.fragmentation import TypicalPods
from voltpack.policies.registry import make_strategy
from voltpack.policies.strategy import pick_best_fit_gpus
from voltpack.scheduler.placement import Scheduler

# GPU pods ask 8 cores per GPU; with the CPU-only pod, all pods ask 28/3 cores per GPU.
WORKLOAD = [
    whole_pod("w1", 1, cpu=8000),
    whole_pod("w2", 1, cpu=8000),
    whole_pod("w3", 1, cpu=8000),
    cpu_pod("c", cpu=4000),
]


def test_ratios_of_typical_pods() -> None:
    typical = TypicalPods.from_pods(
        [whole_pod("w", 1, cpu=8000), share_pod("s", 500, cpu=2000), cpu_pod("c", cpu=10_000)],
        coverage=1.0,
    )
    ratios = CpuPerGpu.of(typical)
    assert ratios is not None
    assert ratios.gpu_pods == pytest.approx(10_000 / 1500)
    assert ratios.all_pods == pytest.approx(20_000 / 1500)


def test_no_ratio_without_gpu_shapes() -> None:
    assert CpuPerGpu.of(TypicalPods.from_pods([cpu_pod("c", cpu=4000)])) is None
    assert CpuPerGpu.of(TypicalPods.from_counts({})) is None


def test_stranded_gpu_milli() -> None:
    stranded = stranded_gpu_milli(
        np.array([4000, 4000, 0, 1000]), np.array([32_000, 16_000, 0, 0]), 8.0
    )
    assert stranded.tolist() == [0.0, 2000.0, 0.0, 1000.0]
    with pytest.raises(ValueError, match="positive"):
        stranded_gpu_milli(np.array([1000]), np.array([1000]), 0.0)


def test_ratio_switches_to_all_pods_when_cpu_is_short() -> None:
    ratios = CpuPerGpu(gpu_pods=8.0, all_pods=16.0)
    # 4 idle GPUs need 32 cores; CPU-only pods are expected to ask 8 cores per free GPU: 32.
    enough = snapshot_of(gpu_node("n", 4, cpu=64_000))
    assert ratios.for_cluster(enough) == 8.0
    short = snapshot_of(gpu_node("n", 4, cpu=48_000))
    assert ratios.for_cluster(short) == 16.0
    assert CpuPerGpu(gpu_pods=8.0, all_pods=8.0).for_cluster(short) == 8.0


node_state = st.tuples(
    st.lists(st.sampled_from([0, 190, 530, 1000]), min_size=1, max_size=8),
    st.integers(0, 96_000),
)


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(node_state, min_size=1, max_size=4),
    pod=st.sampled_from([*WORKLOAD, share_pod("s", 470, cpu=3000), whole_pod("two", 2)]),
    ratio=st.floats(1.0, 30.0),
)
def test_change_equals_placing_the_pod(
    nodes: list[tuple[list[int], int]], pod: Pod, ratio: float
) -> None:
    snapshot = snapshot_of(
        *(
            gpu_node(f"n{i}", len(free), cpu=96_000, cpu_free=cpu, gpu_free=free)
            for i, (free, cpu) in enumerate(nodes)
        )
    )
    rows = np.arange(snapshot.node_count)
    change = stranding_change(snapshot, pod, rows, ratio)
    for node in rows:
        if snapshot.cpu_free_milli[node] < pod.cpu_milli:
            continue
        gpus = pick_best_fit_gpus(snapshot, int(node), pod)
        if len(gpus) < pod.num_gpu or any(
            snapshot.gpu_free_milli[node, g] < pod.gpu_milli for g in gpus
        ):
            continue
        trial = snapshot.copy()
        one = np.array([node])
        before = stranded_gpu_milli(free_gpu_milli(trial, one), trial.cpu_free_milli[one], ratio)
        trial.allocate(int(node), pod, gpus)
        after = stranded_gpu_milli(free_gpu_milli(trial, one), trial.cpu_free_milli[one], ratio)
        assert change[node] == pytest.approx(float(after[0] - before[0]))


def two_nodes_scheduler(params: dict[str, object]) -> tuple[Scheduler, ClusterSnapshot]:
    # n-tight: 4 idle GPUs and 40 cores (32 feed the GPUs); n-roomy: 4 GPUs and 128 cores.
    snapshot = snapshot_of(gpu_node("n-tight", 4, cpu=40_000), gpu_node("n-roomy", 4, cpu=128_000))
    strategy = make_strategy("fgd", params)
    strategy.prime(WORKLOAD)
    return Scheduler(strategy, ranks_preferring(snapshot, "n-tight")), snapshot


def test_stranding_sends_cpu_to_the_node_that_can_spare_it() -> None:
    # 10 cores on n-tight leave 30 for 4 GPUs (8 each): a whole GPU pod still fits, so FGD
    # sees no change on either node and the rank picks n-tight; with the stranding term the
    # 250 milli-GPU that would go hungry on n-tight send the pod to n-roomy.
    pod = cpu_pod("c10", cpu=10_000)
    plain, snapshot = two_nodes_scheduler({"shapes": "primed"})
    decision = plain.schedule_pod(snapshot, pod, np.random.default_rng(0))
    assert decision.placements[0].node == "n-tight"
    aware, snapshot = two_nodes_scheduler({"shapes": "primed", "cpu_stranding": 1.0})
    scores = aware.strategy.score(snapshot, pod, np.arange(2), np.random.default_rng(0))
    assert scores.tolist() == [43, 50]  # 100 / (1 + e^0.25) truncated; no change: 50
    decision = aware.schedule_pod(snapshot, pod, np.random.default_rng(0))
    assert decision.placements[0].node == "n-roomy"


def test_stranding_weight_zero_is_the_paper() -> None:
    snapshot = snapshot_of(gpu_node("a", 4, cpu=40_000), gpu_node("b", 2, cpu=20_000))
    pods = [cpu_pod("c", cpu=10_000), whole_pod("w", 1, cpu=12_000), share_pod("s", 470)]
    paper = make_strategy("fgd", {"shapes": "primed"})
    zero = make_strategy("fgd", {"shapes": "primed", "cpu_stranding": 0})
    for strategy in (paper, zero):
        strategy.prime(WORKLOAD)
    for pod in pods:
        rng = np.random.default_rng(0)
        assert (
            paper.score(snapshot, pod, np.arange(2), rng).tolist()
            == zero.score(snapshot, pod, np.arange(2), rng).tolist()
        )


@pytest.mark.parametrize("weight", [-1, 1000, "much"])
def test_bad_stranding_weight_is_named(weight: object) -> None:
    with pytest.raises(PolicyError, match=r"spec\.scoring\.params\.cpu_stranding"):
        make_strategy("fgd", {"cpu_stranding": weight})
