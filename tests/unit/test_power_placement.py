"""Power-aware placement: the power filter, the headroom preference, and gang rollback."""

from __future__ import annotations

import numpy as np

from voltpack.model.cluster import Node
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.workload import Pod, PodGroup
from voltpack.policies.registry import make_strategy
from voltpack.power.domains import PowerDomain, PowerDomainTree
from voltpack.power.placement import gpu_added_w, power_headroom
from voltpack.scheduler.placement import Scheduler

A100 = "A100-80GB"


def snapshot(tight_peak_w: float) -> ClusterSnapshot:
    nodes = [Node.empty(f"n{i}", 64_000, 512_000, 8, A100) for i in range(4)]
    snap = ClusterSnapshot.from_nodes(nodes)
    tree = PowerDomainTree(
        [
            PowerDomain("rack-tight", 10_000, frozenset({"n0", "n1"})),
            PowerDomain("rack-roomy", 10_000, frozenset({"n2", "n3"})),
        ]
    )
    snap.power = power_headroom(
        tree, {"rack-tight": tight_peak_w, "rack-roomy": 4_000}, snap.node_names, [A100] * 4
    )
    return snap


def pod(name: str, gpus: int, priority: int = 0) -> Pod:
    return Pod(name=name, cpu_milli=1000, memory_mib=1000, num_gpu=gpus, gpu_milli=1000,
               priority=priority)  # fmt: skip


def scheduler(snap: ClusterSnapshot) -> Scheduler:
    # best-fit packs: without power it would fill n0 first (lowest rank)
    return Scheduler(make_strategy("best-fit"), np.arange(snap.node_count))


def test_a_placement_never_pushes_a_domain_over_its_budget() -> None:
    snap = snapshot(tight_peak_w=9_000)  # 1 kW left: fewer than 3 busy A100s
    per_gpu = gpu_added_w(A100)
    assert 300 < per_gpu < 450
    decision = scheduler(snap).schedule_pod(snap, pod("big", 8), np.random.default_rng(0))
    assert decision.placed and decision.placements[0].node in {"n2", "n3"}
    for i in range(3):
        scheduler(snap).schedule_pod(snap, pod(f"p{i}", 8), np.random.default_rng(0))
    last = scheduler(snap).schedule_pod(snap, pod("late", 8), np.random.default_rng(0))
    assert not last.placed
    assert "power domain" in last.reason


def test_high_priority_prefers_nodes_with_power_headroom() -> None:
    snap = snapshot(tight_peak_w=8_900)  # 1.1 kW left: feasible but under the 10 % preference
    low = scheduler(snap).schedule_pod(snap, pod("low", 1), np.random.default_rng(0))
    assert low.placements[0].node == "n0"
    high = scheduler(snap).schedule_pod(snap, pod("high", 1, 2000), np.random.default_rng(0))
    assert high.placements[0].node in {"n2", "n3"}
    assert "power headroom" in high.reason


def test_a_gang_that_does_not_fit_gives_its_power_back() -> None:
    snap = snapshot(tight_peak_w=9_500)
    before = snap.power.headroom_w.copy() if snap.power else None
    gang = PodGroup(name="g", pods=tuple(pod(f"g{i}", 8) for i in range(5)), min_member=5)
    decision = scheduler(snap).schedule_group(snap, gang, np.random.default_rng(0))
    assert not decision.placed
    assert snap.power is not None and np.allclose(snap.power.headroom_w, before)
