"""Soft constraints as scores, beside voltpack's packing score: preferred node affinity,
`PreferNoSchedule` taints, `ScheduleAnyway` topology spread and preferred pod (anti-)affinity,
each normalised over the candidate nodes to 0..1 as kube-scheduler normalises its plugins'
scores to 0..100, then weighted (the policy file's `spec.scoring.preferences`, kube-scheduler's
default weights unless set).

A pod that prefers nothing, on nodes with no `PreferNoSchedule` taint, gets no preference
score: the packing strategy alone decides, exactly as before.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voltpack.model.constraints.node_rules import Matcher, NodeRules
from voltpack.model.constraints.pod_constraints import PodConstraints
from voltpack.model.constraints.taints import tolerated
from voltpack.model.snapshot import FloatArray, IntArray
from voltpack.model.workload import Pod
from voltpack.policies.preference_weights import PreferenceWeights
from voltpack.scheduler.constraints.inter_pod_affinity import incoming_pods
from voltpack.scheduler.constraints.node_affinity import term_mask
from voltpack.scheduler.constraints.pod_topology_spread import counted_pods


def _scaled(values: FloatArray, *, reverse: bool = False) -> FloatArray:
    """`values` over the candidates to 0..1 by their maximum (kube-scheduler's
    DefaultNormalizeScore), reversed when lower is better."""
    top = float(values.max(initial=0.0))
    if top <= 0:
        return np.ones_like(values) if reverse else np.zeros_like(values)
    scaled = values / top
    result: FloatArray = 1.0 - scaled if reverse else scaled
    return result


def _min_max(values: FloatArray) -> FloatArray:
    low, high = float(values.min(initial=0.0)), float(values.max(initial=0.0))
    if high - low <= 0:
        return np.zeros_like(values)
    result: FloatArray = (values - low) / (high - low)
    return result


def node_affinity_score(
    rules: NodeRules, constraints: PodConstraints, rows: IntArray
) -> FloatArray | None:
    if not constraints.preferred_node_terms:
        return None
    total = np.zeros(rows.size, dtype=np.float64)
    for preferred in constraints.preferred_node_terms:
        total += preferred.weight * term_mask(rules, preferred.term)[rows]
    return _scaled(total)


def taint_score(rules: NodeRules, pod: Pod, rows: IntArray) -> FloatArray | None:
    soft = [(t, m) for t, m in rules.distinct_taints() if t.effect == "PreferNoSchedule"]
    if not soft:
        return None
    tolerations = pod.constraints.tolerations if pod.constraints is not None else ()
    relevant = tuple(t for t in tolerations if t.effect in (None, "PreferNoSchedule"))
    counts = np.zeros(rows.size, dtype=np.float64)
    for taint, mask in soft:
        if not tolerated(taint, relevant):
            counts += mask[rows]
    return _scaled(counts, reverse=True)


def _in_domain(rules: NodeRules, key: str, matcher: Matcher, rows: IntArray) -> FloatArray:
    """Per candidate, the placed pods `matcher` selects in its domain of label `key` (0 for
    a node without the label)."""
    return _domain_of(rules, key, rules.placed.per_node(matcher), rows)


def _domain_of(rules: NodeRules, key: str, per_node: IntArray, rows: IntArray) -> FloatArray:
    """Per candidate, the sum of `per_node` over its domain of label `key` (0 without it)."""
    column = rules.label_column(key)
    by_domain = rules.domain_counts(key, per_node)
    ids = column.ids[rows]
    present = ids >= 0
    counts = np.zeros(rows.size, dtype=np.float64)
    counts[present] = by_domain[ids[present]]
    return counts


def spread_score(
    rules: NodeRules, constraints: PodConstraints, rows: IntArray
) -> FloatArray | None:
    soft = [c for c in constraints.spread if c.when_unsatisfiable == "ScheduleAnyway"]
    if not soft:
        return None
    total = np.zeros(rows.size, dtype=np.float64)
    for constraint in soft:
        matcher = counted_pods(constraint, constraints.namespace)
        total += _in_domain(rules, constraint.topology_key, matcher, rows)
    return 1.0 - _min_max(total)


def pod_affinity_score(
    rules: NodeRules, constraints: PodConstraints, rows: IntArray
) -> FloatArray | None:
    """kube-scheduler's InterPodAffinity score, both ways: the pod's preferred terms count the
    placed pods they select in each node's domain (+weight, -weight for anti-affinity), and
    the placed pods' terms that select the pod count toward their own domains (their required
    affinity with the hard weight, preferred affinity and anti-affinity with theirs); min-max
    scaled over the candidates. None when no term of either side is in play."""
    terms = [(w.weight, w.term) for w in constraints.preferred_affinity]
    terms += [(-w.weight, w.term) for w in constraints.preferred_anti_affinity]
    labels = constraints.label_map
    theirs = [
        (weight, term, carriers)
        for (term, weight), carriers in rules.placed.scored.items()
        if term.selects(constraints.namespace, labels, rules.namespace_labels)
    ]
    if not terms and not theirs:
        return None
    total = np.zeros(rows.size, dtype=np.float64)
    for weight, term in terms:
        matcher = incoming_pods(term, rules.namespace_labels)
        total += weight * _in_domain(rules, term.topology_key, matcher, rows)
    for weight, term, carriers in theirs:
        total += weight * _domain_of(rules, term.topology_key, carriers, rows)
    return _min_max(total)


def preference_scores(
    rules: NodeRules, pod: Pod, rows: IntArray, weights: PreferenceWeights
) -> FloatArray | None:
    """The weighted preference score of each candidate node (`rows`), or None when the pod
    prefers nothing here."""
    parts: list[tuple[float, FloatArray | None]] = [
        (weights.taint_toleration, taint_score(rules, pod, rows))
    ]
    constraints = pod.constraints
    if constraints is not None:
        parts += [
            (weights.node_affinity, node_affinity_score(rules, constraints, rows)),
            (weights.pod_topology_spread, spread_score(rules, constraints, rows)),
            (weights.inter_pod_affinity, pod_affinity_score(rules, constraints, rows)),
        ]
    found = [(w, s) for w, s in parts if s is not None and w > 0]
    if not found:
        return None
    total = np.zeros(rows.size, dtype=np.float64)
    for weight, score in found:
        total += weight * score
    return total


def combined(
    packing: npt.NDArray[np.generic], preferences: FloatArray, weights: PreferenceWeights
) -> FloatArray:
    """The packing score scaled to 0..1 over the candidates, weighted, plus the preferences."""
    result: FloatArray = (
        weights.packing * _min_max(np.asarray(packing, dtype=np.float64)) + preferences
    )
    return result
