"""Topology- and NIC-aware gang placement in the operator, over the emulator, through the official
client: a `Topology` of two leaves under one spine, four 8-GPU nodes labelled with it, and
GPUNodes whose status reports each host's NVLink domain and four RDMA NICs (one per PCIe switch,
two GPUs each).

Each test first occupies half of some nodes, so that a topology-unaware, pod-by-pod best fit would
put the gang where the test's assertion fails (split over nodes, or over leaves).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.integration.conftest import (
    emulated_gpu_hosts,
    gpu_job_manifest,
    operator_thread,
    pod_manifest,
    report_host_topology,
    wait_for,
)
from voltpack.emulator import RunningEmulator
from voltpack.model.topology_request import KAI_REQUIRED, KUEUE_REQUIRED
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.schema import policy_for_strategy

GROUP, VERSION = "voltpack.io", "v1alpha1"
LEASE_NAMESPACE = "voltpack-system"
SPINE, LEAF = "topology.example.com/spine", "topology.example.com/leaf"
NODE_NAMES = ("gpu-0", "gpu-1", "gpu-2", "gpu-3")
LEAF_OF = {"gpu-0": "leaf-a", "gpu-1": "leaf-a", "gpu-2": "leaf-b", "gpu-3": "leaf-b"}
NICS = [
    {
        "name": f"mlx5_{i}",
        "nicClass": "infiniband",
        "bandwidthGbps": 200,
        "numaNode": i // 2,
        "gpus": [2 * i, 2 * i + 1],
    }
    for i in range(4)
]
NIC_GPUS = {nic["name"]: set(nic["gpus"]) for nic in NICS}
TOPOLOGY = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "Topology",
    "metadata": {"name": "fabric"},
    "spec": {
        "levels": [
            {"nodeLabel": SPINE, "name": "spine", "oversubscription": 1},
            {"nodeLabel": LEAF, "name": "leaf", "oversubscription": 4},
        ]
    },
}


@pytest.fixture
def emulator() -> Iterator[RunningEmulator]:
    with emulated_gpu_hosts(NODE_NAMES, "A100-80GB") as running:
        yield running


@pytest.fixture(autouse=True)
def cluster(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, extensions: client.ApiextensionsV1Api
) -> None:
    """CRDs, the Topology, node labels, and every node's GPUNode with its reported topology."""
    core.create_namespace({"metadata": {"name": LEASE_NAMESPACE}})
    install_crds(extensions)
    custom.create_cluster_custom_object(GROUP, VERSION, "topologies", TOPOLOGY)
    for name in NODE_NAMES:
        core.patch_node(name, {"metadata": {"labels": {SPINE: "spine-1", LEAF: LEAF_OF[name]}}})
    host = {
        "nvlinkDomains": [list(range(8))],
        "numaNodes": [[0, 1, 2, 3], [4, 5, 6, 7]],
        "nics": NICS,
    }
    report_host_topology(custom, NODE_NAMES, host)


def running_operator(emulator: RunningEmulator, placer: str = "voltpack") -> Any:
    policy = policy_for_strategy("best-fit")
    policy = policy.model_copy(
        update={
            "spec": policy.spec.model_copy(
                update={"topology": policy.spec.topology.model_copy(update={"placer": placer})}
            )
        }
    )
    config = OperatorConfig(
        policy=policy,
        identity="op-topology",
        namespace=LEASE_NAMESPACE,
        cycle_interval_s=0.05,
        lease_duration_s=2,
        power=False,
        policy_configmap=None,
        metrics_port=0,
    )
    return operator_thread(emulator.url, config)


def occupy(core: client.CoreV1Api, node: str, gpus: list[int]) -> None:
    """A running pod holding `gpus` of `node` (recorded as voltpack records its bindings)."""
    pod = pod_manifest(
        f"busy-{node}",
        gpus=len(gpus),
        node_name=node,
        annotations={"voltpack.io/gpu-indices": ",".join(map(str, gpus))},
    )
    core.create_namespaced_pod("default", pod)


