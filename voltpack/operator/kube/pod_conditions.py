"""The `PodScheduled` condition as kube-scheduler writes it on a pod that waits: status False,
reason `Unschedulable` (or `SchedulingGated` for a pod with scheduling gates) and the message
of why. Cluster-autoscaler and Karpenter read exactly this to add nodes; `kubectl describe`
shows it."""

from __future__ import annotations

import logging
import time
from typing import Any

from kubernetes.client import CoreV1Api

from voltpack.operator.kube.client import api_message, call_json, status_code
from voltpack.operator.kube.timestamps import rfc3339

log = logging.getLogger(__name__)

UNSCHEDULABLE = "Unschedulable"
SCHEDULING_GATED = "SchedulingGated"
CONDITION = "PodScheduled"


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's `PodScheduled` condition, if it has one."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == CONDITION:
            return condition
    return None


def unscheduled_patch(pod: dict[str, Any], reason: str, message: str) -> dict[str, Any] | None:
    """The status patch that says the pod waits (None when the pod says so already)."""
    current = scheduled_condition(pod) or {}
    if (current.get("status"), current.get("reason"), current.get("message")) == (
        "False",
        reason,
        message,
    ):
        return None
    changed = current.get("status") != "False"
    since = current.get("lastTransitionTime") if not changed else None
    condition = pod_condition(CONDITION, "False", reason, message, since)
    return {"status": {"conditions": [condition]}}


def pod_condition(
    kind: str, status: str, reason: str, message: str, since: str | None = None
) -> dict[str, Any]:
    """One pod condition as a scheduler writes it: no probe time, and the transition at
    `since` (a status kept) or now (a status changed)."""
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": since or rfc3339(time.time()),
    }


def mark_unscheduled(core: CoreV1Api, pod: dict[str, Any], reason: str, message: str) -> bool:
    """Write `PodScheduled=False` with `reason` and `message` on the pod (a strategic merge of
    its conditions, as kube-scheduler patches them); False when it could not be written."""
    patch = unscheduled_patch(pod, reason, message)
    return True if patch is None else patch_pod_status(core, pod, patch, CONDITION)


def patch_pod_status(
    core: CoreV1Api, pod: dict[str, Any], patch: dict[str, Any], what: str
) -> bool:
    """A strategic-merge patch of the pod's status; False (logged, unless the pod is gone)
    when it could not be written."""
    meta = pod["metadata"]
    try:
        call_json(
            core.patch_namespaced_pod_status,
            meta["name"],
            meta.get("namespace") or "default",
            patch,
        )
    except Exception as error:
        if status_code(error) != 404:  # a pod deleted meanwhile needs nothing written
            log.warning("%s of %s not written: %s", what, meta["name"], api_message(error))
        return False
    return True


DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def preemption_message(pod: dict[str, Any]) -> str:
    """kube-scheduler's message on a victim's `DisruptionTarget` condition."""
    scheduler = (pod.get("spec") or {}).get("schedulerName") or "voltpack"
    return f"{scheduler}: preempting to accommodate a higher priority pod"


def mark_disruption_target(core: CoreV1Api, pod: dict[str, Any], message: str) -> bool:
    """`DisruptionTarget=True` (reason `PreemptionByScheduler`) on a victim before it is deleted,
    so its job controller counts the failure as a disruption (Job `podFailurePolicy`); False
    when it could not be written (the deletion goes ahead all the same)."""
    condition = pod_condition(DISRUPTION_TARGET, "True", PREEMPTION_BY_SCHEDULER, message)
    return patch_pod_status(core, pod, {"status": {"conditions": [condition]}}, DISRUPTION_TARGET)
