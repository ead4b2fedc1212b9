"""The pod-group markers of other schedulers: Kueue's plain-pod groups (a label and a total
count on each pod), Volcano's and KAI's PodGroup objects (an annotation on each pod naming one).

Sources, at the versions the e2e pins: Kueue v0.17.0 `pkg/controller/jobs/pod/constants`
(`kueue.x-k8s.io/pod-group-name`, `kueue.x-k8s.io/pod-group-total-count`); Volcano's
`scheduling.k8s.io/group-name` annotation and `scheduling.volcano.sh/v1beta1` PodGroup
(`spec.minMember`, `spec.queue`); KAI Scheduler's `pod-group-name` annotation
(`pkg/common/constants`) and `scheduling.run.ai/v2alpha2` PodGroup (`spec.minMember`,
`spec.queue`, `spec.topologyConstraint`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from voltpack.model.errors import InvalidRequestError
from voltpack.model.topology_request import TopologyRequest
from voltpack.operator.kube.groups.mark import (
    GroupMark,
    GroupUnreadableError,
    OwnerRef,
    WorkloadObjects,
    annotations_of,
    count,
    labels_of,
    namespace_of,
    owner_of,
)

KUEUE_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_PODGROUPS = "podgroups.scheduling.volcano.sh"
KAI_GROUP_ANNOTATION = "pod-group-name"
KAI_PODGROUPS = "podgroups.scheduling.run.ai"
KAI_QUEUE_LABEL = "kai.scheduler/queue"


def kueue_group(pod: dict[str, Any], objects: WorkloadObjects) -> GroupMark | None:
    """Kueue's plain-pod group: every member carries the group's name and its total count."""
    name = labels_of(pod).get(KUEUE_GROUP_LABEL)
    if not name:
        return None
    total = annotations_of(pod).get(KUEUE_TOTAL_ANNOTATION)
    if total is None:
        raise GroupUnreadableError(f"label {KUEUE_GROUP_LABEL}={name} without annotation "
                         f"{KUEUE_TOTAL_ANNOTATION}")  # fmt: skip
    minimum = count(total, f"annotation {KUEUE_TOTAL_ANNOTATION}")
    return GroupMark(f"{namespace_of(pod)}/kueue:{name}", minimum, "kueue")


def volcano_group(pod: dict[str, Any], objects: WorkloadObjects) -> GroupMark | None:
    """Volcano's PodGroup named by the pod's annotation."""
    return _podgroup_mark(pod, objects, VOLCANO_GROUP_ANNOTATION, VOLCANO_PODGROUPS, "volcano")


def kai_group(pod: dict[str, Any], objects: WorkloadObjects) -> GroupMark | None:
    """KAI's PodGroup named by the pod's annotation (its podgrouper creates one per workload)."""
    mark = _podgroup_mark(pod, objects, KAI_GROUP_ANNOTATION, KAI_PODGROUPS, "kai")
    if mark is not None and mark.queue is None:
        queue = labels_of(pod).get(KAI_QUEUE_LABEL)
        mark = replace(mark, queue=queue or None)
    return mark


def _podgroup_mark(
    pod: dict[str, Any],
    objects: WorkloadObjects,
    annotation: str,
    resource: str,
    convention: str,
) -> GroupMark | None:
    name = annotations_of(pod).get(annotation)
    if not name:
        return None
    namespace = namespace_of(pod)
    group = objects.get(resource, namespace, name)
    if group is None:
        raise GroupUnreadableError(
            f"its PodGroup {namespace}/{name} ({resource}, named by annotation {annotation}) "
            "is not known yet"
        )
    spec = group.get("spec") or {}
    minimum = spec.get("minMember")
    min_member = 1 if minimum in (None, 0) else count(minimum, f"PodGroup {name} spec.minMember")
    return GroupMark(
        f"{namespace}/{convention}:{name}",
        min_member,
        convention,
        queue=str(spec["queue"]) if spec.get("queue") else None,
        owner=_controller(group) or owner_of(group),
        topology=_topology(spec.get("topologyConstraint"), name),
    )


def _controller(obj: dict[str, Any]) -> OwnerRef | None:
    """The object's controlling owner (the workload a podgrouper made the PodGroup for)."""
    meta = obj["metadata"]
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return OwnerRef(str(ref.get("apiVersion", "")), str(ref.get("kind", "")),
                            str(meta.get("namespace") or "default"), str(ref.get("name", "")),
                            ref.get("uid"))  # fmt: skip
    return None


def _topology(constraint: Any, name: str) -> TopologyRequest | None:
    """KAI's `spec.topologyConstraint` levels (node label keys) as a topology request."""
    if not isinstance(constraint, dict):
        return None
    required = constraint.get("requiredTopologyLevel") or None
    preferred = constraint.get("preferredTopologyLevel") or None
    if not required and not preferred:
        return None
    try:
        return TopologyRequest(required_level=required, preferred_level=preferred)
    except ValueError as exc:
        raise InvalidRequestError(f"PodGroup {name} spec.topologyConstraint: {exc}") from None
