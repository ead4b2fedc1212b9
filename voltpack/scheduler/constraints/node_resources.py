"""NodeResourcesFit: the pod count, CPU and every other resource the pod requests (memory,
ephemeral-storage, hugepages, extended resources) within what the node advertises less what
its pods request. A node short of several resources gives each reason, as kube-scheduler's
plugin does."""

from __future__ import annotations

import numpy as np

from voltpack.model.constraints.node_rules import NodeRules
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.workload import Pod
from voltpack.scheduler.constraints.check import Check

TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str) -> str:
    """kube-scheduler's reason for a node short of `resource`."""
    return f"Insufficient {resource}"


def checks(snapshot: ClusterSnapshot, rules: NodeRules, pod: Pod) -> list[Check]:
    found = [Check(TOO_MANY_PODS, rules.pods_free >= 1)]
    if pod.cpu_milli > 0:
        found.append(Check(insufficient("cpu"), snapshot.cpu_free_milli >= pod.cpu_milli))
    for resource, amount in pod.resources:
        if amount <= 0:
            continue
        column = rules.resource_column(resource)
        if column is None:
            found.append(Check(insufficient(resource), np.zeros(rules.node_count, dtype=np.bool_)))
        else:
            found.append(Check(insufficient(resource), rules.resource_free[column] >= amount))
    return found
