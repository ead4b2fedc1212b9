"""PodDisruptionBudgets as kube-scheduler's preemption reads them: evicting a pod that a
budget selects uses one of the disruptions its status allows; a pod beyond them violates the
budget. Preemption prefers victims that violate none (it may still take one that does, when
nothing else makes room, as kube-scheduler may)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from voltpack.model.errors import InvalidRequestError
from voltpack.operator.kube.pod_constraints import label_selector

log = logging.getLogger(__name__)


def _selecting(budget: dict[str, Any], pod: dict[str, Any]) -> bool:
    meta = budget.get("metadata") or {}
    if meta.get("namespace") != pod["metadata"].get("namespace", "default"):
        return False
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    try:
        selector = label_selector((budget.get("spec") or {}).get("selector"), name, "spec.selector")
    except InvalidRequestError as exc:
        log.warning("PodDisruptionBudget %s ignored: %s", name, exc)
        return False
    if selector is None or selector.is_empty:  # selects nothing, as kube-scheduler reads it
        return False
    return selector.matches(pod["metadata"].get("labels") or {})


def budget_violations(pods: Sequence[dict[str, Any]], budgets: Iterable[dict[str, Any]]) -> int:
    """How many of `pods` (one gang) could not be evicted within their budgets' allowance."""
    violations = 0
    for budget in budgets:
        disrupted = set((budget.get("status") or {}).get("disruptedPods") or {})
        allowed = int((budget.get("status") or {}).get("disruptionsAllowed") or 0)
        for pod in pods:
            if pod["metadata"].get("name") in disrupted or not _selecting(budget, pod):
                continue
            allowed -= 1
            if allowed < 0:
                violations += 1
    return violations
