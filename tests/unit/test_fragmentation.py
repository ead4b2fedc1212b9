"""GPU fragmentation as the FGD paper defines it: typical pods and per-node fragment amounts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from tests.unit.builders import cpu_node, cpu_pod, gpu_node, share_pod, snapshot_of, whole_pod
from voltpack.model import Node, Pod
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.policies.fragmentation import FragmentationModel, TypicalPods

Shape = tuple[int, int, int, tuple[str, ...]]
"""(CPU milli, per-GPU milli, GPU count, accepted models)."""


def typical(*shapes: tuple[Shape, float]) -> TypicalPods:
    return TypicalPods(
        cpu_milli=np.array([s[0] for s, _ in shapes], dtype=np.int64),
        gpu_milli=np.array([s[1] for s, _ in shapes], dtype=np.int64),
        num_gpu=np.array([s[2] for s, _ in shapes], dtype=np.int64),
        gpu_models=tuple(s[3] for s, _ in shapes),
        frequency=np.array([f for _, f in shapes], dtype=np.float64),
    )


def frag(nodes: Sequence[Node], *shapes: tuple[Shape, float]) -> list[float]:
    """Fragmented milli-GPU of each node against the given typical shapes."""
    snapshot = snapshot_of(*nodes)
    model = FragmentationModel(typical(*shapes), snapshot.gpu_models)
    return model.snapshot_frag_milli(snapshot, np.arange(snapshot.node_count)).tolist()


CPU_ONLY: Shape = (1000, 0, 0, ())
SHARE_600: Shape = (1000, 600, 1, ())
TWO_WHOLE: Shape = (1000, 1000, 2, ())
THREE_WHOLE: Shape = (1000, 1000, 3, ())


# --- typical pods ----------------------------------------------------------------------------


def test_openb_default_has_35_typical_shapes(openb_default_pods: list[Pod]) -> None:
    shapes = TypicalPods.from_pods(openb_default_pods)
    assert len(shapes) == 35
    assert shapes.frequency.sum() == pytest.approx(1.0, abs=1e-12)
    assert (np.diff(shapes.frequency) <= 0).all(), "shapes go from most to least frequent"
    assert (shapes.frequency > 0).all()


def test_typical_shapes_cover_the_requested_share() -> None:
    pods = (
        [cpu_pod(f"c{i}", cpu=1000) for i in range(5)]
        + [share_pod(f"s{i}", 500, cpu=2000) for i in range(3)]
        + [whole_pod(f"w{i}", 2, cpu=4000) for i in range(2)]
    )
    half = TypicalPods.from_pods(pods, coverage=0.5)
    assert half.cpu_milli.tolist() == [1000]
    assert half.frequency.tolist() == [1.0]
    most = TypicalPods.from_pods(pods, coverage=0.8)
    assert most.cpu_milli.tolist() == [1000, 2000]
    assert most.gpu_milli.tolist() == [0, 500]
    assert most.num_gpu.tolist() == [0, 1]
    assert most.frequency.tolist() == pytest.approx([5 / 8, 3 / 8])
    every = TypicalPods.from_pods(pods, coverage=1.0)
    assert every.frequency.tolist() == pytest.approx([0.5, 0.3, 0.2])


def test_shapes_ignore_memory_and_name_and_order_models() -> None:
    pods = [
        share_pod("a", 500, memory=1, models=["T4", "A10"]),
        share_pod("b", 500, memory=999, models=["A10", "T4"]),
    ]
    shapes = TypicalPods.from_pods(pods, coverage=1.0)
    assert len(shapes) == 1
    assert shapes.gpu_models == (("A10", "T4"),)


def test_equally_frequent_shapes_put_the_larger_first() -> None:
    pods = [cpu_pod("small", cpu=1000), cpu_pod("large", cpu=9000)]
    shapes = TypicalPods.from_pods(pods, coverage=1.0)
    assert shapes.cpu_milli.tolist() == [9000, 1000]


def test_typical_pods_need_pods() -> None:
    with pytest.raises(ValueError, match="at least one pod"):
        TypicalPods.from_pods([])


# --- the openb cluster -----------------------------------------------------------------------


def test_empty_openb_cluster_fragmentation(
    openb_nodes: list[Node], openb_default_pods: list[Pod]
) -> None:
    snapshot = ClusterSnapshot.from_nodes(openb_nodes)
    assert snapshot.total_gpus * 1000 == 6_212_000
    model = FragmentationModel(TypicalPods.from_pods(openb_default_pods), snapshot.gpu_models)
    per_node = model.snapshot_frag_milli(snapshot, np.arange(snapshot.node_count))
    total_pct = per_node.sum() / 6_212_000 * 100
    assert round(total_pct, 2) == 13.94
    # On an empty cluster a node's fragment is all of its GPUs or a share of them.
    assert (per_node >= 0).all()
    assert (per_node <= snapshot.gpu_count * 1000 + 1e-9).all()


# --- hand-computed nodes ---------------------------------------------------------------------


def test_cpu_only_shape_counts_every_idle_gpu() -> None:
    nodes = [gpu_node("n", 4, gpu_free=[1000, 500, 0, 1000])]
    assert frag(nodes, (CPU_ONLY, 1.0)) == [2500]


def test_sharing_shape_counts_gpus_with_less_free_than_its_share() -> None:
    nodes = [gpu_node("n", 4, gpu_free=[1000, 500, 200, 600])]
    # 500 and 200 are too small for 600; 1000 and 600 are usable.
    assert frag(nodes, (SHARE_600, 1.0)) == [700]


def test_whole_gpu_shape_counts_partly_used_gpus() -> None:
    nodes = [gpu_node("n", 4, gpu_free=[1000, 500, 1000, 0])]
    assert frag(nodes, (TWO_WHOLE, 1.0)) == [500]


def test_shape_needing_more_gpus_than_fit_counts_every_idle_gpu() -> None:
    nodes = [gpu_node("n", 4, gpu_free=[1000, 500, 1000, 0])]
    assert frag(nodes, (THREE_WHOLE, 1.0)) == [2500]


def test_shape_that_does_not_fit_on_cpu_counts_every_idle_gpu() -> None:
    nodes = [gpu_node("n", 4, cpu=64_000, cpu_free=8000, gpu_free=[1000, 500, 200, 600])]
    assert frag(nodes, ((8001, 600, 1, ()), 1.0)) == [2300]
    assert frag(nodes, ((8000, 600, 1, ()), 1.0)) == [700]


def test_model_mismatch_counts_every_idle_gpu() -> None:
    nodes = [gpu_node("t4", 2, "T4", gpu_free=[1000, 300]), gpu_node("a10", 2, "A10")]
    assert frag(nodes, ((1000, 600, 1, ("A10",)), 1.0)) == [1300, 0]
    # Models match case-insensitively.
    assert frag(nodes, ((1000, 600, 1, ("t4",)), 1.0)) == [300, 2000]


def test_node_without_gpus_has_no_fragment() -> None:
    nodes = [cpu_node("cpu")]
    for shape in (CPU_ONLY, SHARE_600, TWO_WHOLE, (1000, 600, 1, ("T4",))):
        assert frag(nodes, (shape, 1.0)) == [0]


def test_fully_allocated_node_has_no_fragment() -> None:
    nodes = [gpu_node("n", 2, gpu_free=[0, 0])]
    assert frag(nodes, (CPU_ONLY, 0.5), (SHARE_600, 0.5)) == [0]


def test_node_fragment_is_the_frequency_weighted_mean_over_shapes() -> None:
    nodes = [gpu_node("n", 4, gpu_free=[1000, 500, 200, 600]), gpu_node("m", 2)]
    # n: CPU-only 2300, share-600 700, two-whole 2300 (only one idle GPU: it does not fit).
    # m: CPU-only 2000, share-600 0, two-whole 0.
    result = frag(nodes, (CPU_ONLY, 0.2), (SHARE_600, 0.5), (TWO_WHOLE, 0.3))
    assert result == pytest.approx([0.2 * 2300 + 0.5 * 700 + 0.3 * 2300, 0.2 * 2000])


def test_node_frag_milli_works_on_row_subsets() -> None:
    snapshot = snapshot_of(gpu_node("a", 2, gpu_free=[1000, 100]), cpu_node("b"), gpu_node("c", 1))
    model = FragmentationModel(typical((SHARE_600, 1.0)), snapshot.gpu_models)
    rows = np.array([2, 0], dtype=np.int64)
    assert model.snapshot_frag_milli(snapshot, rows).tolist() == [0, 100]
