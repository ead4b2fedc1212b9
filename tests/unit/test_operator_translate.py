"""Kubernetes objects to voltpack requests, snapshots and gangs (no server needed)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from voltpack.model import InvalidRequestError, Node
from voltpack.operator.kube.translate import (
    gpu_indices,
    node_from_k8s,
    node_to_k8s,
    pod_from_k8s,
    pod_priority,
)
from voltpack.operator.scheduling.cluster_view import build_snapshot, pending_work
from voltpack.policies.registry import make_strategy
from voltpack.scheduler.placement import Scheduler
from voltpack.scheduler.session import decide


def k8s_pod(
    name: str,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    gpus: int = 0,
    annotations: dict[str, str] | None = None,
    node: str | None = None,
    phase: str = "Pending",
    scheduler: str = "voltpack",
    created: str = "2026-01-01T00:00:00Z",
) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "image": "x", "resources": resources}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": annotations or {},
            "creationTimestamp": created,
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def test_pod_requests_are_translated() -> None:
    pod = pod_from_k8s(k8s_pod("a", cpu="500m", memory="2Gi", gpus=2))
    assert (pod.name, pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli) == (
        "default/a",
        500,
        2048,
        2,
        1000,
    )


def test_gpu_share_and_models_come_from_annotations() -> None:
    pod = pod_from_k8s(
        k8s_pod(
            "s",
            annotations={"voltpack.io/gpu-milli": "470", "voltpack.io/gpu-models": "T4|A10"},
        )
    )
    assert pod.is_gpu_sharing and pod.gpu_milli == 470
    assert pod.gpu_models == ("T4", "A10")


@pytest.mark.parametrize(
    ("pod", "words"),
    [
        (k8s_pod("q", cpu="lots"), ["default/q", "cpu", "'lots'"]),
        (k8s_pod("m", annotations={"voltpack.io/gpu-milli": "half"}), ["gpu-milli", "'half'"]),
        (k8s_pod("r", annotations={"voltpack.io/gpu-milli": "1500"}), ["1..1000"]),
        (
            k8s_pod("t", gpus=2, annotations={"voltpack.io/gpu-milli": "300"}),
            ["at most one"],
        ),
    ],
)
def test_bad_pod_requests_are_named(pod: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(InvalidRequestError) as error:
        pod_from_k8s(pod)
    for word in words:
        assert word in str(error.value)


def test_node_round_trip() -> None:
    node = Node.empty("g1", cpu_milli=96_000, memory_mib=393_216, gpu_count=8, gpu_model="G2")
    back = node_from_k8s(node_to_k8s(node))
    assert back == node


def test_snapshot_subtracts_bound_running_pods_on_their_recorded_gpus() -> None:
    nodes = [node_to_k8s(Node.empty("n1", 32_000, 65_536, 4, "T4"))]
    pods = [
        k8s_pod(
            "a", gpus=1, node="n1", phase="Running", annotations={"voltpack.io/gpu-indices": "2"}
        ),
        k8s_pod("b", node="n1", phase="Succeeded", gpus=1),
        k8s_pod(
            "c",
            node="n1",
            phase="Running",
            annotations={"voltpack.io/gpu-milli": "300", "voltpack.io/gpu-indices": "0"},
        ),
    ]
    snapshot = build_snapshot(nodes, pods)
    assert snapshot.gpu_free_milli[0].tolist() == [700, 1000, 0, 1000]
    assert snapshot.cpu_free_milli[0] == 30_000
    assert gpu_indices(pods[0]) == (2,)


def test_pending_work_groups_gangs_and_holds_incomplete_ones() -> None:
    gang = {"voltpack.io/pod-group": "g", "voltpack.io/min-members": "3"}
    pods = [
        k8s_pod("g-0", annotations=gang),
        k8s_pod("g-1", annotations=gang),
        k8s_pod("solo", created="2025-12-31T00:00:00Z"),
        k8s_pod("other", scheduler="default-scheduler"),
        k8s_pod("bound", node="n1"),
    ]
    work = pending_work(pods)
    assert [group.name for group in work.groups] == ["default/solo"]
    assert "2 of 3 members" in work.held["default/g-0"]
    pods.append(k8s_pod("g-2", annotations=gang))
    work = pending_work(pods)
    assert [(g.name, g.min_member, len(g.pods)) for g in work.groups] == [
        ("default/solo", 1, 1),
        ("default/g", 3, 3),
    ]


def test_a_gang_that_does_not_fit_is_not_placed_and_says_why() -> None:
    nodes = [node_to_k8s(Node.empty(f"n{i}", 32_000, 65_536, 2, "T4")) for i in range(3)]
    gang = {"voltpack.io/pod-group": "big"}
    pods = [k8s_pod(f"w{i}", gpus=2, annotations=gang) for i in range(4)]
    snapshot = build_snapshot(nodes, [])
    scheduler = Scheduler.with_random_ranks(make_strategy("best-fit"), 3, np.random.default_rng(0))
    plan = decide(scheduler, snapshot, pending_work(pods), np.random.default_rng(0))
    assert plan.gangs == []
    assert set(plan.unplaced) == {f"default/w{i}" for i in range(4)}
    assert "only 3 of min 4" in plan.unplaced["default/w0"]
    assert snapshot.gpu_free_milli.sum() == 6000  # rolled back


def test_a_fitting_gang_is_placed_whole() -> None:
    nodes = [node_to_k8s(Node.empty(f"n{i}", 32_000, 65_536, 2, "T4")) for i in range(4)]
    gang = {"voltpack.io/pod-group": "big"}
    pods = [k8s_pod(f"w{i}", gpus=2, annotations=gang) for i in range(4)]
    snapshot = build_snapshot(nodes, [])
    scheduler = Scheduler.with_random_ranks(make_strategy("best-fit"), 4, np.random.default_rng(0))
    plan = decide(scheduler, snapshot, pending_work(pods), np.random.default_rng(0))
    assert len(plan.gangs) == 1
    assert sorted(p.node for p in plan.gangs[0]) == ["n0", "n1", "n2", "n3"]
    assert plan.unplaced == {}


def _priority_pod(annotation: str | None, owner_kind: str | None) -> dict[str, object]:
    meta: dict[str, object] = {"name": "p", "namespace": "default"}
    if annotation is not None:
        meta["annotations"] = {"voltpack.io/priority": annotation}
    if owner_kind is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "voltpack.io/v1alpha1", "kind": owner_kind, "name": "o",
             "uid": "u", "controller": True}
        ]  # fmt: skip
    return {"metadata": meta, "spec": {"priority": 7}}


def test_priority_annotation_counts_only_on_pods_voltpack_controls() -> None:
    assert pod_priority(_priority_pod("1000", "GPUJob")) == 1000
    assert pod_priority(_priority_pod("1000", "InferenceService")) == 1000
    # a plain pod cannot raise its own priority past its PriorityClass's
    assert pod_priority(_priority_pod("1000", None)) == 7
    assert pod_priority(_priority_pod(None, "GPUJob")) == 7
    with pytest.raises(InvalidRequestError, match=r"voltpack\.io/priority='high'"):
        pod_priority(_priority_pod("high", "GPUJob"))
