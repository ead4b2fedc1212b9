"""A split InferenceService's prefill and decode replicas kept inside one topology domain, so
the KV-cache transfer stays on the links the plan counted on; over the emulator.

The cluster: four 8-GPU H100 nodes, two leaves under one spine. The Topology's default host has
two 100 Gb/s RoCE NICs per node and the leaf switches are 8:1 oversubscribed, so a transfer
across the spine gets 0.33 GB/s per GPU and one inside a leaf 2.66 GB/s. The service
(llama2-70b, 4 requests/s) is planned split: at the spine's bandwidth its KV traffic (0.55
GB/s per prefill GPU at half link load) does not fit and the plan costs more; inside a leaf
it fits, so the pool (14 GPUs, pods of 2 and 8 GPUs) must stay in one leaf. Six GPUs of a
leaf-a node are taken first, leaving leaf-a 10 free GPUs: only leaf-b holds the pool.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.integration.conftest import emulated_gpu_hosts, operator_thread, pod_manifest, wait_for
from voltpack.emulator import RunningEmulator
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.schema import policy_for_strategy

GROUP, VERSION, PLURAL = "voltpack.io", "v1alpha1", "inferenceservices"
LEASE_NAMESPACE = "voltpack-system"
SPINE, LEAF = "topology.example.com/spine", "topology.example.com/leaf"
LEAF_OF = {"gpu-0": "leaf-a", "gpu-1": "leaf-a", "gpu-2": "leaf-b", "gpu-3": "leaf-b"}
TOPOLOGY = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "Topology",
    "metadata": {"name": "fabric"},
    "spec": {
        "levels": [
            {"nodeLabel": SPINE, "name": "spine", "oversubscription": 1},
            {"nodeLabel": LEAF, "name": "leaf", "oversubscription": 8},
        ],
        "defaultHost": {
            "gpus": 8,
            "nics": [
                {"name": f"mlx5_{i}", "nicClass": "roce", "lineRateGbitS": 100, "gpus": []}
                for i in range(2)
            ],
        },
    },
}
SERVICE = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "InferenceService",
    "metadata": {"name": "chat", "namespace": "default"},
    "spec": {
        "model": "llama2-70b",
        "slo": {"ttftMs": 3000, "tpotMs": 100},
        "ratePerSecond": 4,
        "requestSizes": [
            {"promptTokens": 1500, "outputTokens": 100, "share": 0.5},
            {"promptTokens": 3000, "outputTokens": 50, "share": 0.5},
        ],
        "gpuTypes": ["H100"],
        "container": {"image": "vllm/vllm-openai:v0.6.3"},
    },
}


@pytest.fixture
def emulator() -> Iterator[RunningEmulator]:
    with emulated_gpu_hosts(LEAF_OF, "H100-SXM") as running:
        yield running


@pytest.fixture(autouse=True)
def cluster(core: client.CoreV1Api, extensions: client.ApiextensionsV1Api) -> None:
    core.create_namespace({"metadata": {"name": LEASE_NAMESPACE}})
    install_crds(extensions)
    for name, leaf in LEAF_OF.items():
        core.patch_node(name, {"metadata": {"labels": {SPINE: "spine-1", LEAF: leaf}}})
    busy = pod_manifest(
        "busy", gpus=6, node_name="gpu-0", annotations={"voltpack.io/gpu-indices": "0,1,2,3,4,5"}
    )
    core.create_namespaced_pod("default", busy)


@pytest.fixture
def operator(emulator: RunningEmulator) -> Iterator[Operator]:
    config = OperatorConfig(
        policy=policy_for_strategy("best-fit"),
        identity="op-inference-kv",
        namespace=LEASE_NAMESPACE,
        cycle_interval_s=0.05,
        lease_duration_s=5,
        power=False,
        policy_configmap=None,
        metrics_port=0,
    )
    with operator_thread(emulator.url, config) as running:
        yield running


def kv_condition(custom: client.CustomObjectsApi) -> dict[str, Any] | None:
    service = custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "chat")
    for condition in (service.get("status") or {}).get("conditions") or []:
        if condition["type"] == "KVPlacement":
            return dict(condition)
    return None


def all_bound(core: client.CoreV1Api) -> list[Any] | None:
    """The service's replicas when every live one is bound, else None."""
    pods = core.list_namespaced_pod(
        "default", label_selector="voltpack.io/inference-service=chat"
    ).items
    live = [p for p in pods if not p.metadata.deletion_timestamp]
    return live if live and all(p.spec.node_name for p in live) else None


