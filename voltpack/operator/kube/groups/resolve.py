"""A pod's gang: the first convention that claims the pod names it (None: a pod alone)."""

from __future__ import annotations

from typing import Any

from voltpack.operator.kube.groups.jobset import JOBSET_RESOURCE, jobset_group
from voltpack.operator.kube.groups.kuberay import RAYCLUSTER_RESOURCE, ray_group
from voltpack.operator.kube.groups.lws import LWS_RESOURCE, lws_group
from voltpack.operator.kube.groups.mark import Convention, GroupMark, WorkloadObjects
from voltpack.operator.kube.groups.own import voltpack_group
from voltpack.operator.kube.groups.pod_groups import (
    KAI_PODGROUPS,
    VOLCANO_PODGROUPS,
    kai_group,
    kueue_group,
    volcano_group,
)

CONVENTIONS: tuple[Convention, ...] = (
    voltpack_group,  # the user's own words first
    kueue_group,
    volcano_group,
    kai_group,  # a PodGroup a podgrouper made for a workload wins over the workload's kind
    lws_group,
    jobset_group,
    ray_group,
)
"""In the order they are asked."""

WORKLOAD_RESOURCES: dict[str, tuple[str, str, str]] = {
    VOLCANO_PODGROUPS: ("scheduling.volcano.sh", "v1beta1", "podgroups"),
    KAI_PODGROUPS: ("scheduling.run.ai", "v2alpha2", "podgroups"),
    LWS_RESOURCE: ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
    JOBSET_RESOURCE: ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
    RAYCLUSTER_RESOURCE: ("ray.io", "v1", "rayclusters"),
}
"""The workload objects the conventions read: resource -> (group, version, plural) to watch."""


def group_of(pod: dict[str, Any], objects: WorkloadObjects) -> GroupMark | None:
    """The pod's gang; GroupUnreadableError when its convention's definition cannot be read."""
    for convention in CONVENTIONS:
        mark = convention(pod, objects)
        if mark is not None:
            return mark
    return None
