"""Kueue's and KAI's topology-aware placement, as baselines: small topologies, expected answers.

Each topology is drawn as a tree; a node's number is its slots (how many of the gang's pods
fit), and, for KAI, also its free GPUs unless said otherwise (one GPU per pod).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from voltpack.model.domain_tree import DomainTree, NodeCounts
from voltpack.model.resources.topology import TopologyLevel, TopologySpec
from voltpack.model.topology import ClusterTopology
from voltpack.policies.topology.kai import kai_topology
from voltpack.policies.topology.kueue import KueueProfile, kueue_best_fit

BLOCK, RACK, HOST = 0, 1, 2
SPEC = TopologySpec(
    levels=[
        TopologyLevel(node_label="example.com/block", oversubscription=1.0),
        TopologyLevel(node_label="example.com/rack", oversubscription=1.0),
    ]
)


def tree_of(
    nodes: Sequence[tuple[str, str | None, str | None, int]], free: list[int] | None = None
) -> DomainTree:
    """Nodes as (name, block, rack, slots); a None label is left off the node."""
    labels: dict[str, dict[str, str]] = {}
    for name, block, rack, _ in nodes:
        labels[name] = {}
        if block is not None:
            labels[name]["example.com/block"] = block
        if rack is not None:
            labels[name]["example.com/rack"] = rack
    topology = ClusterTopology.from_labels(SPEC, [n[0] for n in nodes], labels)
    slots = np.array([n[3] for n in nodes], dtype=np.int64)
    return DomainTree.build(
        topology,
        slots=slots,
        free_gpus=np.array(free, dtype=np.int64) if free is not None else slots,
        gpu_count=np.full(len(nodes), 8, dtype=np.int64),
    )


def placed(tree: DomainTree, result: NodeCounts | str) -> list[tuple[str, int]]:
    assert isinstance(result, NodeCounts), result
    return [
        (tree.topology.node_names[n], c) for n, c in zip(result.nodes, result.pods, strict=True)
    ]


# --- Kueue -------------------------------------------------------------------------------------

#            b1
#            r1
#   x1  x2  x3  x4
#    3   3   2   1
ONE_RACK = [
    ("x1", "b1", "r1", 3),
    ("x2", "b1", "r1", 3),
    ("x3", "b1", "r1", 2),
    ("x4", "b1", "r1", 1),
]


def test_kueue_best_fit_kep_example_largest_first_then_tightest_last() -> None:
    """KEP-2724: nodes 3,3,2,1 and 7 pods: BestFit takes 3, 3, then the node with exactly 1."""
    tree = tree_of(ONE_RACK)
    result = kueue_best_fit(tree, 7, None, RACK)
    assert placed(tree, result) == [("x1", 3), ("x2", 3), ("x4", 1)]


def test_kueue_least_free_capacity_kep_example_smallest_first() -> None:
    """KEP-2724: LeastFreeCapacity takes 1, 2, 3 and 1 of the last 3 (rank order by name)."""
    tree = tree_of(ONE_RACK)
    result = kueue_best_fit(tree, 7, None, RACK, profile="least_free_capacity")
    assert placed(tree, result) == [("x1", 3), ("x2", 1), ("x3", 2), ("x4", 1)]


def test_kueue_unconstrained_uses_least_free_capacity_by_default() -> None:
    """No level given: Kueue's default profile packs into the fullest nodes."""
    tree = tree_of(ONE_RACK)
    assert placed(tree, kueue_best_fit(tree, 7, None, None)) == placed(
        tree, kueue_best_fit(tree, 7, None, None, profile="least_free_capacity")
    )
    # a single node that holds the gang: the tightest one
    assert placed(tree, kueue_best_fit(tree, 2, None, None)) == [("x3", 2)]
    # the always-BestFit profile instead starts from the largest
    assert placed(tree, kueue_best_fit(tree, 4, None, None, profile="best_fit")) == [
        ("x1", 3),
        ("x4", 1),
    ]


