"""The exact gang placement: matches brute force, honours its limits, bounds the heuristics."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.domain_tree import DomainTree, NodeCounts
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.resources.topology import HostNicSpec, HostSpec, TopologyLevel, TopologySpec
from voltpack.model.topology import ClusterTopology
from voltpack.model.workload import Pod
from voltpack.perf.training_models import default_parallelism, default_training_models
from voltpack.policies.topology.exact import ExactPlacer, exact_best, topology_order
from voltpack.policies.topology.placers import StepTimePlacer
from voltpack.policies.topology.step_model import gang_step_model
from voltpack.scheduler.gang_topology import place_gang
from voltpack.sim.topology_training import (
    PlacementPolicy,
    cluster_snapshot,
    job_gang,
    optimality_study,
)
from voltpack.sim.traces.training_jobs import TrainingJob

SKU = default_catalog().get("A100-80GB")
SPEC = TopologySpec(
    levels=[
        TopologyLevel(node_label="zone", oversubscription=1.0),
        TopologyLevel(node_label="spine", oversubscription=2.0),
        TopologyLevel(node_label="leaf", oversubscription=3.0),
    ],
    nvlink_clique_label=None,
    default_host=HostSpec(
        gpus=8,
        nics=[
            HostNicSpec(
                name=f"mlx5_{i}", nic_class="roce", line_rate_gbit_s=200, gpus=[2 * i, 2 * i + 1]
            )
            for i in range(4)
        ],
    ),
)


def topology(leaves: int, hosts_per_leaf: int, spines: int = 2) -> ClusterTopology:
    names = [f"n{leaf:02d}{host}" for leaf in range(leaves) for host in range(hosts_per_leaf)]
    labels = {
        name: {"zone": "z", "spine": f"s{int(name[1:3]) % spines}", "leaf": f"l{name[1:3]}"}
        for name in names
    }
    return ClusterTopology.from_labels(SPEC, names, labels, gpu_counts=dict.fromkeys(names, 8))


def tree_with(topo: ClusterTopology, slots: list[int]) -> DomainTree:
    gpus = np.full(topo.node_count, 8, dtype=np.int64)
    return DomainTree.build(topo, np.array(slots, dtype=np.int64), gpus, gpus)


def brute_force(tree: DomainTree, units: int, score: Callable[[NodeCounts], float]) -> float:
    rows = topology_order(tree, np.flatnonzero(tree.slots > 0))
    best = float("inf")
    for counts in itertools.product(*(range(int(tree.slots[r]) + 1) for r in rows)):
        if sum(counts) != units:
            continue
        chosen = [(r, c) for r, c in zip(rows, counts, strict=True) if c]
        best = min(
            best, score(NodeCounts(tuple(r for r, _ in chosen), tuple(c for _, c in chosen)))
        )
    return best


def leaf_score(topo: ClusterTopology) -> Callable[[NodeCounts], float]:
    """A score that depends only on leaves and spines used and on how even the split is."""

    def score(counts: NodeCounts) -> float:
        nodes = np.array(counts.nodes)
        leaves = len(set(topo.domain[2, nodes].tolist()))
        spines = len(set(topo.domain[1, nodes].tolist()))
        return 10.0 * spines + 3.0 * leaves + 0.1 * max(counts.pods) - 0.01 * len(nodes)

    return score


@pytest.mark.parametrize("seed", range(12))
def test_matches_brute_force_on_tiny_trees(seed: int) -> None:
    rng = np.random.default_rng(seed)
    topo = topology(leaves=3, hosts_per_leaf=3)
    slots = rng.integers(0, 3, size=topo.node_count).tolist()
    tree = tree_with(topo, slots)
    units = int(rng.integers(1, max(2, sum(slots)) + 1))
    score = leaf_score(topo)
    result = exact_best(tree, units, score)
    if sum(slots) < units:
        assert isinstance(result, str)
        return
    assert not isinstance(result, str)
    assert result.counts.total == units
    assert all(
        tree.slots[n] >= c for n, c in zip(result.counts.nodes, result.counts.pods, strict=True)
    )
    assert result.step_s == pytest.approx(brute_force(tree, units, score))


def test_matches_brute_force_with_the_step_time_model() -> None:
    rng = np.random.default_rng(5)
    topo = topology(leaves=3, hosts_per_leaf=2)
    model = default_training_models().get("gpt-13b")  # tensor 4: units of 4 GPUs
    for _ in range(6):
        snapshot = cluster_snapshot(topo, SKU.name)
        for node in range(topo.node_count):
            busy = int(rng.choice([0, 0, 4, 8]))
            if busy:
                filler = Pod(
                    name=f"f{node}",
                    cpu_milli=0,
                    memory_mib=0,
                    num_gpu=busy,
                    gpu_milli=MILLI_PER_GPU,
                )
                snapshot.allocate(node, filler, list(range(busy)))
        free = int((snapshot.gpu_free_milli >= MILLI_PER_GPU).sum())
        if free < 16:
            continue
        group = job_gang(TrainingJob("g", 0, 16, model.name, 1), 4)
        step_model = gang_step_model(topo, model, default_parallelism(model, 16), SKU)
        outcomes = {}
        for placer in (ExactPlacer(), _BrutePlacer()):
            outcome = place_gang(
                snapshot.copy(), topo, group, placer, tensor_parallel=4, step_model=step_model
            )
            assert outcome.decision.placed, outcome.decision.reason
            outcomes[placer.name] = outcome.step_s
        assert outcomes["exact"] == pytest.approx(outcomes["brute"])


class _BrutePlacer:
    name = "brute"
    keeps_groups_whole = True

    def choose(
        self,
        tree: DomainTree,
        units: int,
        required_level: int | None,
        preferred_level: int | None,
        step_time_of: Callable[[NodeCounts], float] | None,
    ) -> NodeCounts | str:
        assert step_time_of is not None
        rows = topology_order(tree, np.flatnonzero(tree.slots > 0))
        best: tuple[float, NodeCounts] | None = None
        for counts in itertools.product(*(range(int(tree.slots[r]) + 1) for r in rows)):
            if sum(counts) != units:
                continue
            chosen = [(r, c) for r, c in zip(rows, counts, strict=True) if c]
            split = NodeCounts(tuple(r for r, _ in chosen), tuple(c for _, c in chosen))
            step = step_time_of(split)
            if best is None or step < best[0]:
                best = (step, split)
        return "nothing" if best is None else best[1]


def test_required_level_keeps_the_gang_in_one_domain() -> None:
    topo = topology(leaves=3, hosts_per_leaf=2)
    tree = tree_with(topo, [1, 1, 2, 0, 1, 1])

    def prefer_many_nodes(counts: NodeCounts) -> float:
        return -float(len(counts.nodes))

    free = exact_best(tree, 3, prefer_many_nodes)
    assert not isinstance(free, str) and len(free.counts.nodes) == 3
    bound = exact_best(tree, 2, prefer_many_nodes, required_level=2)
    assert not isinstance(bound, str)
    assert len(set(topo.domain[2, list(bound.counts.nodes)].tolist())) == 1
    refused = exact_best(tree, 3, prefer_many_nodes, required_level=2)
    assert isinstance(refused, str) and "leaf" in refused


def test_refuses_big_trees_and_big_searches() -> None:
    topo = topology(leaves=5, hosts_per_leaf=4)
    tree = tree_with(topo, [1] * 20)
    refused = exact_best(tree, 4, leaf_score(topo))
    assert isinstance(refused, str) and "16" in refused
    small = topology(leaves=4, hosts_per_leaf=4)
    many = exact_best(tree_with(small, list(range(1, 17))), 20, lambda c: 0.0, max_evaluations=10)
    assert isinstance(many, str) and "stopped" in many
    assert ExactPlacer().choose(tree_with(small, [1] * 16), 2, None, None, None) == (
        "exact search needs a step-time model"
    )


def test_voltpack_is_never_better_than_the_optimum() -> None:
    topo = topology(leaves=8, hosts_per_leaf=4, spines=3)
    study = optimality_study(
        topo,
        [PlacementPolicy("voltpack", placer=StepTimePlacer())],
        SKU,
        instances=25,
        seed=2,
    )
    gaps = study.gaps_pct("voltpack")
    assert len(gaps) == 25
    assert min(gaps) >= -1e-9
    summary = study.summary("voltpack")
    assert summary["below_optimum"] == 0
    assert summary["max_gap_pct"] == pytest.approx(max(gaps))
