"""Writes the scheduler's decisions into the cluster: GPU indices, bindings, Events."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import CoreV1Api

from voltpack.model.decision import Placement
from voltpack.operator.conventions import GPU_INDICES_ANNOTATION, SCHEDULER_NAME
from voltpack.operator.kube import api_message, call_json

log = logging.getLogger(__name__)


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


def bind_gang(core: CoreV1Api, placements: Sequence[Placement]) -> dict[str, str]:
    """Record each pod's GPUs, then bind every pod of the gang; return failures by pod.

    All GPU annotations are written before the first binding, so a gang whose annotation fails
    binds no pod at all. A binding that fails after others succeeded (the pod was deleted, or
    bound elsewhere meanwhile) is reported; the next cycle sees the cluster as it is.
    """
    failures: dict[str, str] = {}
    for placement in placements:
        namespace, name = _split(placement.pod)
        patch = {
            "metadata": {
                "annotations": {
                    GPU_INDICES_ANNOTATION: ",".join(str(g) for g in placement.gpu_indices)
                }
            }
        }
        try:
            call_json(core.patch_namespaced_pod, name, namespace, patch)
        except Exception as error:
            failures[placement.pod] = f"cannot record GPUs: {api_message(error)}"
    if failures:
        return failures
    for placement in placements:
        namespace, name = _split(placement.pod)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": placement.node},
        }
        try:
            call_json(core.create_namespaced_binding, namespace, body)
        except Exception as error:
            failures[placement.pod] = f"binding failed: {api_message(error)}"
    return failures


def record_event(
    core: CoreV1Api, pod: dict[str, Any], reason: str, message: str, kind: str = "Warning"
) -> None:
    """A core/v1 Event on the pod, e.g. FailedScheduling with the decision's reason."""
    meta = pod["metadata"]
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta.get("namespace")},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        },
        "reason": reason,
        "message": message[:1024],
        "type": kind,
        "source": {"component": SCHEDULER_NAME},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        call_json(core.create_namespaced_event, meta.get("namespace") or "default", body)
    except Exception as error:
        log.warning("event for %s not recorded: %s", meta["name"], error)
