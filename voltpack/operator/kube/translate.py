"""Kubernetes objects (as the API returns them, plain dicts) to voltpack's domain types."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from voltpack.model.cluster import MILLI_PER_GPU, Node
from voltpack.model.errors import InvalidRequestError
from voltpack.model.workload import Pod
from voltpack.operator.kube.conventions import (
    DURATION_ANNOTATION,
    GPU_INDICES_ANNOTATION,
    GPU_MILLI_ANNOTATION,
    GPU_MODEL_LABELS,
    GPU_MODELS_ANNOTATION,
    GPU_RESOURCE,
    NICS_ANNOTATION,
    PRIORITY_ANNOTATION,
    RDMA_PERCENT_ANNOTATION,
    RDMA_PERCENT_RESOURCE,
    SCHEDULER_NAME,
)
from voltpack.operator.kube.node_facts import resource_amount
from voltpack.operator.kube.pod_constraints import pod_constraints
from voltpack.operator.kube.pod_requests import effective_requests, quantity

MIB = 2**20


def pod_key(pod: dict[str, Any]) -> str:
    """`namespace/name` of a pod object."""
    meta = pod["metadata"]
    return f"{meta.get('namespace', 'default')}/{meta['name']}"


def _quantity(value: Any, where: str) -> Decimal:
    return quantity(value, where)


def _sum_resource(pod: dict[str, Any], resource: str, key: str) -> Decimal:
    total = Decimal(0)
    for index, container in enumerate(pod.get("spec", {}).get("containers") or []):
        resources = container.get("resources") or {}
        amounts = resources.get("requests") or {}
        value = amounts.get(resource, (resources.get("limits") or {}).get(resource))
        if value is not None:
            total += _quantity(value, f"pod {key}: containers[{index}] {resource}")
    return total


def pod_from_k8s(pod: dict[str, Any]) -> Pod:
    """The voltpack request of a pod: its effective requests (init containers, sidecars,
    pod-level resources and overhead counted as kube-scheduler counts them), whole GPUs or a GPU
    share, and the constraints of its spec.

    Raises InvalidRequestError naming the pod and the field when the pod asks for something
    voltpack cannot understand.
    """
    key = pod_key(pod)
    annotations = pod["metadata"].get("annotations") or {}
    requests = effective_requests(pod, key)
    num_gpu = int(requests.get(GPU_RESOURCE, 0))
    gpu_milli = MILLI_PER_GPU if num_gpu else 0
    share = annotations.get(GPU_MILLI_ANNOTATION)
    if share is not None:
        try:
            gpu_milli = int(share)
        except ValueError:
            raise InvalidRequestError(
                f"pod {key}: annotation {GPU_MILLI_ANNOTATION}={share!r} is not an integer"
            ) from None
        if not 1 <= gpu_milli <= MILLI_PER_GPU or num_gpu > 1:
            raise InvalidRequestError(
                f"pod {key}: annotation {GPU_MILLI_ANNOTATION}={share} needs a value in "
                f"1..1000 and at most one {GPU_RESOURCE}"
            )
        num_gpu = 1
    models = tuple(m for m in (annotations.get(GPU_MODELS_ANNOTATION) or "").split("|") if m)
    rdma_percent = _rdma_percent(pod, key, annotations)
    resources = tuple(
        sorted(
            (name, resource_amount(name, amount, f"pod {key}: {name}"))
            for name, amount in requests.items()
            if name != "cpu"
        )
    )
    try:
        return Pod(
            name=key,
            cpu_milli=math.ceil(requests.get("cpu", Decimal(0)) * 1000),
            # floored like the node's: pods that fit in bytes (the exact check, `resources`)
            # then also fit in MiB, which the packing scores read
            memory_mib=int(requests.get("memory", Decimal(0)) / MIB),
            num_gpu=num_gpu,
            gpu_milli=gpu_milli,
            gpu_models=models,
            priority=pod_priority(pod),
            rdma_percent=rdma_percent,
            resources=resources,
            constraints=pod_constraints(pod, key),
        )
    except ValidationError as exc:
        raise InvalidRequestError(str(exc.errors()[0]["msg"])) from None


PRIORITY_OWNER_KINDS = ("GPUJob", "InferenceService")
"""voltpack kinds whose pods carry their priority in `PRIORITY_ANNOTATION` (set by the operator
from the owner's spec); any other pod's annotation is ignored, so a plain pod cannot raise its
own priority past what its PriorityClass gives."""


def _owned_by_voltpack(meta: dict[str, Any]) -> bool:
    return any(
        owner.get("controller")
        and owner.get("kind") in PRIORITY_OWNER_KINDS
        and str(owner.get("apiVersion", "")).startswith("voltpack.io/")
        for owner in meta.get("ownerReferences") or []
    )


def pod_priority(pod: dict[str, Any]) -> int:
    """The `voltpack.io/priority` annotation of a pod a GPUJob or InferenceService controls,
    else the pod's `spec.priority` (from its PriorityClass; 0 without)."""
    meta = pod.get("metadata") or {}
    text = (meta.get("annotations") or {}).get(PRIORITY_ANNOTATION)
    if text is None or not _owned_by_voltpack(meta):
        return int(pod.get("spec", {}).get("priority") or 0)
    try:
        return int(text)
    except ValueError:
        raise InvalidRequestError(
            f"pod {meta.get('namespace', 'default')}/{meta.get('name')}: annotation "
            f"{PRIORITY_ANNOTATION}={text!r} is not an integer"
        ) from None


def _rdma_percent(pod: dict[str, Any], key: str, annotations: dict[str, str]) -> int:
    """The pod's share of one RDMA NIC: the annotation, else the extended resource; 0 without."""
    text = annotations.get(RDMA_PERCENT_ANNOTATION)
    if text is not None:
        where = f"pod {key}: annotation {RDMA_PERCENT_ANNOTATION}={text!r}"
        try:
            value = Decimal(text.strip())
        except ArithmeticError:
            raise InvalidRequestError(f"{where} is not an integer") from None
    else:
        value = _sum_resource(pod, RDMA_PERCENT_RESOURCE, key)
        where = f"pod {key}: resource {RDMA_PERCENT_RESOURCE}={value}"
    if value != value.to_integral_value() or not 0 <= value <= 100:
        raise InvalidRequestError(
            f"{where} is not a share of one RDMA NIC's bandwidth; use an integer in 0..100"
        )
    return int(value)


def pod_nics(pod: dict[str, Any]) -> tuple[str, ...]:
    """Names of the NICs voltpack recorded on a pod before binding it (may be empty)."""
    text = (pod["metadata"].get("annotations") or {}).get(NICS_ANNOTATION) or ""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def gpu_indices(pod: dict[str, Any]) -> tuple[int, ...] | None:
    """GPU indices voltpack recorded on a pod before binding it, or None."""
    text = (pod["metadata"].get("annotations") or {}).get(GPU_INDICES_ANNOTATION)
    if text is None:
        return None
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        return None


def node_from_k8s(node: dict[str, Any]) -> Node:
    """An empty voltpack node from a Kubernetes node's allocatable resources and labels."""
    name = node["metadata"]["name"]
    allocatable = node.get("status", {}).get("allocatable") or {}
    labels = node["metadata"].get("labels") or {}
    gpus = int(_quantity(allocatable.get(GPU_RESOURCE, "0"), f"node {name}: {GPU_RESOURCE}"))
    model = next((labels[label] for label in GPU_MODEL_LABELS if labels.get(label)), None)
    return Node.empty(
        name=name,
        cpu_milli=math.ceil(_quantity(allocatable.get("cpu", "0"), f"node {name}: cpu") * 1000),
        memory_mib=int(_quantity(allocatable.get("memory", "0"), f"node {name}: memory") / MIB),
        gpu_count=gpus,
        gpu_model=model or ("unknown" if gpus else None),
    )


def node_to_k8s(node: Node) -> dict[str, Any]:
    """A Kubernetes node object for a voltpack node (used to seed the emulator)."""
    resources = {
        "cpu": f"{node.cpu_milli}m",
        "memory": f"{node.memory_mib}Mi",
        "pods": "110",
        GPU_RESOURCE: str(node.gpu_count),
    }
    labels = {"kubernetes.io/hostname": node.name}
    if node.gpu_model:
        labels[GPU_MODEL_LABELS[0]] = node.gpu_model
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": labels},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_to_k8s(
    pod: Pod, name: str, *, duration_s: float | None = None, scheduler: str = SCHEDULER_NAME
) -> dict[str, Any]:
    """A Kubernetes pod asking for what `pod` asks for (used to replay traces through the API)."""
    resources: dict[str, Any] = {
        "requests": {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    }
    annotations = {}
    if pod.is_gpu_sharing:
        annotations[GPU_MILLI_ANNOTATION] = str(pod.gpu_milli)
    elif pod.num_gpu:
        resources["requests"][GPU_RESOURCE] = str(pod.num_gpu)
        resources["limits"] = {GPU_RESOURCE: str(pod.num_gpu)}
    if pod.gpu_models:
        annotations[GPU_MODELS_ANNOTATION] = "|".join(pod.gpu_models)
    if duration_s is not None:
        annotations[DURATION_ANNOTATION] = f"{duration_s:g}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "main", "image": "trace-replay:1", "resources": resources}],
        },
    }
