"""NodePorts: a pod's host ports must be free on the node (same protocol and port conflict
when either IP is 0.0.0.0 or both are the same)."""

from __future__ import annotations

import numpy as np

from voltpack.model.constraints.node_rules import NodeRules
from voltpack.model.workload import Pod
from voltpack.scheduler.constraints.check import Check

REASON = "node(s) didn't have free ports for the requested pod ports"


def checks(rules: NodeRules, pod: Pod) -> list[Check]:
    wanted = pod.constraints.host_ports if pod.constraints is not None else ()
    if not wanted:
        return []
    passed = np.ones(rules.node_count, dtype=np.bool_)
    for row, used in enumerate(rules.ports):
        if used and any(port.conflicts(other) for port in wanted for other in used):
            passed[row] = False
    return [Check(REASON, passed)]
