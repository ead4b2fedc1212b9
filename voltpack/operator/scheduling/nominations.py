"""Preemption the Kubernetes way, on the preemptor's side: a gang placed by evicting others is
not bound while its victims still run (their GPUs stay in use until their pods are gone); its
pods get `status.nominatedNodeName`, and until the victims have terminated the gang may not
preempt anyone else (kube-scheduler's `PodEligibleToPreemptOthers`). Once they are gone, the gang
is placed like any other and bound.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes.client import CoreV1Api

from voltpack.model.decision import Placement
from voltpack.operator.kube.pod_conditions import patch_pod_status
from voltpack.operator.kube.translate import pod_key, pod_priority
from voltpack.operator.scheduling.queues import gang_key

log = logging.getLogger(__name__)


def _priority(pod: dict[str, Any]) -> int:
    try:
        return pod_priority(pod)
    except Exception:  # a malformed annotation: the pod's spec priority decides
        return int((pod.get("spec") or {}).get("priority") or 0)


def awaiting_victims(pods: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Pending gangs with a nominated node that still holds a terminating pod of lower
    priority, by gang name, with the reason they wait."""
    pods = list(pods)
    terminating: dict[str, list[tuple[int, str]]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and pod["metadata"].get("deletionTimestamp"):
            terminating.setdefault(node, []).append((_priority(pod), pod_key(pod)))
    found: dict[str, str] = {}
    for pod in pods:
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        if not nominated or (pod.get("spec") or {}).get("nodeName"):
            continue
        priority = _priority(pod)
        leaving = sorted(key for p, key in terminating.get(nominated, []) if p < priority)
        if leaving:
            found[gang_key(pod)] = (
                f"waiting for the pods it preempted to terminate on its nominated node "
                f"{nominated} ({', '.join(leaving[:3])}{', ...' if len(leaving) > 3 else ''})"
            )
    return found


def nominate(
    core: CoreV1Api, placements: Iterable[Placement], by_key: Mapping[str, dict[str, Any]]
) -> int:
    """Write each placed pod's node as its `status.nominatedNodeName`; returns how many."""
    written = 0
    for placement in placements:
        pod = by_key.get(placement.pod)
        if pod is None or (pod.get("status") or {}).get("nominatedNodeName") == placement.node:
            continue
        patch = {"status": {"nominatedNodeName": placement.node}}
        written += patch_pod_status(core, pod, patch, "nominatedNodeName")
    return written
