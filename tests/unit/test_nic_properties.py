"""Properties of joint GPU + NIC allocation on random host layouts and workloads.

(a) NIC bandwidth is never over-allocated: after every decision each NIC's free percent is
    100 minus the shares of the pods placed on it, never below 0, and only RDMA NICs carry
    shares; a rolled-back gang leaves every NIC as it was;
(b) a pod gets a NIC on its GPUs' PCIe switch whenever one NIC with room has enough fitting
    GPUs on its switch; and whatever the choice, its GPUs fit and its NIC has room.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.model import Node, Pod, PodGroup
from voltpack.model.host_layout import HostLayout, HostNic, NicDistance
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.policies.registry import make_strategy
from voltpack.scheduler.nic_allocation import choose_gpus_and_nic
from voltpack.scheduler.placement import Scheduler

FAST = settings(max_examples=60, deadline=None)
STRATEGIES = ("best-fit", "random", "gpu-packing", "least-allocated")


@st.composite
def layouts(draw: st.DrawFn) -> HostLayout:
    """0-8 GPUs on up to two NUMA nodes, 0-4 NICs of any class on random PCIe switches."""
    gpus = draw(st.integers(0, 8))
    numa = tuple(draw(st.sampled_from([0, 1])) for _ in range(gpus)) if gpus else ()
    nics = []
    for i in range(draw(st.integers(0, 4))):
        behind = draw(st.sets(st.integers(0, gpus - 1), max_size=gpus)) if gpus else set()
        nics.append(
            HostNic(
                name=f"nic{i}",
                nic_class=draw(st.sampled_from(["infiniband", "roce", "ethernet"])),
                line_rate_gbit_s=200,
                numa_node=draw(st.sampled_from([None, 0, 1])),
                pcie_gpus=tuple(sorted(behind)),
            )
        )
    return HostLayout(gpu_count=gpus, numa_of_gpu=numa, nics=tuple(nics))


@st.composite
def clusters(draw: st.DrawFn) -> list[Node]:
    """1-4 nodes with random layouts (some without one)."""
    nodes = []
    for i in range(draw(st.integers(1, 4))):
        layout = draw(st.one_of(st.none(), layouts()))
        gpus = layout.gpu_count if layout is not None else draw(st.integers(0, 8))
        nodes.append(
            Node.empty(
                name=f"n{i}",
                cpu_milli=draw(st.integers(1, 16)) * 4000,
                memory_mib=65_536,
                gpu_count=gpus,
                gpu_model="G" if gpus else None,
                layout=layout,
            )
        )
    return nodes


@st.composite
def pods(draw: st.DrawFn, name: str) -> Pod:
    """A CPU-only pod, a GPU share or 1-2 whole GPUs, with 0-100% of one RDMA NIC."""
    kind = draw(st.sampled_from(["cpu", "share", "whole"]))
    num_gpu, milli = {"cpu": (0, 0), "share": (1, 500), "whole": (draw(st.integers(1, 2)), 1000)}[
        kind
    ]
    return Pod(
        name=name,
        cpu_milli=draw(st.integers(0, 8)) * 1000,
        memory_mib=1024,
        num_gpu=num_gpu,
        gpu_milli=milli,
        rdma_percent=draw(st.sampled_from([0, 1, 10, 25, 50, 51, 75, 100])),
    )


def shares_by_nic(
    snapshot: ClusterSnapshot, placed: list[tuple[Pod, str, str]]
) -> Counter[tuple[int, int]]:
    """Sum of the placed pods' shares per (node, NIC slot)."""
    taken: Counter[tuple[int, int]] = Counter()
    for pod, node_name, nic_name in placed:
        node = snapshot.node_index(node_name)
        layout = snapshot.layouts[node]
        assert layout is not None
        slot = [nic.name for nic in layout.nics].index(nic_name)
        assert layout.nics[slot].is_rdma
        taken[(node, slot)] += pod.rdma_percent
    return taken


def assert_nic_accounting(snapshot: ClusterSnapshot, placed: list[tuple[Pod, str, str]]) -> None:
    """Free percent = 100 - shares placed, for every present NIC; never negative."""
    taken = shares_by_nic(snapshot, placed)
    assert (snapshot.nic_free_pct >= 0).all()
    for node in range(snapshot.node_count):
        for slot in np.flatnonzero(snapshot.nic_present[node]):
            assert snapshot.nic_free_pct[node, slot] == 100 - taken[(node, int(slot))]