def bound_replicas(core: client.CoreV1Api) -> list[Any]:
    found: list[Any] = wait_for(lambda: all_bound(core), timeout_s=60, what="replicas bound")
    return found


def kv_events(core: client.CoreV1Api) -> list[Any]:
    return [
        e
        for e in core.list_namespaced_event("default").items
        if e.involved_object.name == "chat" and e.reason == "KVPlacement"
    ]


def test_a_split_services_prefill_and_decode_pods_land_in_one_leaf(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, operator: Operator
) -> None:
    custom.create_cluster_custom_object(GROUP, VERSION, "topologies", TOPOLOGY)
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, SERVICE)
    condition = wait_for(lambda: kv_condition(custom), timeout_s=60, what="KVPlacement")
    assert condition["status"] == "True" and condition["reason"] == "Controlled"
    assert f"inside one leaf ({LEAF})" in condition["message"]
    assert "planned with 2.66 GB/s per prefill GPU" in condition["message"]
    pods = bound_replicas(core)
    roles = {p.metadata.labels["voltpack.io/inference-role"] for p in pods}
    assert roles == {"prefill", "decode"}
    sizes = {int(p.spec.containers[0].resources.limits["nvidia.com/gpu"]) for p in pods}
    assert len(sizes) > 1, sizes  # pods of several shapes: the mixed-gang path
    for pod in pods:
        annotations = pod.metadata.annotations
        assert annotations["voltpack.io/topology-required"] == LEAF
        assert annotations["voltpack.io/pod-group"] == "chat-kv"
        assert annotations["voltpack.io/min-members"] == str(len(pods))
    assert {LEAF_OF[p.spec.node_name] for p in pods} == {"leaf-b"}
    assert kv_events(core)
    # a replica that goes cannot join the placed gang: the pool is placed whole again
    first = {p.metadata.name: p.metadata.uid for p in pods}
    core.delete_namespaced_pod(pods[0].metadata.name, "default")

    def replaced() -> list[Any] | None:
        again = all_bound(core) or []
        fresh = all(first.get(p.metadata.name) != p.metadata.uid for p in again)
        return again if fresh and len(again) == len(pods) else None

    def pool() -> str:
        listed = core.list_namespaced_pod(
            "default", label_selector="voltpack.io/inference-service=chat"
        ).items
        return "; ".join(
            f"{p.metadata.name} new={first.get(p.metadata.name) != p.metadata.uid} "
            f"node={p.spec.node_name} deleting={bool(p.metadata.deletion_timestamp)} "
            f"status={[(c.type, c.reason, c.message) for c in p.status.conditions or []]}"
            for p in listed
        )

    again = wait_for(replaced, timeout_s=60, what="the pool re-created and bound", explain=pool)
    assert len({LEAF_OF[p.spec.node_name] for p in again}) == 1


def test_without_a_topology_the_status_says_the_transfer_is_not_controlled(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, operator: Operator
) -> None:
    custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, copy.deepcopy(SERVICE)
    )
    condition = wait_for(lambda: kv_condition(custom), timeout_s=60, what="KVPlacement")
    assert condition["status"] == "False" and condition["reason"] == "NoTopology"
    assert "placement is not controlled: the cluster has no Topology" in condition["message"]
    assert "assumes 50 GB/s per prefill GPU" in condition["message"]
    pods = bound_replicas(core)
    assert all("voltpack.io/topology-required" not in p.metadata.annotations for p in pods)
    assert [e.type for e in kv_events(core)] == ["Warning"]
