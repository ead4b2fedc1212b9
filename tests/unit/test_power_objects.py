"""Pure conversions of the operator's power loop: which GPUs are high priority or
throughput-bound."""

from __future__ import annotations

from typing import Any

from voltpack.operator.kube.conventions import MANUAL_CAP_ANNOTATION
from voltpack.operator.power.objects import (
    gpus_running,
    high_priority_gpus,
    is_throughput_bound,
    resolve_domains,
)
from voltpack.policies.schema import PowerSpec


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


def _budget(name: str, budget_w: float, annotations: dict[str, str] | None = None) -> Any:
    return {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"nodeSelector": {"matchLabels": {"row": name}}, "budgetW": budget_w},
    }


def test_a_manual_cap_lowers_the_budget_the_controller_keeps() -> None:
    labels = {"n1": {"row": "a"}, "n2": {"row": "b"}, "n3": {"row": "c"}, "n4": {"row": "d"}}
    budgets = [
        _budget("a", 10_000, {MANUAL_CAP_ANNOTATION: "6000"}),
        _budget("b", 10_000, {MANUAL_CAP_ANNOTATION: "60000"}),  # above the budget: no effect
        _budget("c", 10_000, {MANUAL_CAP_ANNOTATION: "lots"}),  # not a number: ignored
        _budget("d", 10_000, {MANUAL_CAP_ANNOTATION: "-5"}),  # not positive: ignored
    ]
    domains = resolve_domains(PowerSpec(), budgets, labels)
    budget_w = {d.name: d.budget_w for d in domains.tree.domains}
    assert budget_w == {"a": 6000, "b": 10_000, "c": 10_000, "d": 10_000}
    assert not domains.invalid
