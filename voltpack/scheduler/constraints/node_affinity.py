"""NodeAffinity: `nodeSelector` and required node affinity (terms ORed, requirements ANDed;
`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`; `matchFields` on `metadata.name`).

As kube-scheduler's PreFilter does, when every required term names nodes by `metadata.name`
(`In`), only those nodes are considered; the others fail as "didn't satisfy plugin(s)
[NodeAffinity]".
"""

from __future__ import annotations

import numpy as np

from voltpack.model.constraints.label_selectors import (
    NODE_NAME_FIELD,
    NodeSelectorRequirement,
    NodeSelectorTerm,
)
from voltpack.model.constraints.node_rules import BoolArray, NodeRules
from voltpack.model.constraints.pod_constraints import PodConstraints
from voltpack.model.workload import Pod
from voltpack.scheduler.constraints.check import Check

REASON = "node(s) didn't match Pod's node affinity/selector"
PREFILTER_REASON = "node(s) didn't satisfy plugin(s) [NodeAffinity]"


def requirement_mask(
    rules: NodeRules, requirement: NodeSelectorRequirement, *, field: bool = False
) -> BoolArray:
    """Nodes meeting one requirement (on a label, or on the node's name when `field`)."""
    if field:
        names = np.asarray(rules.names, dtype=object)
        equal: BoolArray = names == requirement.values[0]
        return equal if requirement.operator == "In" else ~equal
    op = requirement.operator
    if op in ("Gt", "Lt"):
        numbers, valid = rules.integer_column(requirement.key)
        compared = numbers > requirement.bound if op == "Gt" else numbers < requirement.bound
        result: BoolArray = valid & compared
        return result
    column = rules.label_column(requirement.key)
    if op == "Exists":
        return column.present
    if op == "DoesNotExist":
        return ~column.present
    listed = np.isin(column.ids, column.ids_of(requirement.values))
    return listed if op == "In" else ~listed


def term_mask(rules: NodeRules, term: NodeSelectorTerm) -> BoolArray:
    """Nodes matching a node selector term (none for a term without requirements; kept)."""
    key = ("node-term", term)
    cached = rules.static.get(key)
    if isinstance(cached, np.ndarray):
        return cached
    mask = np.zeros(rules.node_count, dtype=np.bool_)
    if term.match_expressions or term.match_fields:
        mask[:] = True
        for requirement in term.match_expressions:
            mask &= requirement_mask(rules, requirement)
        for requirement in term.match_fields:
            mask &= requirement_mask(rules, requirement, field=True)
    rules.static[key] = mask
    return mask


def terms_mask(rules: NodeRules, terms: tuple[NodeSelectorTerm, ...]) -> BoolArray:
    """Nodes matching any of `terms` (ORed)."""
    mask = np.zeros(rules.node_count, dtype=np.bool_)
    for term in terms:
        mask |= term_mask(rules, term)
    return mask


def required_mask(rules: NodeRules, constraints: PodConstraints) -> BoolArray:
    """Nodes the pod's node selector and required node affinity both allow."""
    mask = np.ones(rules.node_count, dtype=np.bool_)
    for key, value in constraints.node_selector:
        column = rules.label_column(key)
        mask &= np.isin(column.ids, column.ids_of((value,)))
    if constraints.required_node_terms is not None:
        mask &= terms_mask(rules, constraints.required_node_terms)
    return mask


def _prefiltered(rules: NodeRules, terms: tuple[NodeSelectorTerm, ...]) -> BoolArray | None:
    """The nodes PreFilter keeps when every term names nodes (`matchFields` In), else None."""
    names: set[str] | None = None
    for term in terms:
        named = [
            set(r.values)
            for r in term.match_fields
            if r.key == NODE_NAME_FIELD and r.operator == "In"
        ]
        if not named:
            return None
        term_names = set.intersection(*named)
        names = term_names if names is None else names | term_names
    if names is None:
        return None
    return np.fromiter((n in names for n in rules.names), dtype=np.bool_, count=rules.node_count)


def prefilter(rules: NodeRules, pod: Pod) -> Check | None:
    """The nodes kube-scheduler's PreFilter keeps for the pod, or None when it keeps all."""
    constraints = pod.constraints
    if constraints is None or not constraints.required_node_terms:
        return None
    kept = _prefiltered(rules, constraints.required_node_terms)
    return None if kept is None else Check(PREFILTER_REASON, kept)


def checks(rules: NodeRules, pod: Pod) -> list[Check]:
    constraints = pod.constraints
    if constraints is None or not constraints.has_node_affinity:
        return []
    return [Check(REASON, required_mask(rules, constraints))]
