"""VolumeBinding: a pod's bound PersistentVolumes that are pinned to nodes (local volumes,
zonal disks) allow only the nodes their required node affinity matches."""

from __future__ import annotations

from voltpack.model.constraints.node_rules import NodeRules
from voltpack.model.workload import Pod
from voltpack.scheduler.constraints.check import Check
from voltpack.scheduler.constraints.node_affinity import terms_mask

REASON = "node(s) didn't match PersistentVolume's node affinity"


def checks(rules: NodeRules, pod: Pod) -> list[Check]:
    volumes = pod.constraints.volume_node_terms if pod.constraints is not None else ()
    if not volumes:
        return []
    passed = terms_mask(rules, volumes[0])
    for terms in volumes[1:]:
        passed = passed & terms_mask(rules, terms)
    return [Check(REASON, passed)]
