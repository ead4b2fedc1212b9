"""The operator flags a straggling rank from the step times its workers report (emulator), with
its GPU's readings from the GPUNode status as evidence."""

from __future__ import annotations

from typing import Any

import numpy as np
from kubernetes import client

from tests.integration.conftest import NODES, operator_thread, pod_manifest, wait_for
from voltpack.emulator import RunningEmulator
from voltpack.model import Node
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.resources.common import API_GROUP, API_VERSION
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.schema import policy_for_strategy

GANG = "llm"
WORKERS = 8
SLOW_RANK = 3
STEPS = 60


def step_times(rank: int, seed: int) -> str:
    """STEPS steps of about 1.5 s with 1% noise; the slow rank 12% slower from step 10."""
    rng = np.random.default_rng(seed)
    common = 1.5 * (1 + 0.02 * rng.standard_normal(STEPS))
    entries = []
    for step in range(STEPS):
        slow = 1.12 if rank == SLOW_RANK and step >= 10 else 1.0
        seconds = common[step] * slow * (1 + 0.01 * rng.standard_normal())
        entries.append(f"{step}:{seconds:.4f}")
    return ",".join(entries)


def write_gpu_readings(custom: client.CustomObjectsApi, node: Node, throttled: set[int]) -> None:
    """The node's GPUNode status as its agent writes it: the `throttled` GPUs' SM clock and
    power draw well below the others', every GPU as busy."""
    custom.create_cluster_custom_object(
        API_GROUP, API_VERSION, "gpunodes",
        {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": "GPUNode",
         "metadata": {"name": node.name}, "spec": {}},
    )  # fmt: skip
    memory_gib = default_catalog().get(str(node.gpu_model)).memory_gib or 0.0
    memory_mib = round(memory_gib * 1024)
    devices = [
        {
            "index": i,
            "uuid": f"GPU-{node.name}-{i}",
            "model": node.gpu_model,
            "memoryMib": memory_mib,
            "health": "Healthy",
            "powerDrawW": 250.0 if i in throttled else 390.0,
            "smClockMhz": 1005.0 if i in throttled else 1410.0,
            "utilizationRatio": 0.97,
        }
        for i in range(node.gpu_count)
    ]
    custom.patch_cluster_custom_object_status(
        API_GROUP, API_VERSION, "gpunodes", node.name, {"status": {"gpus": devices}}
    )


def test_a_rank_12_percent_slower_gets_a_straggler_event(
    emulator: RunningEmulator,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
) -> None:
    install_crds(extensions)
    core.create_namespace({"metadata": {"name": "voltpack-system"}})
    annotations = {"voltpack.io/pod-group": GANG, "voltpack.io/min-members": str(WORKERS)}
    for index in range(WORKERS):
        core.create_namespaced_pod(
            "default", pod_manifest(f"{GANG}-{index}", gpus=1, annotations=annotations)
        )
    config = OperatorConfig(
        policy=policy_for_strategy("best-fit"), identity="op", cycle_interval_s=0.05
    )
    with operator_thread(emulator.url, config) as operator:

        def bound() -> list[Any]:
            pods = [p for p in core.list_namespaced_pod("default").items if p.spec.node_name]
            ranked = [p for p in pods if "voltpack.io/rank" in (p.metadata.annotations or {})]
            return ranked if len(ranked) == WORKERS else []

        pods = wait_for(bound, timeout_s=30, what="the gang bound with ranks")
        slow = next(p for p in pods if p.metadata.annotations["voltpack.io/rank"] == str(SLOW_RANK))
        slow_gpus = {
            int(i) for i in slow.metadata.annotations["voltpack.io/gpu-indices"].split(",")
        }
        nodes = {p.spec.node_name for p in pods}
        for node in NODES:
            if node.name in nodes:
                throttled = slow_gpus if node.name == slow.spec.node_name else set()
                write_gpu_readings(custom, node, throttled)
        wait_for(
            lambda: published_readings(operator) >= nodes,
            timeout_s=30,
            what="the operator seeing the GPUNode statuses",
        )
        slow_pod = ""
        for seed, pod in enumerate(pods):
            rank = int(pod.metadata.annotations["voltpack.io/rank"])
            if rank == SLOW_RANK:
                slow_pod = pod.metadata.name
            patch = {
                "metadata": {"annotations": {"voltpack.io/step-times": step_times(rank, seed)}}
            }
            core.patch_namespaced_pod(pod.metadata.name, "default", patch)

        def straggler_events() -> list[Any]:
            events = core.list_namespaced_event("default").items
            return [e for e in events if e.reason == "Straggler"]

        events = wait_for(straggler_events, timeout_s=30, what="a Straggler Event")
    assert {e.involved_object.name for e in events} == {slow_pod}
    message = events[0].message
    assert f"rank {SLOW_RANK} on " in message and "slower" in message
    # the slow rank's GPU against the gang's medians, and what that points to
    assert "; sm_clock_mhz 1005 vs gang median 1410 (-29%)" in message
    assert "; power_w 250 vs gang median 390 (-36%)" in message
    assert "; utilization 0.97 vs gang median 0.97 (+0%)" in message
    assert "throttling" in message


def published_readings(operator: Operator) -> set[str]:
    """The nodes whose GPUNode status with SM clocks the operator's cache holds."""
    return {
        g["metadata"]["name"]
        for g in operator.gpunodes.items()
        if any("smClockMhz" in gpu for gpu in (g.get("status") or {}).get("gpus") or [])
    }