@FAST
@given(
    clusters(),
    st.lists(st.integers(0, 10**6), min_size=1, max_size=25),
    st.sampled_from(STRATEGIES),
    st.data(),
)
def test_nic_bandwidth_is_never_over_allocated(
    nodes: list[Node], seeds: list[int], strategy: str, data: st.DataObject
) -> None:
    snapshot = ClusterSnapshot.from_nodes(nodes)
    scheduler = Scheduler.with_random_ranks(
        make_strategy(strategy), snapshot.node_count, np.random.default_rng(seeds[0])
    )
    rng = np.random.default_rng(seeds[-1])
    placed: list[tuple[Pod, str, str]] = []
    for i in range(len(seeds)):
        pod = data.draw(pods(f"p{i}"))
        decision = scheduler.schedule_pod(snapshot, pod, rng)
        if decision.placed:
            placement = decision.placements[0]
            assert len(placement.nics) == (1 if pod.rdma_percent else 0)
            assert placement.rdma_percent == pod.rdma_percent
            if placement.nics:
                placed.append((pod, placement.node, placement.nics[0]))
        elif pod.rdma_percent:
            # Refused only when no node has the CPU, memory, GPUs and an RDMA NIC with room.
            fits_nic = (
                snapshot.nic_present
                & snapshot.nic_rdma
                & (snapshot.nic_free_pct >= pod.rdma_percent)
            ).any(axis=1)
            fits_gpu = (snapshot.gpu_present & (snapshot.gpu_free_milli >= pod.gpu_milli)).sum(
                axis=1
            ) >= pod.num_gpu
            fits_cpu = snapshot.cpu_free_milli >= pod.cpu_milli
            assert not (fits_nic & fits_gpu & fits_cpu).any()
        assert_nic_accounting(snapshot, placed)


@FAST
@given(clusters(), st.integers(1, 4), st.sampled_from([30, 60, 100]), st.integers(0, 2**32 - 1))
def test_a_rolled_back_gang_leaves_every_nic_as_it_was(
    nodes: list[Node], size: int, share: int, seed: int
) -> None:
    snapshot = ClusterSnapshot.from_nodes(nodes)
    before = snapshot.nic_free_pct.copy()
    gang = PodGroup(
        name="g",
        pods=tuple(
            Pod(
                name=f"w{i}",
                cpu_milli=0,
                memory_mib=0,
                num_gpu=1,
                gpu_milli=1000,
                rdma_percent=share,
            )
            for i in range(size)
        ),
        min_member=size,
    )
    scheduler = Scheduler.with_random_ranks(
        make_strategy("best-fit"), snapshot.node_count, np.random.default_rng(seed)
    )
    decision = scheduler.schedule_group(snapshot, gang, np.random.default_rng(seed))
    if not decision.placed:
        assert snapshot.nic_free_pct.tolist() == before.tolist()
    else:
        assert (snapshot.nic_free_pct >= 0).all()
        assert int((before - snapshot.nic_free_pct).sum()) == share * size


@FAST
@given(layouts(), st.data())
def test_a_nic_on_the_gpus_pcie_switch_is_taken_whenever_one_has_room(
    layout: HostLayout, data: st.DataObject
) -> None:
    gpus = layout.gpu_count
    gpu_free = [data.draw(st.sampled_from([0, 300, 1000])) for _ in range(gpus)]
    nic_free = [data.draw(st.integers(0, 100)) for _ in layout.nics]
    num_gpu = data.draw(st.integers(0, min(gpus, 2)))
    share = data.draw(st.integers(1, 100))
    pod = Pod(
        name="p",
        cpu_milli=0,
        memory_mib=0,
        num_gpu=num_gpu,
        gpu_milli=1000 if num_gpu else 0,
        rdma_percent=share,
    )
    fitting = [g for g in range(gpus) if gpu_free[g] >= pod.gpu_milli]
    roomy = [s for s, nic in enumerate(layout.nics) if nic.is_rdma and nic_free[s] >= share]
    if len(fitting) < num_gpu or not roomy:
        return  # the filter rejects this node
    preferred = tuple(data.draw(st.permutations(fitting))[:num_gpu])
    choice = choose_gpus_and_nic(layout, pod, preferred, gpu_free, nic_free)
    assert choice.nic in roomy
    assert len(set(choice.gpus)) == num_gpu == len(choice.gpus)
    assert all(gpu_free[g] >= pod.gpu_milli for g in choice.gpus)
    if num_gpu == 0:
        return
    same_switch_possible = any(
        sum(g in layout.nics[s].pcie_gpus for g in fitting) >= num_gpu for s in roomy
    )
    if same_switch_possible:
        assert choice.distance == NicDistance.SAME_PCIE_SWITCH
        assert choice.nic is not None
        assert set(choice.gpus) <= set(layout.nics[choice.nic].pcie_gpus)
    if not choice.moved_gpus:
        assert choice.gpus == preferred