#        b1              b2
#   r1   r2   r3         r4
#   x1   x2   x3 x4      x5
#    8    5    2  2       4
RACKS = [
    ("x1", "b1", "r1", 8),
    ("x2", "b1", "r2", 5),
    ("x3", "b1", "r3", 2),
    ("x4", "b1", "r3", 2),
    ("x5", "b2", "r4", 4),
]


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        (4, [("x3", 2), ("x4", 2)]),  # r3 and r4 both hold 4: equal, so the first by value
        (5, [("x2", 5)]),  # r2 is tighter than r1
        (6, [("x1", 6)]),
    ],
)
def test_kueue_best_fit_picks_the_tightest_domain(
    pods: int, expected: list[tuple[str, int]]
) -> None:
    tree = tree_of(RACKS)
    assert placed(tree, kueue_best_fit(tree, pods, RACK, None)) == expected


def test_kueue_most_free_capacity_takes_the_largest_domain() -> None:
    tree = tree_of(RACKS)
    result = kueue_best_fit(tree, 4, RACK, None, profile="most_free_capacity")
    assert placed(tree, result) == [("x1", 4)]


def test_kueue_required_level_that_cannot_be_met_says_why() -> None:
    tree = tree_of(RACKS)
    reason = kueue_best_fit(tree, 9, RACK, None)
    assert reason == (
        'topology allows to fit only 8 out of 9 pod(s) in one domain of level "example.com/rack"'
        " (largest: b1/r1)"
    )
    # one level up it fits: r1 whole, then the tightest rack for the last pod (r3, not r2)
    assert placed(tree, kueue_best_fit(tree, 9, BLOCK, None)) == [("x1", 8), ("x3", 1)]


def test_kueue_required_block_descends_through_pooled_racks() -> None:
    """In b1, racks 8,5,4 for 11 pods: r1 whole, then the tightest rack for 3 (r3), then the
    nodes of the chosen racks pooled: x1 8, then a node of 2 for 3 remaining and one more."""
    tree = tree_of(RACKS)
    assert placed(tree, kueue_best_fit(tree, 11, BLOCK, None)) == [
        ("x1", 8),
        ("x3", 2),
        ("x4", 1),
    ]


#            b1                 b2
#      r1          r2           r3
#   x1    x2       x5           x9
#    2     2        3            1
FALLBACK = [
    ("x1", "b1", "r1", 2),
    ("x2", "b1", "r1", 2),
    ("x5", "b1", "r2", 3),
    ("x9", "b2", "r3", 1),
]


def test_kueue_preferred_level_falls_back_upward() -> None:
    """No rack holds 6: one level up, b1 does. Below it Kueue pools the racks' nodes for the
    whole gang: x5 3, x1 2, then the tightest node for the last pod (x2, by value order)."""
    tree = tree_of(FALLBACK)
    result = kueue_best_fit(tree, 6, None, RACK)
    assert placed(tree, result) == [("x1", 2), ("x2", 1), ("x5", 3)]
    assert isinstance(result, NodeCounts)
    assert "example.com/block" in result.note
    # at the top level, when no block holds the gang either, as many blocks as needed
    assert placed(tree, kueue_best_fit(tree, 8, None, RACK)) == [
        ("x1", 2),
        ("x2", 2),
        ("x5", 3),
        ("x9", 1),
    ]
    assert kueue_best_fit(tree, 9, None, RACK) == "topology allows to fit only 8 out of 9 pod(s)"


def test_kueue_never_uses_nodes_without_slots_or_labels() -> None:
    #        b1
    #        r1
    #   x1  x2  x3  x4(no rack label)
    #    0   2   1   9
    tree = tree_of(
        [("x1", "b1", "r1", 0), ("x2", "b1", "r1", 2), ("x3", "b1", "r1", 1), ("x4", "b1", None, 9)]
    )
    for profile in ("mixed", "best_fit", "least_free_capacity", "most_free_capacity"):
        assert placed(tree, kueue_best_fit(tree, 3, None, None, profile=profile)) == [
            ("x2", 2),
            ("x3", 1),
        ]
    assert kueue_best_fit(tree, 4, BLOCK, None) == (
        'topology allows to fit only 3 out of 4 pod(s) in one domain of level "example.com/block"'
        " (largest: b1)"
    )
    assert kueue_best_fit(tree, 1, HOST, None) == placed_or_single(tree, "x3")


def placed_or_single(tree: DomainTree, name: str) -> NodeCounts:
    return NodeCounts(
        (tree.topology.node_index(name),), (1,), "kueue BestFit (required): placed at single node"
    )