def bound_pods(core: client.CoreV1Api, prefix: str, count: int) -> list[Any]:
    def ready() -> list[Any] | None:
        pods = [
            p
            for p in core.list_namespaced_pod("default").items
            if p.metadata.name.startswith(prefix) and p.spec.node_name
        ]
        return pods if len(pods) == count else None

    result: list[Any] = wait_for(ready, timeout_s=30, what=f"{count} pods of {prefix} bound")
    return result


def ranks_are_placement_order(pods: list[Any]) -> None:
    """Ranks 0..n-1, as annotation and label, and each node's pods hold consecutive ranks."""
    ranks = {p.metadata.name: int(p.metadata.annotations["voltpack.io/rank"]) for p in pods}
    assert sorted(ranks.values()) == list(range(len(pods)))
    for pod in pods:
        assert pod.metadata.labels["voltpack.io/rank"] == str(ranks[pod.metadata.name])
    for node in {p.spec.node_name for p in pods}:
        held = sorted(ranks[p.metadata.name] for p in pods if p.spec.node_name == node)
        assert held == list(range(held[0], held[0] + len(held))), (node, held)


def metric(operator: Operator, name: str) -> dict[str, float]:
    assert operator.metrics is not None
    url = f"http://127.0.0.1:{operator.metrics.port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line.rsplit(" ", 1)
            found[labels[len(name) :]] = float(value)
    return found


def test_a_tensor_parallel_8_job_lands_inside_one_nvlink_domain_with_ranks_and_step_times(
    emulator: RunningEmulator,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
) -> None:
    # half of gpu-0 and gpu-1 busy: best fit pod by pod would split the job over both
    occupy(core, "gpu-0", [0, 1, 2, 3])
    occupy(core, "gpu-1", [0, 1, 2, 3])
    topology = {"model": "gpt-13b", "tensorParallel": 8}
    custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", "gpujobs", gpu_job_manifest("tp8", 2, 4, topology=topology)
    )
    with running_operator(emulator) as operator:
        pods = bound_pods(core, "tp8-worker-", 2)
        assert len({p.spec.node_name for p in pods}) == 1, "a TP group of 8 spans two nodes"
        assert pods[0].spec.node_name in ("gpu-2", "gpu-3")
        gpus = sorted(
            int(g)
            for p in pods
            for g in p.metadata.annotations["voltpack.io/gpu-indices"].split(",")
        )
        assert gpus == list(range(8))
        ranks_are_placement_order(pods)
        reason = pods[0].metadata.annotations["voltpack.io/placement-reason"]
        assert "TP groups on NVLink domains" in reason and "predicted step" in reason
        assert "ideal" in reason
        for pod in pods:
            env = {e.name: e for e in pod.spec.containers[0].env}
            assert env["RANK"].value_from.field_ref.field_path == (
                "metadata.annotations['voltpack.io/rank']"
            )
            assert env["WORLD_SIZE"].value == "2"
            annotations = pod.metadata.annotations
            assert annotations["voltpack.io/tensor-parallel"] == "8"
            assert annotations["voltpack.io/training-model"] == "gpt-13b"

        def scheduled() -> dict[str, Any] | None:
            job = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", "tp8")
            conditions = (job.get("status") or {}).get("conditions") or [{}]
            return conditions[0] if conditions[0].get("status") == "True" else None

        condition = wait_for(scheduled, timeout_s=20, what="the job's Scheduled condition")
        assert "predicted step" in condition["message"]
        slowdown = wait_for(
            lambda: metric(operator, "voltpack_job_predicted_step_slowdown_ratio"),
            timeout_s=20,
            what="the slowdown gauge",
        )
        assert list(slowdown) == ['{gang="default/tp8"}']
        assert slowdown['{gang="default/tp8"}'] >= 1.0

        def status() -> dict[str, Any] | None:
            obj = custom.get_cluster_custom_object(GROUP, VERSION, "topologies", "fabric")
            return obj.get("status") if (obj.get("status") or {}).get("nodes") else None

        admin = KubeAdminSource(api_client, policy_for_strategy("best-fit"), "")
        view = next(j for j in admin.jobs() if j.name == "tp8")
        admin.close()
        assert view.placement_reason is not None and "predicted step" in view.placement_reason
        assert sorted(w.rank for w in view.workers if w.rank is not None) == [0, 1]

        written = wait_for(status, timeout_s=20, what="the Topology's status")
        assert written["nodes"] == 4
        assert [(lv["nodeLabel"], lv["domains"]) for lv in written["levels"]] == [
            (SPINE, 1),
            (LEAF, 2),
        ]
        assert written["conditions"][0]["type"] == "Active"
        assert written["conditions"][0]["status"] == "True"


