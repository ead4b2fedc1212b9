"""NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes only pods that tolerate the
`node.kubernetes.io/unschedulable` NoSchedule taint."""

from __future__ import annotations

from voltpack.model.constraints.node_rules import NodeRules
from voltpack.model.constraints.taints import UNSCHEDULABLE_TAINT_KEY, Taint, tolerated
from voltpack.model.workload import Pod
from voltpack.scheduler.constraints.check import Check

REASON = "node(s) were unschedulable"
CORDON = Taint(key=UNSCHEDULABLE_TAINT_KEY, effect="NoSchedule")


def checks(rules: NodeRules, pod: Pod) -> list[Check]:
    if not rules.unschedulable.any():
        return []
    tolerations = pod.constraints.tolerations if pod.constraints is not None else ()
    if tolerated(CORDON, tolerations):
        return []
    return [Check(REASON, ~rules.unschedulable)]
