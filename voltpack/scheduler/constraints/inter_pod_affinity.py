"""InterPodAffinity, required terms both ways, as kube-scheduler evaluates them:

- the pod's affinity: every term's topology domain on the node must hold a pod that matches
  all of the pod's affinity terms; a node without a term's key fails; when no pod anywhere
  matches them and the pod matches its own terms, any node with the keys passes (the first
  pod of a group);
- the pod's anti-affinity: no pod a term selects in the node's domain of that term's key;
- the placed pods' anti-affinity: no placed pod whose term selects this pod shares its term's
  domain with the node.

A term's namespaces are its own, those its namespace selector matches, or the pod's namespace
when it names neither (filled in by the translation).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from voltpack.model.constraints.label_selectors import selector_matches
from voltpack.model.constraints.node_rules import (
    ABSENT,
    AllSelected,
    BoolArray,
    NodeRules,
    PodsSelected,
)
from voltpack.model.constraints.pod_constraints import PodAffinityTerm, PodConstraints
from voltpack.model.workload import Pod
from voltpack.scheduler.constraints.check import Check

AFFINITY_REASON = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"


def incoming_pods(
    term: PodAffinityTerm, namespace_labels: Mapping[str, Mapping[str, str]]
) -> PodsSelected:
    """The placed pods an incoming pod's term counts: its namespaces with those its namespace
    selector matches merged in (and any namespace when the selector matches no labels, as
    kube-scheduler reads it)."""
    selected = {
        ns
        for ns, labels in namespace_labels.items()
        if selector_matches(term.namespace_selector, labels)
    }
    return PodsSelected(
        term.selector,
        term.namespaces | selected,
        any_namespace=selector_matches(term.namespace_selector, {}),
    )


def _domain_mask(rules: NodeRules, key: str, carriers: BoolArray) -> BoolArray:
    """Nodes sharing a value of label `key` with one of `carriers` (nodes with the key)."""
    column = rules.label_column(key)
    values = np.unique(column.ids[carriers & column.present])
    if values.size == 0:
        return np.zeros(rules.node_count, dtype=np.bool_)
    shared: BoolArray = np.isin(column.ids, values) & (column.ids != ABSENT)
    return shared


def affinity_passed(rules: NodeRules, constraints: PodConstraints) -> BoolArray:
    terms = constraints.required_affinity
    passed = np.ones(rules.node_count, dtype=np.bool_)
    for term in terms:
        passed &= rules.label_column(term.topology_key).present
    matchers = tuple(incoming_pods(term, rules.namespace_labels) for term in terms)
    per_node = rules.placed.per_node(AllSelected(matchers))
    any_key = np.zeros(rules.node_count, dtype=np.bool_)
    for term in terms:
        any_key |= rules.label_column(term.topology_key).present
    if not (any_key & (per_node > 0)).any() and all(m.selects(constraints) for m in matchers):
        return passed  # the first pod of its group: no pod to be near yet
    for term in terms:
        passed &= _domain_mask(rules, term.topology_key, per_node > 0)
    return passed


def anti_affinity_passed(rules: NodeRules, constraints: PodConstraints) -> BoolArray:
    passed = np.ones(rules.node_count, dtype=np.bool_)
    for term in constraints.required_anti_affinity:
        per_node = rules.placed.per_node(incoming_pods(term, rules.namespace_labels))
        if per_node.any():
            passed &= ~_domain_mask(rules, term.topology_key, per_node > 0)
    return passed


def existing_anti_affinity_passed(rules: NodeRules, constraints: PodConstraints) -> BoolArray:
    passed = np.ones(rules.node_count, dtype=np.bool_)
    labels = constraints.label_map
    for term, carriers in rules.placed.anti_terms.items():
        if term.selects(constraints.namespace, labels, rules.namespace_labels):
            passed &= ~_domain_mask(rules, term.topology_key, carriers > 0)
    return passed


def checks(rules: NodeRules, pod: Pod) -> list[Check]:
    """The plugin's three requirements in its order; a node fails by the first it misses."""
    constraints = pod.constraints
    if constraints is None:
        return []
    found = []
    undecided = np.ones(rules.node_count, dtype=np.bool_)
    for reason, wanted, passed_by in (
        (AFFINITY_REASON, bool(constraints.required_affinity), affinity_passed),
        (ANTI_AFFINITY_REASON, bool(constraints.required_anti_affinity), anti_affinity_passed),
        (
            EXISTING_ANTI_AFFINITY_REASON,
            bool(rules.placed.anti_terms),
            existing_anti_affinity_passed,
        ),
    ):
        if not wanted:
            continue
        passed = passed_by(rules, constraints)
        found.append(Check(reason, passed | ~undecided))
        undecided &= passed
    return found
