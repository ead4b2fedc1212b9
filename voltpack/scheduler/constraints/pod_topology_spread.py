"""PodTopologySpread with `DoNotSchedule`: placing the pod must keep, per constraint, the
matching pods of its topology domain within `maxSkew` of the least loaded eligible domain.

As kube-scheduler counts: only nodes that carry every constraint's topology key, and that pass
the node-inclusion policies (node affinity honoured, taints ignored by default), make domains;
matching pods are those in the pod's namespace selected by the constraint's selector (an empty
selector counts none), terminating pods skipped; fewer eligible domains than `minDomains` make
the global minimum 0. A node without a constraint's key fails ("missing required label").
"""

from __future__ import annotations

import numpy as np

from voltpack.model.constraints.node_rules import BoolArray, NodeRules, PodsSelected
from voltpack.model.constraints.pod_constraints import PodConstraints, TopologySpreadConstraint
from voltpack.model.workload import Pod
from voltpack.scheduler.constraints.check import Check
from voltpack.scheduler.constraints.node_affinity import required_mask
from voltpack.scheduler.constraints.taint_toleration import untolerated

REASON = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL_REASON = REASON + " (missing required label)"


def counted_pods(constraint: TopologySpreadConstraint, namespace: str) -> PodsSelected:
    """The placed pods a constraint counts."""
    selector = constraint.selector
    counted = None if selector is None or selector.is_empty else selector
    return PodsSelected(counted, frozenset({namespace}), skip_terminating=True)


def eligible_nodes(
    rules: NodeRules,
    constraints: PodConstraints,
    constraint: TopologySpreadConstraint,
    all_keys: BoolArray,
) -> BoolArray:
    """Nodes whose pods make the constraint's domains."""
    eligible = all_keys.copy()
    if constraint.node_affinity_policy == "Honor" and constraints.has_node_affinity:
        eligible &= required_mask(rules, constraints)
    if constraint.node_taints_policy == "Honor":
        eligible &= ~untolerated(rules, constraints.tolerations)
    return eligible


def skew_after(
    rules: NodeRules,
    constraints: PodConstraints,
    constraint: TopologySpreadConstraint,
    all_keys: BoolArray,
) -> np.ndarray:
    """Per node, the skew the constraint would have with the pod placed there (nodes without
    the key get 0: they fail on the label)."""
    column = rules.label_column(constraint.topology_key)
    per_node = rules.placed.per_node(counted_pods(constraint, constraints.namespace))
    eligible = eligible_nodes(rules, constraints, constraint, all_keys)
    by_domain = rules.domain_counts(constraint.topology_key, per_node, eligible)
    domains = np.zeros(len(column.values), dtype=np.bool_)
    domains[column.ids[eligible]] = True
    if not domains.any():
        minimum = np.iinfo(np.int32).max  # no eligible domain: no node is over the skew
    elif int(domains.sum()) < constraint.min_domains:
        minimum = 0
    else:
        minimum = int(by_domain[domains].min())
    selector = constraint.selector
    self_match = int(selector is not None and selector.matches(constraints.label_map))
    present = column.present
    skew = np.zeros(rules.node_count, dtype=np.int64)
    skew[present] = by_domain[column.ids[present]] + self_match - minimum
    return skew


def hard_constraints(constraints: PodConstraints | None) -> tuple[TopologySpreadConstraint, ...]:
    if constraints is None:
        return ()
    return tuple(c for c in constraints.spread if c.when_unsatisfiable == "DoNotSchedule")


def checks(rules: NodeRules, pod: Pod) -> list[Check]:
    constraints = pod.constraints
    hard = hard_constraints(constraints)
    if constraints is None or not hard:
        return []
    all_keys = np.ones(rules.node_count, dtype=np.bool_)
    for constraint in hard:
        all_keys &= rules.label_column(constraint.topology_key).present
    missing = np.zeros(rules.node_count, dtype=np.bool_)
    over = np.zeros(rules.node_count, dtype=np.bool_)
    undecided = np.ones(rules.node_count, dtype=np.bool_)
    for constraint in hard:
        present = rules.label_column(constraint.topology_key).present
        missing |= undecided & ~present
        undecided &= present
        too_skewed = undecided & (
            skew_after(rules, constraints, constraint, all_keys) > constraint.max_skew
        )
        over |= too_skewed
        undecided &= ~too_skewed
    return [Check(MISSING_LABEL_REASON, ~missing), Check(REASON, ~over)]
