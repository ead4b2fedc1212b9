"""Gang placement as one unit in a topology: whole or nothing, required levels, TP on NVLink,
and step times that get worse as a gang crosses oversubscribed levels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.model.cluster import Node
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.host_layout import HostLayout, HostNic
from voltpack.model.resources.topology import TopologyLevel, TopologySpec
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.topology import ClusterTopology
from voltpack.model.topology_request import (
    KAI_PREFERRED,
    KAI_REQUIRED,
    KUEUE_REQUIRED,
    TopologyRequest,
)
from voltpack.model.workload import Pod, PodGroup
from voltpack.perf.training_models import Parallelism, default_training_models
from voltpack.policies.registry import make_strategy
from voltpack.policies.topology.placers import KAI, KUEUE, StepTimePlacer
from voltpack.policies.topology.step_model import gang_step_model, step_model_for_group
from voltpack.scheduler.gang_topology import TopologyPlacement, place_gang
from voltpack.scheduler.placement import Scheduler

SPEC = TopologySpec(
    levels=[
        TopologyLevel(node_label="spine", oversubscription=1.0),
        TopologyLevel(node_label="leaf", oversubscription=4.0),
    ]
)
HOST = HostLayout(
    gpu_count=8,
    nvlink_domains=((0, 1, 2, 3), (4, 5, 6, 7)),
    numa_of_gpu=(0, 0, 0, 0, 1, 1, 1, 1),
    nics=tuple(
        HostNic(
            name=f"mlx5_{i}",
            nic_class="infiniband",
            line_rate_gbit_s=200,
            numa_node=i // 2,
            pcie_gpus=(2 * i, 2 * i + 1),
        )
        for i in range(4)
    ),
)


def cluster(
    nodes: int = 8, per_leaf: int = 2
) -> tuple[ClusterSnapshot, ClusterTopology, list[str]]:
    """`nodes` 8-GPU nodes, `per_leaf` per leaf, two leaves per spine."""
    names = [f"n{i}" for i in range(nodes)]
    snapshot = ClusterSnapshot.from_nodes(
        [Node.empty(n, 64_000, 512_000, 8, "A100-80GB") for n in names]
    )
    labels = {
        n: {"spine": f"s{i // (2 * per_leaf)}", "leaf": f"l{i // per_leaf}"}
        for i, n in enumerate(names)
    }
    topology = ClusterTopology.from_labels(SPEC, names, labels, hosts=dict.fromkeys(names, HOST))
    return snapshot, topology, names


def gang(name: str, pods: int, gpus: int) -> PodGroup:
    members = tuple(
        Pod(name=f"{name}-{i}", cpu_milli=1000, memory_mib=1024, num_gpu=gpus, gpu_milli=1000)
        for i in range(pods)
    )
    return PodGroup(name=name, pods=members, min_member=pods)


def test_tensor_parallel_groups_land_inside_nvlink_domains() -> None:
    snapshot, topology, _ = cluster()
    # occupy GPUs 0-1 of node 0 so its first NVLink domain has only two free
    snapshot.allocate(0, gang("x", 1, 2).pods[0], [0, 1])
    outcome = place_gang(snapshot, topology, gang("tp", 8, 1), StepTimePlacer(), tensor_parallel=4)
    assert outcome.decision.placed, outcome.decision.reason
    groups = [outcome.decision.placements[i : i + 4] for i in (0, 4)]
    for group in groups:
        nodes = {p.node for p in group}
        assert len(nodes) == 1
        row = snapshot.node_index(nodes.pop())
        domains = {HOST.nvlink_domain_of()[p.gpu_indices[0]] for p in group}
        assert len(domains) == 1, (row, group)
    assert "TP groups on NVLink domains" in outcome.decision.reason


def test_required_level_that_cannot_be_met_places_nothing_and_says_why() -> None:
    snapshot, topology, _ = cluster()
    before = snapshot.gpu_free_milli.copy()
    outcome = place_gang(snapshot, topology, gang("big", 3, 8), StepTimePlacer(), required_level=1)
    assert not outcome.decision.placed
    assert "required level leaf" in outcome.decision.reason
    assert "has 2" in outcome.decision.reason
    assert (snapshot.gpu_free_milli == before).all()


def test_a_gang_that_fits_one_leaf_is_placed_in_one_leaf() -> None:
    snapshot, topology, _ = cluster()
    snapshot.allocate(0, gang("x", 1, 8).pods[0], list(range(8)))  # leaf l0 half used
    outcome = place_gang(snapshot, topology, gang("g", 2, 8), StepTimePlacer())
    nodes = [snapshot.node_index(p.node) for p in outcome.decision.placements]
    assert len({int(topology.domain[1, n]) for n in nodes}) == 1


def test_step_time_grows_when_data_parallel_crosses_an_oversubscribed_leaf() -> None:
    _, topology, _ = cluster()
    sku = default_catalog().get("A100-80GB")
    model = default_training_models().get("gpt-13b")
    model_step = gang_step_model(topology, model, Parallelism(4, 1, 4), sku)
    gpus = np.tile(np.arange(8), 2)
    same_leaf = model_step.step_s(np.repeat([0, 1], 8), gpus)
    across = model_step.step_s(np.repeat([0, 2], 8), gpus)
    assert across > same_leaf
    assert same_leaf == pytest.approx(model_step.ideal_s(), rel=1e-9)


def test_predicted_step_and_ideal_appear_in_the_reason() -> None:
    snapshot, topology, _ = cluster()
    sku = default_catalog().get("A100-80GB")
    model = default_training_models().get("gpt-13b")
    step_model = gang_step_model(topology, model, Parallelism(4, 1, 4), sku)
    outcome = place_gang(
        snapshot,
        topology,
        gang("g", 2, 8),
        StepTimePlacer(),
        tensor_parallel=4,
        step_model=step_model,
    )
    assert outcome.step_s is not None and outcome.ideal_s is not None
    assert outcome.step_s == pytest.approx(outcome.ideal_s)
    assert outcome.decision.predicted_step_s == outcome.step_s
    assert outcome.decision.ideal_step_s == outcome.ideal_s
    assert "predicted step" in outcome.decision.reason and "ideal" in outcome.decision.reason


@settings(max_examples=90, deadline=None)
@given(
    used=st.lists(st.integers(0, 8), min_size=8, max_size=8),
    pods=st.integers(1, 10),
    gpus=st.sampled_from([1, 2, 4, 8]),
    required=st.sampled_from([None, 0, 1]),
    placer=st.sampled_from(["voltpack", "kueue", "kai"]),
)
def test_a_gang_is_placed_whole_or_not_at_all_and_never_crosses_its_required_level(
    used: list[int], pods: int, gpus: int, required: int | None, placer: str
) -> None:
    snapshot, topology, _ = cluster()
    for row, count in enumerate(used):
        if count:
            snapshot.allocate(row, gang(f"u{row}", 1, count).pods[0], list(range(count)))
    before = snapshot.gpu_free_milli.copy()
    slots = (before == 1000).sum(axis=1) // gpus
    chosen = {"voltpack": StepTimePlacer(), "kueue": KUEUE, "kai": KAI}[placer]
    outcome = place_gang(snapshot, topology, gang("g", pods, gpus), chosen, required_level=required)
    placed = outcome.decision.placements
    if not outcome.decision.placed:
        assert placed == () and (snapshot.gpu_free_milli == before).all()
        if placer == "voltpack":  # voltpack refuses only a gang that cannot fit
            room = (
                slots.sum()
                if required is None
                else np.bincount(topology.domain[required], weights=slots).max()
            )
            assert room < pods
        return
    assert len(placed) == pods
    rows = [snapshot.node_index(p.node) for p in placed]
    taken = before - snapshot.gpu_free_milli
    assert int(taken.sum()) == pods * gpus * 1000
    if required is not None:
        assert len({int(topology.domain[required, r]) for r in rows}) == 1


def test_a_gang_bigger_than_any_spine_spans_spines_when_nothing_is_required() -> None:
    snapshot, topology, _ = cluster()  # two spines of four nodes
    outcome = place_gang(snapshot, topology, gang("huge", 6, 8), StepTimePlacer())
    assert outcome.decision.placed, outcome.decision.reason
    assert "no shared level" in outcome.decision.reason


def test_step_time_scores_units_when_pods_are_smaller_than_a_tensor_group() -> None:
    snapshot, topology, _ = cluster()
    sku = default_catalog().get("A100-80GB")
    model = default_training_models().get("gpt-13b")
    step_model = gang_step_model(topology, model, Parallelism(8, 1, 2), sku)
    outcome = place_gang(
        snapshot,
        topology,
        gang("g", 4, 4),
        StepTimePlacer(),
        tensor_parallel=8,
        step_model=step_model,
    )
    assert outcome.decision.placed, outcome.decision.reason
    nodes = [p.node for p in outcome.decision.placements]
    assert nodes[0] == nodes[1] and nodes[2] == nodes[3]


def nic_cluster() -> tuple[ClusterSnapshot, ClusterTopology, list[str]]:
    """Two nodes under one leaf whose snapshot knows their NICs (HOST's four InfiniBand)."""
    names = ["n0", "n1"]
    snapshot = ClusterSnapshot.from_nodes(
        [Node.empty(n, 64_000, 512_000, 8, "A100-80GB", layout=HOST) for n in names]
    )
    labels = {n: {"spine": "s0", "leaf": "l0"} for n in names}
    topology = ClusterTopology.from_labels(SPEC, names, labels, hosts=dict.fromkeys(names, HOST))
    return snapshot, topology, names


def test_a_gang_with_rdma_shares_gets_nics_on_its_gpus_pcie_switch_and_never_more() -> None:
    snapshot, topology, _ = nic_cluster()
    pods = tuple(
        Pod(
            name=f"r-{i}",
            cpu_milli=1000,
            memory_mib=1024,
            num_gpu=2,
            gpu_milli=1000,
            rdma_percent=60,
        )
        for i in range(6)
    )
    # one 60% share per NIC: 4 NICs per node, so at most 4 pods per node despite 8 GPUs
    outcome = place_gang(
        snapshot, topology, PodGroup(name="r", pods=pods, min_member=6), StepTimePlacer()
    )
    assert outcome.decision.placed, outcome.decision.reason
    used: dict[tuple[str, str], int] = {}
    for placement in outcome.decision.placements:
        (nic,) = placement.nics
        nic_gpus = next(n.pcie_gpus for n in HOST.nics if n.name == nic)
        assert set(placement.gpu_indices) <= set(nic_gpus)
        used[(placement.node, nic)] = used.get((placement.node, nic), 0) + 1
    assert max(used.values()) == 1
    assert int(snapshot.nic_free_pct.min()) >= 0


def test_nic_shares_bound_how_many_pods_of_a_gang_a_node_takes() -> None:
    snapshot, topology, names = nic_cluster()
    pods = tuple(
        Pod(name=f"q-{i}", cpu_milli=0, memory_mib=0, num_gpu=1, gpu_milli=1000, rdma_percent=60)
        for i in range(6)
    )
    # 8 free GPUs per node, but only 4 NICs with room for a 60% share each
    group = PodGroup(name="q", pods=pods, min_member=6)
    outcome = place_gang(snapshot, topology, group, StepTimePlacer())
    assert outcome.decision.placed, outcome.decision.reason
    per_node = [p.node for p in outcome.decision.placements]
    assert max(per_node.count(n) for n in names) == 4
    assert int(snapshot.nic_free_pct.min()) == 40
    seven = PodGroup(
        name="s", pods=(*pods, pods[0].model_copy(update={"name": "q-6"})), min_member=7
    )
    assert not place_gang(snapshot, topology, seven, StepTimePlacer()).decision.placed


def topology_scheduler(topology: ClusterTopology, node_count: int) -> Scheduler:
    return Scheduler(
        strategy=make_strategy("best-fit", None),
        tie_break_rank=np.arange(node_count),
        topology=TopologyPlacement(topology, StepTimePlacer(), step_model_for_group),
    )


def test_the_scheduler_routes_gangs_with_a_topology_request_to_gang_placement() -> None:
    snapshot, topology, _ = cluster()
    scheduler = topology_scheduler(topology, snapshot.node_count)
    request = TopologyRequest(required_level="leaf", model="gpt-13b", tensor_parallel=4)
    group = gang("job", 4, 4).model_copy(update={"topology": request})
    decision = scheduler.schedule_group(snapshot, group, np.random.default_rng(0))
    assert decision.placed, decision.reason
    assert "predicted step" in decision.reason and "leaf" in decision.reason
    # a gang without a request still goes pod by pod
    plain = scheduler.schedule_group(snapshot, gang("plain", 2, 1), np.random.default_rng(0))
    assert plain.placed and "[voltpack]" not in plain.reason


@pytest.mark.parametrize(
    ("request_fields", "words"),
    [
        ({"required_level": "rack"}, "no level 'rack'"),
        ({"model": "bert-xl"}, "bert-xl"),
        ({"model": "gpt-13b", "tensor_parallel": 3}, "tensor x pipeline"),
    ],
)
def test_a_request_the_cluster_cannot_read_leaves_the_gang_pending_with_the_reason(
    request_fields: dict[str, object], words: str
) -> None:
    snapshot, topology, _ = cluster()
    before = snapshot.gpu_free_milli.copy()
    scheduler = topology_scheduler(topology, snapshot.node_count)
    group = gang("job", 2, 4).model_copy(
        update={"topology": TopologyRequest.model_validate(request_fields)}
    )
    decision = scheduler.schedule_group(snapshot, group, np.random.default_rng(0))
    assert not decision.placed and words in decision.reason
    assert (snapshot.gpu_free_milli == before).all()


def test_kueue_and_kai_annotations_become_a_topology_request() -> None:
    kueue = TopologyRequest.from_annotations({KUEUE_REQUIRED: "leaf", KAI_PREFERRED: "spine"})
    assert kueue == TopologyRequest(required_level="leaf", preferred_level="spine")
    assert TopologyRequest.from_annotations({KAI_REQUIRED: "spine"}) == TopologyRequest(
        required_level="spine"
    )
    assert TopologyRequest.from_annotations({"other": "x"}) is None


def test_a_gpu_without_published_specs_leaves_the_gang_pending_not_the_cycle_failing() -> None:
    """openb's G2 (undisclosed) is the cluster's most common model: the step-time model cannot
    run there, so the gang waits with that reason and other pods are still scheduled."""
    names = [f"g{i}" for i in range(4)]
    snapshot = ClusterSnapshot.from_nodes([Node.empty(n, 64_000, 512_000, 8, "G2") for n in names])
    labels = {n: {"spine": "s0", "leaf": "l0"} for n in names}
    topology = ClusterTopology.from_labels(SPEC, names, labels, hosts=dict.fromkeys(names, HOST))
    scheduler = topology_scheduler(topology, snapshot.node_count)
    request = TopologyRequest(required_level="spine", model="gpt-13b", tensor_parallel=8)
    group = gang("job", 4, 8).model_copy(update={"topology": request})
    decision = scheduler.schedule_group(snapshot, group, np.random.default_rng(0))
    assert not decision.placed
    assert "its step time cannot be predicted: GPU G2: catalog has no bf16_tflops" in (
        decision.reason
    )
    plain = scheduler.schedule_group(snapshot, gang("plain", 1, 1), np.random.default_rng(0))
    assert plain.placed


def test_the_step_model_uses_the_most_common_gpu_the_gang_accepts() -> None:
    nodes = [Node.empty(f"g{i}", 64_000, 512_000, 8, "G2") for i in range(3)]
    nodes += [Node.empty(f"v{i}", 64_000, 512_000, 8, "V100M32") for i in range(2)]
    snapshot = ClusterSnapshot.from_nodes(nodes)
    names = [n.name for n in nodes]
    topology = ClusterTopology.from_labels(
        SPEC,
        names,
        {n: {"spine": "s", "leaf": "l"} for n in names},
        hosts=dict.fromkeys(names, HOST),
    )
    request = TopologyRequest(model="gpt-13b", tensor_parallel=8)
    pods = tuple(
        Pod(name=f"p{i}", cpu_milli=1, memory_mib=1, num_gpu=8, gpu_milli=1000,
            gpu_models=("V100M32", "A100-SXM4-80GB"))
        for i in range(2)
    )  # fmt: skip
    group = PodGroup(name="job", pods=pods, min_member=2, topology=request)
    model = step_model_for_group(topology, snapshot, group)
    assert model is not None and model.sku.name == "V100-32GB"  # not G2, the cluster's most common
