"""A Kubernetes node to what kube-scheduler's filters read of it: labels, taints, the cordon,
the pod count it allows and every allocatable resource."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from voltpack.model.constraints.node_rules import NodeFacts
from voltpack.model.constraints.taints import Taint
from voltpack.operator.kube.pod_requests import quantity

log = logging.getLogger(__name__)

MALFORMED_TAINT = Taint(key="voltpack.io/malformed-taint", effect="NoSchedule")
"""Stands for a taint voltpack cannot read: no pod tolerates it (fail closed), unless it
tolerates every taint."""


def resource_amount(name: str, value: Any, where: str) -> int:
    """A resource quantity as kube-scheduler compares it: millicores for CPU, else the
    quantity's integer value rounded up (bytes for memory, storage and hugepages)."""
    amount = quantity(value, where)
    return math.ceil(amount * 1000) if name == "cpu" else math.ceil(amount)


def _taints(node: Mapping[str, Any], name: str) -> tuple[Taint, ...]:
    found = []
    for index, raw in enumerate((node.get("spec") or {}).get("taints") or []):
        try:
            found.append(
                Taint(key=raw.get("key"), value=raw.get("value") or "", effect=raw.get("effect"))
            )
        except (ValidationError, AttributeError):
            log.warning("node %s: spec.taints[%d] %r is malformed; no pod tolerates it",
                        name, index, raw)  # fmt: skip
            found.append(MALFORMED_TAINT)
    return tuple(found)


def node_facts_from_k8s(node: Mapping[str, Any]) -> NodeFacts:
    """What the filters read of a node; raises InvalidRequestError naming a bad quantity."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name"))
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    resources = tuple(
        sorted(
            (
                str(resource),
                resource_amount(resource, value, f"node {name}: allocatable {resource}"),
            )
            for resource, value in allocatable.items()
            if resource not in ("cpu", "pods")
        )
    )
    pods = allocatable.get("pods")
    allowed = resource_amount("pods", pods, f"node {name}: allocatable pods") if pods else 0
    return NodeFacts(
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        taints=_taints(node, name),
        unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
        allowed_pods=allowed,
        resources=resources,
    )