def test_a_required_level_that_cannot_be_met_leaves_the_job_pending_with_the_reason(
    emulator: RunningEmulator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    # three whole nodes cannot fit in a leaf of two
    job = gpu_job_manifest("wide", 3, 8, topology={"requiredLevel": "leaf"})
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", job)
    with running_operator(emulator):

        def unschedulable() -> dict[str, Any] | None:
            obj = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", "wide")
            condition = ((obj.get("status") or {}).get("conditions") or [{}])[0]
            return condition if condition.get("reason") == "Unschedulable" else None

        condition = wait_for(unschedulable, timeout_s=30, what="the job to be unschedulable")
        assert "required level leaf" in condition["message"], condition
        events = wait_for(
            lambda: [
                e
                for e in core.list_namespaced_event("default").items
                if e.involved_object.kind == "GPUJob" and e.reason == "FailedScheduling"
            ],
            timeout_s=20,
            what="the job's FailedScheduling Event",
        )
        assert "required level leaf" in events[0].message
    assert all(not p.spec.node_name for p in core.list_namespaced_pod("default").items)


def test_pods_with_an_rdma_share_get_nics_on_their_gpus_pcie_switch_and_see_them(
    emulator: RunningEmulator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    job = gpu_job_manifest("rdma", 4, 2, rdmaPercent=60, topology={"preferredLevel": "leaf"})
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", job)
    with running_operator(emulator):
        pods = bound_pods(core, "rdma-worker-", 4)
    used: set[tuple[str, str]] = set()
    for pod in pods:
        annotations = pod.metadata.annotations
        assert annotations["voltpack.io/rdma-percent"] == "60"
        (nic,) = annotations["voltpack.io/nics"].split(",")
        gpus = {int(g) for g in annotations["voltpack.io/gpu-indices"].split(",")}
        assert gpus <= NIC_GPUS[nic], (pod.metadata.name, nic, gpus)
        assert (pod.spec.node_name, nic) not in used, "two 60% shares on one NIC"
        used.add((pod.spec.node_name, nic))
        env = {e.name: e for e in pod.spec.containers[0].env}
        assert env["NCCL_IB_HCA"].value_from.field_ref.field_path == (
            "metadata.annotations['voltpack.io/nics']"
        )
    ranks_are_placement_order(pods)


@pytest.mark.parametrize(
    ("annotation", "placer"),
    [(KUEUE_REQUIRED, "voltpack"), (KAI_REQUIRED, "voltpack"), (KUEUE_REQUIRED, "kueue"),
     (KAI_REQUIRED, "kai")],
)  # fmt: skip
def test_kueue_and_kai_required_topology_keeps_a_pod_gang_inside_one_leaf(
    emulator: RunningEmulator, core: client.CoreV1Api, annotation: str, placer: str
) -> None:
    # half of gpu-0 (leaf-a) and gpu-2 (leaf-b) busy: best fit pod by pod takes both halves
    occupy(core, "gpu-0", [0, 1, 2, 3])
    occupy(core, "gpu-2", [0, 1, 2, 3])
    gang = {"voltpack.io/pod-group": "ring", annotation: LEAF}
    for index in range(2):
        core.create_namespaced_pod(
            "default", pod_manifest(f"ring-{index}", gpus=4, annotations=gang)
        )
    with running_operator(emulator, placer):
        pods = bound_pods(core, "ring-", 2)
    assert len({LEAF_OF[p.spec.node_name] for p in pods}) == 1, [p.spec.node_name for p in pods]
    ranks_are_placement_order(pods)
    assert f"[{placer}]" in pods[0].metadata.annotations["voltpack.io/placement-reason"]
