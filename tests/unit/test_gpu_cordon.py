"""GPU-level cordon: faults read from GPUNode status take GPUs (or nodes) out of the snapshot."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.model import Node
from voltpack.operator.kube.translate import node_to_k8s
from voltpack.operator.scheduling.cluster_view import build_snapshot, pending_work
from voltpack.operator.scheduling.gpu_faults import GpuFaultSeen, gpu_faults
from voltpack.policies.registry import make_strategy
from voltpack.scheduler.fault_recovery import RecoveryPolicy
from voltpack.scheduler.placement import Scheduler
from voltpack.scheduler.session import decide


def k8s_pod(
    name: str, gpus: int, *, node: str | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "voltpack",
        "containers": [
            {
                "name": "c",
                "image": "x",
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi"},
                    **({"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}),
                },
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": annotations or {},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def gpunode(name: str, gpus: dict[int, dict[str, Any]], count: int = 4) -> dict[str, Any]:
    devices = []
    for index in range(count):
        device: dict[str, Any] = {
            "index": index,
            "uuid": f"GPU-{name}-{index}",
            "model": "H100",
            "memoryMib": 81_920,
            "health": "Healthy",
        }
        device.update(gpus.get(index, {}))
        devices.append(device)
    return {"metadata": {"name": name}, "status": {"gpus": devices}}


def xid(code: int, action: str, message: str = "") -> dict[str, Any]:
    return {"signal": "xid", "code": code, "action": action, "message": message}


def nodes(count: int = 2, gpus: int = 4) -> list[dict[str, Any]]:
    return [
        node_to_k8s(Node.empty(f"node-{i}", 64_000, 262_144, gpus, "H100")) for i in range(count)
    ]


def test_faults_are_read_with_their_worst_action_and_a_reason() -> None:
    found = gpu_faults(
        [
            gpunode(
                "node-a",
                {
                    3: {"faults": [xid(79, "reboot", "fell off the bus"), xid(13, "none")]},
                    1: {"faults": [{"signal": "thermal", "action": "none"}]},
                    2: {"health": "Unhealthy"},
                },
            )
        ]
    )
    assert [(f.gpu, f.action) for f in found] == [(2, "reset"), (3, "reboot")]
    assert found[1].reason == "GPU 3 of node-a: XID 79 (fell off the bus), calls for reboot"
    assert found[0].reason == "GPU 2 of node-a: reported Unhealthy"


def test_a_reset_fault_cordons_that_gpu_only() -> None:
    faults = gpu_faults([gpunode("node-0", {2: {"faults": [xid(48, "reset")]}})])
    snapshot = build_snapshot(nodes(), [], faults=faults)
    assert snapshot.gpu_present[0].tolist() == [True, True, False, True]
    assert snapshot.gpu_free_milli[0].tolist() == [1000, 1000, 0, 1000]
    assert snapshot.gpu_present[1].all()
    assert snapshot.cpu_free_milli[0] == 64_000


def test_a_replace_fault_cordons_the_gpu_and_a_reboot_the_whole_node() -> None:
    replace = gpu_faults([gpunode("node-1", {0: {"faults": [xid(64, "replace")]}})])
    snapshot = build_snapshot(nodes(), [], faults=replace)
    assert snapshot.gpu_present[1].tolist() == [False, True, True, True]
    reboot = gpu_faults([gpunode("node-1", {0: {"faults": [xid(79, "reboot")]}})])
    snapshot = build_snapshot(nodes(), [], faults=reboot)
    assert not snapshot.gpu_present[1].any()
    assert snapshot.gpu_free_milli[1].sum() == 0 and snapshot.cpu_free_milli[1] == 0
    assert snapshot.gpu_present[0].all()


def test_node_level_isolation_cordons_the_node_for_any_gpu_fault() -> None:
    faults = gpu_faults([gpunode("node-0", {2: {"faults": [xid(48, "reset")]}})])
    snapshot = build_snapshot(nodes(), [], faults=faults, recovery=RecoveryPolicy(isolation="node"))
    assert not snapshot.gpu_present[0].any()


def test_a_pod_on_a_cordoned_gpu_stays_accounted_and_the_gpu_comes_back_when_cleared() -> None:
    running = [
        k8s_pod("a", 1, node="node-0", annotations={"voltpack.io/gpu-indices": "2"}),
        k8s_pod("b", 1, node="node-0", annotations={"voltpack.io/gpu-indices": "0"}),
    ]
    faults = gpu_faults([gpunode("node-0", {2: {"faults": [xid(48, "reset")]}})])
    snapshot = build_snapshot(nodes(), running, faults=faults)
    assert snapshot.gpu_free_milli[0].tolist() == [0, 1000, 0, 1000]
    assert snapshot.cpu_free_milli[0] == 62_000  # both pods' CPU still taken
    cleared = gpu_faults([gpunode("node-0", {})])
    assert cleared == []
    snapshot = build_snapshot(nodes(), running, faults=cleared)
    assert snapshot.gpu_present[0].all()
    assert snapshot.gpu_free_milli[0].tolist() == [0, 1000, 0, 1000]


def test_a_malformed_fault_is_skipped_not_fatal() -> None:
    bad = gpunode("node-0", {1: {"faults": [{"signal": "cosmic-ray", "action": "reset"}]}})
    assert gpu_faults([bad]) == []


ACTIONS = st.sampled_from(["reset", "reboot", "replace"])


@st.composite
def faulty_clusters(draw: st.DrawFn) -> tuple[int, int, list[GpuFaultSeen], list[tuple[int, int]]]:
    node_count = draw(st.integers(1, 5))
    gpus = draw(st.sampled_from([2, 4, 8]))
    faults = draw(
        st.lists(
            st.tuples(st.integers(0, node_count - 1), st.integers(0, gpus - 1), ACTIONS),
            max_size=6,
            unique_by=lambda f: (f[0], f[1]),
        )
    )
    seen = [GpuFaultSeen(f"node-{n}", g, a, f"GPU {g} of node-{n}: {a}") for n, g, a in faults]
    gangs = draw(st.lists(st.tuples(st.integers(1, 4), st.sampled_from([1, 2, 4])), max_size=6))
    return node_count, gpus, seen, gangs


@settings(max_examples=60, deadline=None)
@given(faulty_clusters(), st.integers(0, 2**31), st.sampled_from(["gpu", "node"]))
def test_a_cordoned_gpu_never_receives_a_new_pod(
    cluster: tuple[int, int, list[GpuFaultSeen], list[tuple[int, int]]], seed: int, isolation: str
) -> None:
    node_count, gpus, faults, gangs = cluster
    policy = RecoveryPolicy(isolation=isolation)  # type: ignore[arg-type]
    pods = []
    for g, (size, per_pod) in enumerate(gangs):
        group = {"voltpack.io/pod-group": f"g{g}"}
        pods += [k8s_pod(f"g{g}-{i}", min(per_pod, gpus), annotations=group) for i in range(size)]
    snapshot = build_snapshot(nodes(node_count, gpus), [], faults=faults, recovery=policy)
    scheduler = Scheduler.with_random_ranks(
        make_strategy("best-fit"), node_count, np.random.default_rng(seed)
    )
    plan = decide(scheduler, snapshot, pending_work(pods), np.random.default_rng(seed))
    taken = set()
    for fault in faults:
        node = int(fault.node.split("-")[1])
        if fault.action == "reboot" or isolation == "node":
            taken |= {(node, g) for g in range(gpus)}
        else:
            taken.add((node, fault.gpu))
    for gang in plan.gangs:
        for placement in gang:
            node = int(placement.node.split("-")[1])
            for gpu in placement.gpu_indices:
                assert (node, gpu) not in taken, f"{placement.pod} got cordoned GPU {gpu}"
