"""NodeName: a pod whose creator set `spec.nodeName` may go to that node only."""

from __future__ import annotations

import numpy as np

from voltpack.model.constraints.node_rules import NodeRules
from voltpack.model.workload import Pod
from voltpack.scheduler.constraints.check import Check

REASON = "node(s) didn't match the requested node name"


def checks(rules: NodeRules, pod: Pod) -> list[Check]:
    wanted = pod.constraints.node_name if pod.constraints is not None else None
    if not wanted:
        return []
    passed = np.fromiter(
        (name == wanted for name in rules.names), dtype=np.bool_, count=rules.node_count
    )
    return [Check(REASON, passed)]
