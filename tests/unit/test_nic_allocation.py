"""NICs as schedulable resources: the model, the snapshot's NIC arrays, the filter, the joint
GPU + NIC choice and the scheduling cycle's placements."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from tests.unit.builders import cpu_node, gpu_node
from voltpack.model import Node, Pod, PodGroup
from voltpack.model.errors import InvalidRequestError
from voltpack.model.host_layout import HostLayout, HostNic, NicDistance
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.policies.registry import make_strategy
from voltpack.scheduler.filter import explain_rejection, filter_nodes, nic_reason
from voltpack.scheduler.nic_allocation import choose_gpus_and_nic, set_distance
from voltpack.scheduler.placement import Scheduler


def layout_8gpu() -> HostLayout:
    """8 GPUs on two NUMA nodes; NIC a on GPUs 0,1's switch, NIC b on GPUs 4,5's; eth0."""
    return HostLayout(
        gpu_count=8,
        numa_of_gpu=(0, 0, 0, 0, 1, 1, 1, 1),
        nics=(
            HostNic(
                name="a",
                nic_class="roce",
                line_rate_gbit_s=200,
                numa_node=0,
                pcie_gpus=(0, 1),
            ),
            HostNic(
                name="b",
                nic_class="roce",
                line_rate_gbit_s=200,
                numa_node=1,
                pcie_gpus=(4, 5),
            ),
            HostNic(name="eth0", nic_class="ethernet", line_rate_gbit_s=25, numa_node=0),
        ),
    )


def nic_node(
    name: str, *, nic_free: tuple[int, ...] = (), gpu_free: list[int] | None = None
) -> Node:
    """An 8-GPU node with `layout_8gpu`."""
    base = gpu_node(name, 8, gpu_free=gpu_free, cpu=64_000, memory=262_144)
    return Node.model_validate(
        {**base.model_dump(), "layout": layout_8gpu(), "nic_free_pct": nic_free}
    )


def rdma_pod(name: str = "p", share: int = 25, gpus: int = 1, cpu: int = 1000) -> Pod:
    """A pod asking for `gpus` whole GPUs and `share` percent of one RDMA NIC."""
    return Pod(
        name=name,
        cpu_milli=cpu,
        memory_mib=1024,
        num_gpu=gpus,
        gpu_milli=1000 if gpus else 0,
        rdma_percent=share,
    )


def scheduler_for(snapshot: ClusterSnapshot, strategy: str = "best-fit") -> Scheduler:
    """A scheduler whose ties go to the lowest node index."""
    return Scheduler(make_strategy(strategy), tie_break_rank=np.arange(snapshot.node_count))


# --- model ----------------------------------------------------------------------------------


@pytest.mark.parametrize("share", [-1, 101, 250])
def test_rdma_percent_outside_0_to_100_is_refused_naming_the_field(share: int) -> None:
    with pytest.raises(ValidationError) as caught:
        Pod(name="p", cpu_milli=0, memory_mib=0, rdma_percent=share)
    error = caught.value.errors()[0]
    assert error["loc"] == ("rdma_percent",)
    assert "rdma_percent" in error["msg"] and "pod p" in error["msg"]


def test_pods_ask_for_no_nic_by_default() -> None:
    assert Pod(name="p", cpu_milli=0, memory_mib=0).rdma_percent == 0


def test_node_nic_free_must_match_the_layout() -> None:
    with pytest.raises(ValidationError, match="nic_free_pct has 2 entries for 3 NICs"):
        nic_node("n", nic_free=(100, 100))
    with pytest.raises(ValidationError, match=r"outside 0\.\.100"):
        nic_node("n", nic_free=(100, 101, 0))
    with pytest.raises(ValidationError, match="nic_free_pct has 1 entries for 0 NICs"):
        Node.model_validate({**cpu_node("c").model_dump(), "nic_free_pct": (50,)})


def test_node_layout_must_have_the_node_s_gpu_count() -> None:
    with pytest.raises(ValidationError, match=r"layout\.gpu_count=8 but the node has 4 GPUs"):
        Node.model_validate({**gpu_node("n", 4).model_dump(), "layout": layout_8gpu()})


def test_a_node_without_nic_free_has_every_nic_free() -> None:
    assert nic_node("n").nic_free == (100, 100, 100)
    assert cpu_node("c").nic_free == ()


# --- snapshot -------------------------------------------------------------------------------


def test_snapshot_has_nic_slots_per_node() -> None:
    snapshot = ClusterSnapshot.from_nodes([nic_node("n", nic_free=(40, 100, 100)), cpu_node("c")])
    assert snapshot.nic_present.tolist() == [[True, True, True], [False, False, False]]
    assert snapshot.nic_rdma.tolist() == [[True, True, False], [False, False, False]]
    assert snapshot.nic_free_pct.tolist() == [[40, 100, 100], [0, 0, 0]]
    assert snapshot.layouts[1] is None
    assert snapshot.nic_names(0, [1, 0]) == ("b", "a")


def test_allocate_and_release_take_and_return_the_nic_share() -> None:
    snapshot = ClusterSnapshot.from_nodes([nic_node("n")])
    pod = rdma_pod(share=30)
    snapshot.allocate(0, pod, [0], [1])
    assert snapshot.nic_free_pct[0].tolist() == [100, 70, 100]
    snapshot.release(0, pod, [0], [1])
    assert snapshot.nic_free_pct[0].tolist() == [100, 100, 100]


def test_allocate_refuses_to_over_allocate_a_nic() -> None:
    snapshot = ClusterSnapshot.from_nodes([nic_node("n", nic_free=(20, 100, 100))])
    with pytest.raises(InvalidRequestError, match="rdma_percent=25"):
        snapshot.allocate(0, rdma_pod(share=25), [0], [0])
    assert snapshot.nic_free_pct[0].tolist() == [20, 100, 100]
    assert snapshot.gpu_free_milli[0, 0] == 1000


@pytest.mark.parametrize(
    ("pod", "nics", "words"),
    [
        (rdma_pod(share=25), [], "needs 1 NIC"),
        (rdma_pod(share=25), [0, 1], "needs 1 NIC"),
        (rdma_pod(share=0), [0], "needs 0 NIC"),
        (rdma_pod(share=25), [2], "NIC slot 2 is no RDMA NIC"),
        (rdma_pod(share=25), [7], "NIC slot 7 is no RDMA NIC"),
    ],
)
def test_allocate_refuses_unsuitable_nics(pod: Pod, nics: list[int], words: str) -> None:
    snapshot = ClusterSnapshot.from_nodes([nic_node("n")])
    with pytest.raises(InvalidRequestError, match=words):
        snapshot.allocate(0, pod, [0], nics)


def test_release_refuses_to_return_more_than_the_nic_holds() -> None:
    snapshot = ClusterSnapshot.from_nodes([nic_node("n")])
    snapshot.allocate(0, rdma_pod("x", share=10), [0], [0])
    with pytest.raises(InvalidRequestError, match="returns more than was allocated"):
        snapshot.release(0, rdma_pod("y", share=20), [0], [0])
    assert snapshot.nic_free_pct[0, 0] == 90


def test_copy_has_its_own_nic_free_and_to_nodes_keeps_it() -> None:
    snapshot = ClusterSnapshot.from_nodes([nic_node("n")])
    copy = snapshot.copy()
    copy.allocate(0, rdma_pod(share=60), [0], [0])
    assert snapshot.nic_free_pct[0, 0] == 100
    node = copy.to_nodes()[0]
    assert node.layout == layout_8gpu()
    assert node.nic_free_pct == (40, 100, 100)
    again = ClusterSnapshot.from_nodes(copy.to_nodes())
    assert again.nic_free_pct.tolist() == copy.nic_free_pct.tolist()


# --- filter ---------------------------------------------------------------------------------


def test_filter_needs_an_rdma_nic_with_the_share_free() -> None:
    nodes = [
        nic_node("full", nic_free=(50, 40, 100)),  # eth0 has room but is no RDMA NIC
        nic_node("roomy", nic_free=(50, 60, 100)),
        gpu_node("bare", 8),
    ]
    snapshot = ClusterSnapshot.from_nodes(nodes)
    result = filter_nodes(snapshot, rdma_pod(share=60))
    assert result.feasible.tolist() == [False, True, False]
    assert result.rejected_by[nic_reason(rdma_pod(share=60))] == 2


def test_rejection_reason_names_the_missing_nic_bandwidth() -> None:
    snapshot = ClusterSnapshot.from_nodes([nic_node("n", nic_free=(50, 40, 100))])
    pod = rdma_pod(share=60)
    reason = explain_rejection(snapshot, pod, filter_nodes(snapshot, pod))
    assert "1 node(s) didn't have an RDMA NIC with 60% of its bandwidth free" in reason
    assert "60% of one RDMA NIC" in reason


def test_pods_without_rdma_share_are_not_filtered_on_nics() -> None:
    snapshot = ClusterSnapshot.from_nodes([gpu_node("bare", 8)])
    result = filter_nodes(snapshot, rdma_pod(share=0))
    assert not result.rejected_by
    assert result.feasible.tolist() == [True]


# --- joint choice ---------------------------------------------------------------------------


def test_nic_on_the_gpus_pcie_switch_wins() -> None:
    choice = choose_gpus_and_nic(layout_8gpu(), rdma_pod(), [4], [1000] * 8, [100, 100, 100])
    assert (choice.gpus, choice.nic, choice.distance) == ((4,), 1, NicDistance.SAME_PCIE_SWITCH)
    assert not choice.moved_gpus


def test_same_numa_beats_same_host() -> None:
    layout = layout_8gpu()
    choice = choose_gpus_and_nic(layout, rdma_pod(), [2], [0, 0, 1000, 0, 0, 0, 0, 0], [100] * 3)
    assert (choice.nic, choice.distance) == (0, NicDistance.SAME_NUMA)
    assert set_distance(layout, [2], 1) == NicDistance.SAME_HOST


def test_best_fit_among_nics_of_the_same_tier() -> None:
    # GPU 3 (NUMA 0, no NIC on its switch) and GPU 7 (NUMA 1): a pair spanning both sockets,
    # both NICs are only across the host; the fuller NIC is taken.
    layout = layout_8gpu()
    free = [0, 0, 0, 1000, 0, 0, 0, 1000]
    pod = rdma_pod(share=30, gpus=2)
    choice = choose_gpus_and_nic(layout, pod, [3, 7], free, [90, 40, 100])
    assert (choice.gpus, choice.nic, choice.distance) == ((3, 7), 1, NicDistance.SAME_HOST)


def test_gpus_move_to_reach_a_nearer_nic_with_room() -> None:
    # The strategy picks GPU 0, whose switch NIC a is full; GPU 4 sits under NIC b.
    free = [1000, 0, 0, 0, 1000, 0, 0, 0]
    choice = choose_gpus_and_nic(layout_8gpu(), rdma_pod(share=50), [0], free, [20, 100, 100])
    assert (choice.gpus, choice.nic, choice.distance) == ((4,), 1, NicDistance.SAME_PCIE_SWITCH)
    assert choice.moved_gpus
    assert "GPUs moved" in choice.describe(layout_8gpu(), 50)


def test_gpus_stay_when_no_other_gpus_are_nearer() -> None:
    free = [1000, 0, 0, 1000, 0, 0, 0, 0]
    choice = choose_gpus_and_nic(layout_8gpu(), rdma_pod(share=50), [0], free, [20, 100, 100])
    # NIC a is full; GPU 3 is no nearer to NIC b than GPU 0, so the strategy's GPU stays.
    assert (choice.gpus, choice.nic, choice.distance) == ((0,), 1, NicDistance.SAME_HOST)
    assert not choice.moved_gpus


def test_cpu_only_pod_takes_the_best_fitting_rdma_nic() -> None:
    pod = rdma_pod(share=30, gpus=0)
    choice = choose_gpus_and_nic(layout_8gpu(), pod, [], [1000] * 8, [60, 35, 100])
    assert (choice.gpus, choice.nic, choice.distance) == ((), 1, None)  # 5% left beats 30%


def test_no_rdma_nic_with_room_is_an_error() -> None:
    with pytest.raises(InvalidRequestError, match="no RDMA NIC has 50%"):
        choose_gpus_and_nic(layout_8gpu(), rdma_pod(share=50), [0], [1000] * 8, [40, 40, 100])


def test_pod_without_share_keeps_the_strategy_s_gpus_and_gets_no_nic() -> None:
    choice = choose_gpus_and_nic(layout_8gpu(), rdma_pod(share=0), [6], [1000] * 8, [0, 0, 0])
    assert (choice.gpus, choice.nic) == ((6,), None)


# --- the scheduling cycle -------------------------------------------------------------------


def test_placement_records_the_nic_and_the_reason_names_it() -> None:
    snapshot = ClusterSnapshot.from_nodes([nic_node("n")])
    decision = scheduler_for(snapshot).schedule_pod(
        snapshot, rdma_pod(share=25), np.random.default_rng(0)
    )
    placement = decision.placements[0]
    assert placement.gpu_indices == (0,)
    assert placement.nics == ("a",)
    assert placement.rdma_percent == 25
    assert "NIC a (25%, same pcie switch)" in decision.reason
    assert snapshot.nic_free_pct[0].tolist() == [75, 100, 100]


def test_cycle_moves_the_gpu_when_its_switch_nic_is_full() -> None:
    snapshot = ClusterSnapshot.from_nodes([nic_node("n", nic_free=(10, 100, 100))])
    decision = scheduler_for(snapshot).schedule_pod(
        snapshot, rdma_pod(share=25), np.random.default_rng(0)
    )
    assert decision.placements[0].gpu_indices == (4,)
    assert decision.placements[0].nics == ("b",)


def test_rolled_back_gang_gives_the_nic_shares_back() -> None:
    snapshot = ClusterSnapshot.from_nodes([nic_node("n")])
    before = snapshot.nic_free_pct.copy()
    pods = tuple(rdma_pod(f"w{i}", share=60) for i in range(3))  # only two NICs of 100%
    decision = scheduler_for(snapshot).schedule_group(
        snapshot, PodGroup(name="g", pods=pods, min_member=3), np.random.default_rng(0)
    )
    assert not decision.placed
    assert snapshot.nic_free_pct.tolist() == before.tolist()
    assert "didn't have an RDMA NIC with 60%" in decision.reason


def test_allowed_mask_excludes_nodes_and_says_so() -> None:
    snapshot = ClusterSnapshot.from_nodes([nic_node("a"), nic_node("b")])
    scheduler = scheduler_for(snapshot)
    rng = np.random.default_rng(0)
    only_b = np.array([False, True])
    assert (
        scheduler.schedule_pod(snapshot, rdma_pod("x"), rng, allowed=only_b).placements[0].node
        == "b"
    )
    decision = scheduler.schedule_pod(snapshot, rdma_pod("y"), rng, allowed=np.zeros(2, bool))
    assert not decision.placed
    assert "2 node(s) were excluded by a placement constraint" in decision.reason


@pytest.mark.parametrize("strategy", ["best-fit", "fgd", "random", "gpu-packing"])
def test_pods_without_share_are_placed_as_if_nodes_had_no_nics(strategy: str) -> None:
    plain = [gpu_node(f"n{i}", 8, cpu=64_000, memory=262_144) for i in range(3)]
    with_nics = [Node.model_validate({**n.model_dump(), "layout": layout_8gpu()}) for n in plain]
    pods = [
        Pod(name=f"p{i}", cpu_milli=2000, memory_mib=1024, num_gpu=g, gpu_milli=m)
        for i, (g, m) in enumerate([(1, 1000), (1, 300), (2, 1000), (0, 0), (1, 700)] * 4)
    ]
    decisions = []
    for nodes in (plain, with_nics):
        snapshot = ClusterSnapshot.from_nodes(nodes)
        scheduler = Scheduler.with_random_ranks(
            make_strategy(strategy), snapshot.node_count, np.random.default_rng(7)
        )
        if strategy == "fgd":
            scheduler.strategy.prime(pods)
        rng = np.random.default_rng(11)
        decisions.append([scheduler.schedule_pod(snapshot, p, rng) for p in pods])
    assert decisions[0] == decisions[1]
