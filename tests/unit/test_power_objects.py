"""Pure conversions of the operator's power loop: which GPUs are high priority or
throughput-bound."""

from __future__ import annotations

from typing import Any

from voltpack.operator.power_objects import gpus_running, high_priority_gpus, is_throughput_bound


def pod(
    name: str, node: str, priority: int = 0, indices: str | None = None,
    owner: str | None = None, workload: str | None = None, gpus: int = 1,
) -> dict[str, Any]:  # fmt: skip
    annotations = {}
    if indices is not None:
        annotations["voltpack.io/gpu-indices"] = indices
    if workload is not None:
        annotations["voltpack.io/workload"] = workload
    meta: dict[str, Any] = {"name": name, "namespace": "default", "annotations": annotations}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x", "apiVersion": "v1", "uid": "u"}]
    resources = {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "priority": priority,
            "containers": [{"name": "c", "resources": resources}],
        },
        "status": {"phase": "Running"},
    }


def test_inference_is_request_driven_and_everything_else_throughput_bound() -> None:
    assert not is_throughput_bound(pod("a", "n", owner="ReplicaSet"))
    assert not is_throughput_bound(pod("b", "n", owner="StatefulSet"))
    assert is_throughput_bound(pod("c", "n", owner="GPUJob"))
    assert is_throughput_bound(pod("d", "n"))
    assert not is_throughput_bound(pod("e", "n", owner="Job", workload="inference"))
    assert is_throughput_bound(pod("f", "n", owner="ReplicaSet", workload="training"))


def test_gpus_by_annotation_or_whole_node() -> None:
    pods = [
        pod("a", "n1", priority=2000, indices="0,3"),
        pod("b", "n2", priority=2000),
        pod("c", "n3", priority=2000, gpus=0),  # asks for no GPU: protects none
        pod("d", "n4", priority=10, indices="1"),
    ]
    indices, whole = high_priority_gpus(pods, 1000)
    assert indices == {"n1": {0, 3}} and whole == {"n2"}
    indices, whole = gpus_running(pods, is_throughput_bound)
    assert indices == {"n1": {0, 3}, "n4": {1}} and whole == {"n2"}