def test_kueue_rank_order_follows_label_values() -> None:
    """Kueue lists the chosen nodes by (block, rack, hostname), whatever order it chose them."""
    #      b2        b1
    #      r1        r1
    #   z9   a1      m5
    #    4    1       4
    tree = tree_of([("z9", "b2", "r1", 4), ("a1", "b2", "r1", 1), ("m5", "b1", "r1", 4)])
    assert placed(tree, kueue_best_fit(tree, 9, None, BLOCK)) == [
        ("m5", 4),
        ("a1", 1),
        ("z9", 4),
    ]


# --- KAI ---------------------------------------------------------------------------------------


def test_kai_required_rack_picks_the_fullest_rack_that_fits_in_tree_order() -> None:
    """KAI sorts each domain's children fullest first (job GPUs over free GPUs, descending) and
    lists a level in that tree order: b2 (4 free) before b1 (17), so b2's r4 comes first, then
    b1's r3 (4), r2 (5), r1 (8). The first rack in that order that holds the job wins."""
    tree = tree_of(RACKS)
    assert placed(tree, kai_topology(tree, 4, RACK, None)) == [("x5", 4)]
    assert placed(tree, kai_topology(tree, 5, RACK, None)) == [("x2", 5)]
    assert placed(tree, kai_topology(tree, 6, RACK, None)) == [("x1", 6)]


def test_kai_binpacks_nodes_inside_the_domain() -> None:
    """Inside the chosen rack the node with the fewest free GPUs fills first."""
    #             b1
    #             r1
    #   x1 (8 free, 8 slots)  x2 (3 free, 3 slots)  x3 (5 free, 2 slots: short of CPU)
    tree = tree_of(
        [("x1", "b1", "r1", 8), ("x2", "b1", "r1", 3), ("x3", "b1", "r1", 2)], free=[8, 3, 5]
    )
    assert placed(tree, kai_topology(tree, 6, RACK, None)) == [("x2", 3), ("x3", 2), ("x1", 1)]


def test_kai_required_level_that_cannot_be_met_says_why() -> None:
    tree = tree_of(RACKS)
    reason = kai_topology(tree, 9, RACK, None)
    assert isinstance(reason, str)
    assert "requirement example.com/rack couldn't be satisfied" in reason
    assert "node-group b1.r1 can allocate only 8 of 9 required pods" in reason
    assert "not enough resources in the cluster" in str(kai_topology(tree, 22, RACK, None))


def test_kai_preferred_level_falls_back_upward_and_prefers_the_last_sorted_rack() -> None:
    """No rack holds 6; block b1 does. KAI's node score for the preferred level grows with the
    rack's position in the sorted tree: b2 (1 free) sorts before b1 (7 free); inside b1, r2
    (3 free) before r1 (4 free). So r1 scores 10, r2 6, r3 3: r1's nodes fill first."""
    tree = tree_of(FALLBACK)
    result = kai_topology(tree, 6, None, RACK)
    assert placed(tree, result) == [("x1", 2), ("x2", 2), ("x5", 2)]
    assert isinstance(result, NodeCounts)
    assert 'example.com/block "b1"' in result.note
    # nothing below the root holds 8: the whole cluster, still by rack score
    assert placed(tree, kai_topology(tree, 8, None, RACK)) == [
        ("x1", 2),
        ("x2", 2),
        ("x5", 3),
        ("x9", 1),
    ]


def test_kai_without_constraints_binpacks_the_whole_cluster() -> None:
    tree = tree_of([*FALLBACK, ("x0", None, None, 1)])
    assert placed(tree, kai_topology(tree, 3, None, None)) == [("x0", 1), ("x9", 1), ("x1", 1)]


def test_kai_preferred_above_required_is_rejected() -> None:
    tree = tree_of(RACKS)
    reason = kai_topology(tree, 2, RACK, BLOCK)
    assert isinstance(reason, str) and reason.startswith("topology constraint error")


