"""The replica pods of an InferenceService: one pod per replica, for voltpack to place.

A replica of tensor-parallel degree k is one pod asking for k whole GPUs (`nvidia.com/gpu`),
restricted to the planned GPU type the way voltpack's pods name GPU models (the
`voltpack.io/gpu-models` annotation, listing the type's catalog name and aliases as node labels
spell them), scheduled by voltpack (`schedulerName: voltpack`), with the service's priority
(`spec.priority` as a pod priority, or its `priorityClassName`) and marked `inference` for the
power manager (slowing it costs latency).
"""

from __future__ import annotations

import re
from typing import Any

from voltpack.model.gpu_sku import default_catalog
from voltpack.model.resources import API_GROUP, API_VERSION
from voltpack.model.resources.inferenceservice import (
    PRIORITY_VALUES,
    InferenceServiceSpec,
    PlannedGroup,
)
from voltpack.operator.inference.plans import fingerprint, group_key
from voltpack.operator.kube.conventions import (
    GPU_MODELS_ANNOTATION,
    GPU_RESOURCE,
    INFERENCE_SERVICE_LABEL,
    MIN_MEMBERS_ANNOTATION,
    POD_GROUP_ANNOTATION,
    PRIORITY_ANNOTATION,
    SCHEDULER_NAME,
    TOPOLOGY_REQUIRED_ANNOTATION,
    WORKLOAD_ANNOTATION,
)

SERVICE_LABEL = INFERENCE_SERVICE_LABEL
"""On replica pods: the InferenceService's name (in the pod's namespace)."""
GROUP_LABEL = "voltpack.io/inference-group"
"""On replica pods: the replica group, e.g. `a10-tp4-unified`."""
ROLE_LABEL = "voltpack.io/inference-role"
"""On replica pods: unified, prefill or decode."""
GPU_TYPE_LABEL = "voltpack.io/gpu-type"
"""On replica pods: the planned GPU type (catalog name)."""
TEMPLATE_LABEL = "voltpack.io/replica-template"
"""On replica pods: a hash of what the pod was made from; a pod with another is replaced."""
KIND = "InferenceService"


def replica_name(service: str, group: PlannedGroup, index: int) -> str:
    """Name of replica `index` of a group, e.g. `chat-a10-tp4-unified-0`."""
    return f"{service}-{group_key(group)}-{index}"


def accepted_gpu_models(gpu_type: str) -> list[str]:
    """The GPU type's catalog name and aliases, also as valid label values (what a node's
    `voltpack.io/gpu-model` or `nvidia.com/gpu.product` label may say)."""
    sku = default_catalog().get(gpu_type)
    names: list[str] = []
    for name in (sku.name, *sku.aliases):
        for spelling in (name, re.sub(r"[^A-Za-z0-9._-]", "-", name)[:63]):
            if spelling not in names:
                names.append(spelling)
    return names


def template_hash(spec: InferenceServiceSpec) -> str:
    """What every replica pod of the service is made from besides its group."""
    return fingerprint(
        [
            spec.container.model_dump(mode="json"),
            spec.priority,
            spec.priority_class_name,
            spec.model,
        ]
    )


def kv_gang_name(service: str) -> str:
    """The gang of a split service's prefill and decode replicas (`<service>-kv`)."""
    return f"{service}-kv"


def kv_annotations(service: str, pool_size: int, level_label: str) -> dict[str, str]:
    """What keeps a split pool inside one domain of a level: one gang of all its replicas,
    placed whole (`voltpack.io/min-members`), required within `level_label`."""
    return {
        POD_GROUP_ANNOTATION: kv_gang_name(service),
        MIN_MEMBERS_ANNOTATION: str(pool_size),
        TOPOLOGY_REQUIRED_ANNOTATION: level_label,
    }


def _sizing_env(group: PlannedGroup) -> list[dict[str, str]]:
    """What the replica was sized for, for the server's flags (e.g. vLLM's
    `--max-model-len=$(VOLTPACK_MAX_CONTEXT_TOKENS)`, `--max-num-seqs=$(VOLTPACK_MAX_BATCH)`):
    only the bounds the plan has."""
    sizing = {
        "VOLTPACK_MAX_CONTEXT_TOKENS": group.context_tokens,
        "VOLTPACK_MAX_BATCH": group.max_batch,
        "VOLTPACK_PREFILL_CHUNK_TOKENS": group.prefill_chunk_tokens,
    }
    return [{"name": name, "value": str(value)} for name, value in sizing.items() if value]


def replica_pod(
    service: dict[str, Any],
    spec: InferenceServiceSpec,
    group: PlannedGroup,
    index: int,
    placement: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Replica `index` of `group`, owned by `service`; `placement`: annotations that keep a
    split pool together (`kv_annotations`)."""
    meta = service["metadata"]
    container = spec.container
    env = [
        {"name": "VOLTPACK_SERVICE", "value": meta["name"]},
        {"name": "VOLTPACK_MODEL", "value": spec.model},
        {"name": "VOLTPACK_ROLE", "value": group.role},
        {"name": "VOLTPACK_GPU_TYPE", "value": group.gpu_type},
        {"name": "VOLTPACK_TENSOR_PARALLEL", "value": str(group.tensor_parallel)},
        *_sizing_env(group),
    ]
    given = {variable.name for variable in container.env}
    env = [e for e in env if e["name"] not in given]
    env += [{"name": v.name, "value": v.value} for v in container.env]
    requests: dict[str, str] = {}
    if container.cpu_milli is not None:
        requests["cpu"] = f"{container.cpu_milli}m"
    if container.memory_mib is not None:
        requests["memory"] = f"{container.memory_mib}Mi"
    resources: dict[str, Any] = {"limits": {GPU_RESOURCE: str(group.tensor_parallel)}}
    if requests:
        resources["requests"] = requests
    server: dict[str, Any] = {
        "name": "server",
        "image": container.image,
        "env": env,
        "resources": resources,
    }
    if container.command:
        server["command"] = list(container.command)
    if container.args:
        server["args"] = list(container.args)
    # a real API server refuses a literal spec.priority: without a PriorityClass the priority
    # travels in voltpack's annotation, which only voltpack-owned pods may carry
    priority: dict[str, Any] = (
        {"priorityClassName": spec.priority_class_name} if spec.priority_class_name else {}
    )
    priority_annotation = (
        {}
        if spec.priority_class_name
        else {PRIORITY_ANNOTATION: str(PRIORITY_VALUES[spec.priority])}
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": replica_name(meta["name"], group, index),
            "namespace": meta["namespace"],
            "labels": {
                SERVICE_LABEL: meta["name"],
                GROUP_LABEL: group_key(group),
                ROLE_LABEL: group.role,
                GPU_TYPE_LABEL: group.gpu_type,
                TEMPLATE_LABEL: template_hash(spec),
            },
            "annotations": {
                WORKLOAD_ANNOTATION: "inference",
                GPU_MODELS_ANNOTATION: "|".join(accepted_gpu_models(group.gpu_type)),
                **priority_annotation,
                **(placement or {}),
            },
            "ownerReferences": [
                {
                    "apiVersion": f"{API_GROUP}/{API_VERSION}",
                    "kind": KIND,
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                }
            ],
        },
        "spec": {"schedulerName": SCHEDULER_NAME, **priority, "containers": [server]},
    }


def owner_uid(pod: dict[str, Any]) -> str | None:
    """UID of the InferenceService that owns a replica pod (None if none does)."""
    for owner in pod["metadata"].get("ownerReferences") or []:
        if owner.get("kind") == KIND:
            return str(owner.get("uid") or "")
    return None
