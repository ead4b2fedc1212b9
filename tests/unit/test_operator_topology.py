"""The operator's topology pieces without a cluster: GPUJob topology fields, pod annotations and
env, NIC shares read from pods, layouts from GPUNodes, the choice of Topology object, and the
slowdown gauge's source."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from voltpack.model.errors import InvalidRequestError
from voltpack.model.resources import GpuJobSpec
from voltpack.model.topology_request import TopologyRequest
from voltpack.operator.kube.translate import pod_from_k8s
from voltpack.operator.metrics import step_slowdowns
from voltpack.operator.scheduling.cluster_view import build_snapshot, pending_work
from voltpack.operator.scheduling.jobs import worker_pod
from voltpack.operator.scheduling.topology_view import (
    gpunode_layouts,
    hold_topology_gangs,
    make_placer,
    topology_cycle,
)
from voltpack.policies.schema import TopologyPolicySpec

NICS = [
    {
        "name": f"mlx5_{i}",
        "nicClass": "infiniband",
        "bandwidthGbps": 200,
        "gpus": [2 * i, 2 * i + 1],
    }
    for i in range(4)
]


def pod(
    name: str,
    annotations: dict[str, str] | None = None,
    gpus: int = 2,
    node: str | None = None,
    requests: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "voltpack",
        "containers": [
            {
                "name": "main",
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi", **(requests or {})},
                    "limits": {"nvidia.com/gpu": str(gpus)},
                },
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "metadata": {
            "name": name,
            "labels": {"voltpack.io/gpu-model": "A100-80GB", **(labels or {})},
        },
        "status": {"allocatable": resources, "capacity": resources},
    }


def gpunode(name: str) -> dict[str, Any]:
    topology = {"nvlinkDomains": [list(range(8))], "nics": NICS}
    return {"metadata": {"name": name}, "spec": {}, "status": {"topology": topology}}


def job_spec(**fields: Any) -> GpuJobSpec:
    return GpuJobSpec.model_validate(
        {"workers": 2, "gpusPerWorker": 4, "template": {"spec": {}}, **fields}
    )


def test_a_gpujob_topology_must_divide_its_gpus_and_names_the_fields() -> None:
    assert job_spec(topology={"tensorParallel": 8}).topology is not None
    with pytest.raises(ValidationError, match=r"tensorParallel x topology.pipelineParallel"):
        job_spec(topology={"tensorParallel": 3})
    with pytest.raises(ValidationError, match=r"rdma_percent|rdmaPercent"):
        job_spec(rdmaPercent=101)


def test_workers_carry_the_request_and_get_rank_and_nics_through_the_downward_api() -> None:
    template = {
        "spec": {
            "containers": [{"name": "t", "image": "x", "env": [{"name": "RANK", "value": "7"}]}]
        }
    }
    spec = job_spec(
        template=template,
        rdmaPercent=25,
        topology={"requiredLevel": "leaf", "model": "gpt-13b", "tensorParallel": 8},
    )
    job = {"metadata": {"name": "j", "namespace": "default", "uid": "u"}}
    worker = worker_pod(job, spec, 1)
    annotations = worker["metadata"]["annotations"]
    assert annotations["voltpack.io/topology-required"] == "leaf"
    assert annotations["voltpack.io/training-model"] == "gpt-13b"
    assert annotations["voltpack.io/tensor-parallel"] == "8"
    assert annotations["voltpack.io/rdma-percent"] == "25"
    env = {e["name"]: e for e in worker["spec"]["containers"][0]["env"]}
    assert env["RANK"] == {"name": "RANK", "value": "7"}  # the template's own is kept
    assert env["WORLD_SIZE"]["value"] == "2"
    assert env["NCCL_IB_HCA"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['voltpack.io/nics']"
    )
    # the spec's template is not changed
    assert template["spec"]["containers"][0]["env"] == [{"name": "RANK", "value": "7"}]
    request = TopologyRequest.from_pod_annotations(annotations)
    assert request == TopologyRequest(required_level="leaf", model="gpt-13b", tensor_parallel=8)


def test_rdma_percent_comes_from_the_annotation_or_the_extended_resource() -> None:
    assert pod_from_k8s(pod("a", {"voltpack.io/rdma-percent": "30"})).rdma_percent == 30
    from_resource = pod("b", requests={"voltpack.io/rdma-percent": "40"})
    assert pod_from_k8s(from_resource).rdma_percent == 40
    assert pod_from_k8s(pod("c")).rdma_percent == 0
    with pytest.raises(InvalidRequestError, match=r"pod default/d: annotation voltpack\.io/rdma"):
        pod_from_k8s(pod("d", {"voltpack.io/rdma-percent": "lots"}))
    with pytest.raises(InvalidRequestError, match=r"0\.\.100"):
        pod_from_k8s(pod("e", {"voltpack.io/rdma-percent": "150"}))


def test_pending_gangs_get_voltpacks_request_else_kueues_and_bad_values_are_held() -> None:
    group = {"voltpack.io/pod-group": "g"}
    pods = [
        pod("g-0", {**group, "voltpack.io/topology-required": "leaf"}),
        pod("g-1", group),
        pod("k-0", {"voltpack.io/pod-group": "k", "kueue.x-k8s.io/podset-required-topology": "r"}),
        pod("bad", {"voltpack.io/tensor-parallel": "two"}),
    ]
    work = pending_work(pods)
    requests = {g.name: g.topology for g in work.groups}
    assert requests["default/g"] == TopologyRequest(required_level="leaf")
    assert requests["default/k"] == TopologyRequest(required_level="r")
    assert "voltpack.io/tensor-parallel" in work.held["default/bad"]
    held = hold_topology_gangs(work)
    assert held.groups == []
    assert "no Topology object" in held.held["default/g-0"]


def test_gpunode_layouts_bring_nics_into_the_snapshot_and_bound_pods_use_them() -> None:
    nodes = [node("n0"), node("n1")]
    layouts = gpunode_layouts([gpunode("n0")], nodes)
    assert set(layouts) == {"n0"}
    bound = pod(
        "r",
        {"voltpack.io/rdma-percent": "60", "voltpack.io/gpu-indices": "2,3",
         "voltpack.io/nics": "mlx5_1"},
        node="n0",
    )  # fmt: skip
    unrecorded = pod(
        "s", {"voltpack.io/rdma-percent": "50", "voltpack.io/gpu-indices": "6,7"}, node="n0"
    )
    elsewhere = pod("t", {"voltpack.io/rdma-percent": "50"}, node="n1")  # no NICs there
    snapshot = build_snapshot(nodes, [bound, unrecorded, elsewhere], layouts)
    row = snapshot.node_index("n0")
    assert snapshot.nic_free_pct[row, :4].tolist() == [100, 40, 100, 50]
    assert int(snapshot.gpu_free_milli[snapshot.node_index("n1")].sum()) == 6000


def test_the_policy_names_the_topology_else_the_first_by_name_and_statuses_say_so() -> None:
    spec = {"levels": [{"nodeLabel": "leaf", "oversubscription": 1.0}]}
    objects = [{"metadata": {"name": n}, "spec": spec} for n in ("b", "a")]
    objects.append({"metadata": {"name": "c"}, "spec": {"levels": []}})
    nodes = [node("n0", {"leaf": "l0"}), node("n1")]
    first = topology_cycle(objects, [], nodes, TopologyPolicySpec())
    assert first.name == "a"
    assert first.statuses["b"]["conditions"][0]["reason"] == "NotSelected"
    assert first.statuses["c"]["conditions"][0]["reason"] == "InvalidSpec"
    named = topology_cycle(objects, [], nodes, TopologyPolicySpec(name="b", placer="kai"))
    assert (
        named.name == "b"
        and "spec.topology.name=b" in named.statuses["b"]["conditions"][0]["message"]
    )
    placement = named.placement(("n0", "n1"), nodes, make_placer("kai"))
    assert placement is not None and placement.placer.name == "kai"
    status = named.statuses["b"]
    assert status["nodes"] == 2 and status["levels"] == [
        {"nodeLabel": "leaf", "domains": 2, "labelledNodes": 1}
    ]
    assert status["conditions"][-1]["reason"] == "MissingLabels"
    assert (
        topology_cycle([], [], nodes, TopologyPolicySpec()).placement(
            ("n0", "n1"), nodes, make_placer("voltpack")
        )
        is None
    )


def test_the_slowdown_gauge_reads_bound_active_pods() -> None:
    written = {
        "voltpack.io/pod-group": "g",
        "voltpack.io/predicted-step-seconds": "1.2",
        "voltpack.io/ideal-step-seconds": "1.0",
    }
    done = pod("h-0", {**written, "voltpack.io/pod-group": "h"}, node="n0")
    done["status"]["phase"] = "Succeeded"
    ratios = step_slowdowns([pod("g-0", written, node="n0"), pod("g-1", written), done])
    assert ratios == {"default/g": pytest.approx(1.2)}


def test_a_stored_topology_without_oversubscription_is_not_used_and_its_status_says_why() -> None:
    """An object the API server kept without the field (stored under an older CRD, whose
    default was 1.0, or on a server that does not check the schema) is refused, not taken
    as non-blocking: the operator reports the level and the field, and places with no
    Topology rather than a silent 1:1 one."""
    unsaid = {
        "metadata": {"name": "fabric"},
        "spec": {"levels": [{"nodeLabel": "spine", "oversubscription": 4}, {"nodeLabel": "leaf"}]},
    }
    nodes = [node("n0", {"spine": "s0", "leaf": "l0"})]
    cycle = topology_cycle([unsaid], [], nodes, TopologyPolicySpec())
    assert cycle.name is None and cycle.spec is None
    (condition,) = cycle.statuses["fabric"]["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
    assert condition["message"].startswith(
        "spec.levels.1: level nodeLabel=leaf: oversubscription is required"
    )
    assert cycle.placement(("n0",), nodes, make_placer("voltpack")) is None
