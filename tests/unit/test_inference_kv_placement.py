"""Where a split inference service's prefill and decode pools go so the KV-cache transfer keeps
the bandwidth the plan counted on: each level's bandwidth from the link model, the level a
plan's KV traffic needs, the plan made with that level's bandwidth, and the scheduler keeping
a pool of pods of different shapes inside one domain."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from voltpack.model.cluster import Node
from voltpack.model.host_layout import HostLayout, HostNic
from voltpack.model.resources import InferenceServiceSpec
from voltpack.model.resources.topology import TopologyLevel, TopologySpec
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.topology import ClusterTopology
from voltpack.model.topology_request import TopologyRequest
from voltpack.model.workload import Pod, PodGroup
from voltpack.operator.inference.kv import (
    ASSUMED_GBYTE_S,
    group_loads,
    plan_with_kv,
    planned_need,
    restored,
)
from voltpack.operator.inference.plans import (
    ClusterProfiles,
    plan_request,
    plannable_types,
    planned_groups,
)
from voltpack.perf.serving_models import default_serving_models
from voltpack.policies.inference.attainment import predicted_attainment
from voltpack.policies.inference.kv_placement import (
    MAX_LINK_LOAD,
    LevelLink,
    PrefillLoad,
    choose_level,
    level_links,
    needed_gbyte_s_per_gpu,
)
from voltpack.policies.inference.mix_planner import KV_LINK_BYTES_PER_S_PER_GPU, plan_service
from voltpack.policies.inference.plan import ServingPlan
from voltpack.policies.topology.placers import StepTimePlacer
from voltpack.scheduler.gang_topology import TopologyPlacement

SPEC = TopologySpec(
    levels=[
        TopologyLevel(node_label="spine", oversubscription=1.0),
        TopologyLevel(node_label="leaf", oversubscription=4.0),
    ]
)


def host(nic_class: str = "infiniband", rate: float = 200.0, nics: int = 4) -> HostLayout:
    return HostLayout(
        gpu_count=8,
        nvlink_domains=((0, 1, 2, 3, 4, 5, 6, 7),),
        nics=tuple(
            HostNic(name=f"nic{i}", nic_class=nic_class, line_rate_gbit_s=rate) for i in range(nics)
        ),
    )


def topology(layout: HostLayout, nodes: int = 4) -> tuple[ClusterTopology, list[str]]:
    """`nodes` nodes, two per leaf, one spine."""
    names = [f"n{i}" for i in range(nodes)]
    labels = {n: {"spine": "s0", "leaf": f"l{i // 2}"} for i, n in enumerate(names)}
    return ClusterTopology.from_labels(
        SPEC, names, labels, hosts=dict.fromkeys(names, layout)
    ), names


def test_level_bandwidth_follows_the_nic_model_and_the_oversubscription_below_it() -> None:
    links = level_links(topology(host())[0])
    # 200 Gb/s = 25 GB/s per NIC, 4 NICs for 8 GPUs, InfiniBand at 0.90 of line rate
    assert [link.label for link in links] == ["spine", "leaf"]
    assert links[1].gbyte_s_per_gpu == pytest.approx(25.0 * 0.5 * 0.90)
    assert links[0].gbyte_s_per_gpu == pytest.approx(25.0 * 0.5 * 0.90 / 4.0)
    ethernet = level_links(topology(host("ethernet"))[0])
    assert ethernet[1].gbyte_s_per_gpu == pytest.approx(25.0 * 0.5 * 0.60)


def test_hosts_without_nics_give_no_bandwidth_to_choose_by() -> None:
    assert level_links(topology(HostLayout(gpu_count=8))[0]) == []


def test_the_widest_level_that_carries_the_traffic_is_chosen() -> None:
    links = [LevelLink("spine", "spine", 2.0), LevelLink("leaf", "leaf", 10.0)]
    assert choose_level(links, 1.5) == links[0]
    assert choose_level(links, 2.5) == links[1]
    assert choose_level(links, 10.5) is None


def test_needed_bandwidth_is_the_busiest_prefill_gpus_kv_bytes_at_half_load() -> None:
    kv_bytes = default_serving_models().get("llama2-70b").kv_bytes_per_token
    loads = [PrefillLoad(2, 2, 4000.0), PrefillLoad(1, 8, 4000.0)]
    expected = 4000.0 * kv_bytes / 4 / MAX_LINK_LOAD / 1e9
    assert needed_gbyte_s_per_gpu(loads, kv_bytes) == pytest.approx(expected)
    assert needed_gbyte_s_per_gpu([], kv_bytes) == 0.0


SERVICE = InferenceServiceSpec.model_validate(
    {
        "model": "llama2-70b",
        "slo": {"ttftMs": 3000, "tpotMs": 100},
        "ratePerSecond": 4,
        "requestSizes": [
            {"promptTokens": 1500, "outputTokens": 100, "share": 0.5},
            {"promptTokens": 3000, "outputTokens": 50, "share": 0.5},
        ],
        "gpuTypes": ["H100"],
        "container": {"image": "x"},
    }
)
SHAPES = {"H100-SXM": 8}


def planner() -> tuple[list[float], Callable[[float], ServingPlan]]:
    asked: list[float] = []
    request = plan_request(SERVICE, 4.0, plannable_types(SERVICE, SHAPES))
    book = ClusterProfiles(SHAPES)

    def plan_at(link_bytes_per_s: float) -> ServingPlan:
        asked.append(link_bytes_per_s)
        return plan_service(replace(request, kv_link_bytes_per_s_per_gpu=link_bytes_per_s), book)

    return asked, plan_at


def test_the_plan_uses_the_bandwidth_of_the_level_its_pool_is_kept_in() -> None:
    # RoCE 2 x 100 Gb/s per 8 GPUs, leaf 8:1: spine 0.33 GB/s, leaf 2.66 GB/s per GPU
    spec = TopologySpec(
        levels=[
            TopologyLevel(node_label="spine", oversubscription=1.0),
            TopologyLevel(node_label="leaf", oversubscription=8.0),
        ]
    )
    names = [f"n{i}" for i in range(4)]
    labels = {n: {"spine": "s0", "leaf": f"l{i // 2}"} for i, n in enumerate(names)}
    layout = host("roce", 100.0, 2)
    links = level_links(
        ClusterTopology.from_labels(spec, names, labels, hosts=dict.fromkeys(names, layout))
    )
    asked, plan_at = planner()
    plan, kv = plan_with_kv(plan_at, links)
    assert asked == [pytest.approx(links[0].gbyte_s_per_gpu * 1e9), pytest.approx(2.65625e9)]
    assert plan.split and kv.controlled and kv.level == links[1]
    assert kv.planned_gbyte_s_per_gpu == pytest.approx(2.65625)
    # the plan made at the spine's bandwidth costs more (its KV transfer is slower) and its
    # traffic does not fit the spine: the leaf's plan wins
    spine_plan = plan_at(links[0].gbyte_s_per_gpu * 1e9)
    assert spine_plan.cost_per_hour > plan.cost_per_hour
    assert group_loads(spine_plan) > links[0].gbyte_s_per_gpu
    assert kv.needed_gbyte_s_per_gpu <= links[1].gbyte_s_per_gpu
    # the need recomputed from the status's groups (after a restart) is the same
    assert planned_need(SERVICE, planned_groups(plan)) == pytest.approx(kv.needed_gbyte_s_per_gpu)


def test_on_a_tie_the_widest_level_is_kept() -> None:
    links = [LevelLink("spine", "spine", 400.0), LevelLink("leaf", "leaf", 800.0)]
    _, plan_at = planner()
    plan, kv = plan_with_kv(plan_at, links)
    assert plan.split and kv.level == links[0]


def test_without_a_topology_the_plan_assumes_the_default_and_says_it_is_not_controlled() -> None:
    asked, plan_at = planner()
    plan, kv = plan_with_kv(plan_at, None)
    assert asked == [pytest.approx(ASSUMED_GBYTE_S * 1e9)]
    assert plan.split and not kv.controlled and kv.reason == "NoTopology"
    assert "not controlled: the cluster has no Topology" in kv.message
    _, kv_no_nics = plan_with_kv(plan_at, [])
    assert kv_no_nics.reason == "NoNicInformation"


def mixed_pool() -> PodGroup:
    def pod(name: str, gpus: int) -> Pod:
        return Pod(name=name, cpu_milli=1000, memory_mib=1024, num_gpu=gpus, gpu_milli=1000)

    pods = (pod("d-0", 2), pod("p-0", 2), pod("p-1", 2), pod("p8-0", 8))
    return PodGroup(
        name="default/chat-kv",
        pods=pods,
        min_member=4,
        topology=TopologyRequest(required_level="leaf"),
    )


def test_a_pool_of_several_pod_shapes_stays_inside_one_leaf() -> None:
    layout = host()
    topo, names = topology(layout)
    snapshot = ClusterSnapshot.from_nodes(
        [Node.empty(n, 64_000, 512_000, 8, "H100-SXM") for n in names]
    )
    # leaf l0 keeps 10 free GPUs (6 taken on n0): only leaf l1 holds the 14-GPU pool
    snapshot.allocate(
        0, Pod(name="busy", cpu_milli=0, memory_mib=0, num_gpu=6, gpu_milli=1000), range(6)
    )
    placement = TopologyPlacement(topo, StepTimePlacer())
    outcome = placement.place(snapshot, mixed_pool())
    assert outcome.decision.placed, outcome.decision.reason
    nodes = {p.node for p in outcome.decision.placements}
    assert nodes <= {"n2", "n3"}, nodes
    assert "leaf" in outcome.decision.reason and "2 shapes" in outcome.decision.reason
    used = {(p.node, g) for p in outcome.decision.placements for g in p.gpu_indices}
    assert len(used) == 14  # no GPU given twice
    free = (snapshot.gpu_free_milli[2:4] == 1000).sum()
    assert int(free) == 2


def test_a_pool_no_domain_holds_is_left_whole_and_pending_with_the_reason() -> None:
    topo, names = topology(host())
    snapshot = ClusterSnapshot.from_nodes(
        [Node.empty(n, 64_000, 512_000, 8, "H100-SXM") for n in names]
    )
    for node in (0, 2):
        snapshot.allocate(
            node,
            Pod(name=f"busy{node}", cpu_milli=0, memory_mib=0, num_gpu=4, gpu_milli=1000),
            range(4),
        )
    before = snapshot.gpu_free_milli.copy()
    outcome = TopologyPlacement(topo, StepTimePlacer()).place(snapshot, mixed_pool())
    assert not outcome.decision.placed
    assert "no leaf holds all 4 pods (14 GPUs)" in outcome.decision.reason
    assert np.array_equal(snapshot.gpu_free_milli, before)


def test_after_a_restart_the_level_comes_back_from_the_running_replicas() -> None:
    links = [LevelLink("spine", "spine", 400.0), LevelLink("leaf", "leaf", 800.0)]
    _, plan_at = planner()
    groups = planned_groups(plan_at(KV_LINK_BYTES_PER_S_PER_GPU))
    pod = {"metadata": {"annotations": {"voltpack.io/topology-required": "leaf"}}}
    assert restored(SERVICE, groups, links, [pod]).level == links[1]
    # no replica says: the widest level that carries the plan's traffic
    assert restored(SERVICE, groups, links, []).level == links[0]
    unplaced = restored(SERVICE, groups, None, [pod])
    assert not unplaced.controlled and unplaced.reason == "NoTopology"


def test_the_kept_plan_meets_the_slo_in_its_level_and_misses_it_across_the_spine() -> None:
    """The request-level check runs the KV transfers at the link the plan was sized with:
    the plan kept for a leaf (2.66 GB/s per GPU) meets the SLO there, and misses TPOT for
    many requests if its pool crossed the 8:1 spine (0.33 GB/s), which is what the placement
    prevents."""
    _, plan_at = planner()
    plan = plan_at(2.65625e9)
    assert plan.kv_link_bytes_per_s_per_gpu == pytest.approx(2.65625e9)
    inside = predicted_attainment(plan)
    across = predicted_attainment(replace(plan, kv_link_bytes_per_s_per_gpu=0.33203125e9))
    assert inside.ratio >= 0.99
    assert across.ratio < 0.9 and across.tpot_misses > 0
