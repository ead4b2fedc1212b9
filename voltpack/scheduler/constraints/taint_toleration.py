"""TaintToleration: a node with a `NoSchedule` or `NoExecute` taint the pod does not tolerate
is no place for it. `PreferNoSchedule` taints only score (`preferences.py`)."""

from __future__ import annotations

import numpy as np

from voltpack.model.constraints.node_rules import BoolArray, NodeRules
from voltpack.model.constraints.taints import FILTERING_EFFECTS, Toleration, tolerated
from voltpack.model.workload import Pod
from voltpack.scheduler.constraints.check import Check

REASON = "node(s) had untolerated taint(s)"


def untolerated(
    rules: NodeRules,
    tolerations: tuple[Toleration, ...],
    effects: frozenset[str] = FILTERING_EFFECTS,
) -> BoolArray:
    """Nodes with a taint of `effects` that none of `tolerations` tolerates (kept per set of
    tolerations)."""
    key = ("untolerated", tolerations, effects)
    cached = rules.static.get(key)
    if isinstance(cached, np.ndarray):
        return cached
    mask = np.zeros(rules.node_count, dtype=np.bool_)
    for taint, rows in rules.distinct_taints():
        if taint.effect in effects and not tolerated(taint, tolerations):
            mask |= rows
    rules.static[key] = mask
    return mask


def checks(rules: NodeRules, pod: Pod) -> list[Check]:
    tolerations = pod.constraints.tolerations if pod.constraints is not None else ()
    bad = untolerated(rules, tolerations)
    return [Check(REASON, ~bad)] if bad.any() else []