def test_kai_never_uses_nodes_without_slots_or_labels() -> None:
    #        b1
    #        r1
    #   x1  x2  x3  x4(no rack label)
    #    0   2   1   9
    tree = tree_of(
        [
            ("x1", "b1", "r1", 0),
            ("x2", "b1", "r1", 2),
            ("x3", "b1", "r1", 1),
            ("x4", "b1", None, 9),
        ],
        free=[0, 2, 1, 9],
    )
    assert placed(tree, kai_topology(tree, 3, RACK, None)) == [("x3", 1), ("x2", 2)]
    assert isinstance(kai_topology(tree, 4, RACK, None), str)
    # without a constraint KAI ignores the topology, labels or not
    assert placed(tree, kai_topology(tree, 4, None, None)) == [("x3", 1), ("x2", 2), ("x4", 1)]


def test_kai_starts_from_the_nodes_common_domain() -> None:
    """KAI's quirk, kept: when every node shares a rack, KAI sizes only that rack's subtree, so
    a job that requires a block finds none; with a preferred level it does."""
    tree = tree_of([("x1", "b1", "r1", 2), ("x2", "b1", "r1", 2)])
    reason = kai_topology(tree, 3, BLOCK, None)
    assert isinstance(reason, str) and 'example.com/rack "b1.r1"' in reason
    assert placed(tree, kai_topology(tree, 3, BLOCK, RACK)) == [("x1", 2), ("x2", 1)]
    assert placed(tree, kai_topology(tree, 3, RACK, None)) == [("x1", 2), ("x2", 1)]


# --- both --------------------------------------------------------------------------------------

PROFILES: tuple[KueueProfile, ...] = (
    "mixed",
    "best_fit",
    "least_free_capacity",
    "most_free_capacity",
)


def random_tree(rng: np.random.Generator) -> DomainTree:
    nodes: list[tuple[str, str | None, str | None, int]] = []
    for i in range(int(rng.integers(1, 40))):
        block = None if rng.random() < 0.05 else f"b{rng.integers(0, 3)}"
        rack = None if rng.random() < 0.05 else f"r{rng.integers(0, 3)}"
        nodes.append((f"n{i:02d}", block, rack, int(rng.choice([0, 1, 2, 3, 4, 8]))))
    free = [s * 2 + int(rng.integers(0, 3)) for *_, s in nodes]
    return tree_of(nodes, free=free)


@pytest.mark.parametrize("seed", range(40))
def test_counts_sum_to_the_gang_and_never_exceed_slots(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tree = random_tree(rng)
    unlabelled = set(tree.topology.unlabelled_nodes)
    labelled_max = max((int(s) for n, s in enumerate(tree.slots) if n not in unlabelled), default=0)
    for _ in range(10):
        pods = int(rng.integers(1, int(tree.slots.sum()) + 3))
        level = int(rng.integers(0, HOST + 1))
        required, preferred = [(level, None), (None, level), (None, None), (level, level)][
            int(rng.integers(0, 4))
        ]
        results: list[NodeCounts | str] = [
            kueue_best_fit(tree, pods, required, preferred, profile=p) for p in PROFILES
        ]
        results.append(kai_topology(tree, pods, required, preferred, gpus_per_pod=2))
        for result in results:
            if isinstance(result, str):
                continue
            assert result.total == pods
            assert len(set(result.nodes)) == len(result.nodes)
            assert all(c > 0 for c in result.pods)
            assert all(c <= tree.slots[n] for n, c in zip(result.nodes, result.pods, strict=True))
            if required is not None or preferred is not None:
                assert not unlabelled & set(result.nodes)
            if required is not None and required < HOST:
                assert len({int(tree.topology.domain[required, n]) for n in result.nodes}) == 1
            if required == HOST:
                assert len(result.nodes) == 1
        # a gang that fits some required domain is placed by both
        if required is not None and pods <= labelled_max:
            assert not isinstance(results[0], str)
            assert not isinstance(results[-1], str)


def test_a_large_tree_places_quickly_enough_to_vectorise() -> None:
    """10,000 nodes in 20 blocks of 25 racks: both answer (the benchmark measures the time)."""
    rng = np.random.default_rng(7)
    nodes = [
        (f"node-{i:05d}", f"b{i // 500}", f"r{(i // 20) % 25}", int(rng.integers(0, 9)))
        for i in range(10_000)
    ]
    tree = tree_of(nodes)
    for required, preferred in ((RACK, None), (None, RACK), (None, None)):
        result = kueue_best_fit(tree, 300, required, preferred)
        assert isinstance(result, NodeCounts | str)
        result = kai_topology(tree, 300, required, preferred)
        assert isinstance(result, NodeCounts | str)
