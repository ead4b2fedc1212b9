"""voltpack's own markers: `voltpack.io/pod-group` and `voltpack.io/min-members` (the GPUJob
controller writes them on its workers; any pod may carry them). A rigid GPUJob's gang is
restarted whole by its controller, so its late members wait for the whole gang; an elastic
one's (`voltpack.io/world-size`) join the running workers."""

from __future__ import annotations

from typing import Any

from voltpack.operator.kube.conventions import (
    MIN_MEMBERS_ANNOTATION,
    POD_GROUP_ANNOTATION,
    QUEUE_ANNOTATION,
    WORLD_SIZE_ANNOTATION,
)
from voltpack.operator.kube.groups.mark import (
    GroupMark,
    GroupUnreadableError,
    WorkloadObjects,
    annotations_of,
    namespace_of,
)


def voltpack_group(pod: dict[str, Any], objects: WorkloadObjects) -> GroupMark | None:
    annotations = annotations_of(pod)
    group = annotations.get(POD_GROUP_ANNOTATION)
    if not group:
        return None
    minimum = annotations.get(MIN_MEMBERS_ANNOTATION)
    try:
        min_member = None if minimum is None else int(minimum)
    except ValueError:
        raise GroupUnreadableError(
            f"annotation {MIN_MEMBERS_ANNOTATION}={minimum!r} is not an integer"
        ) from None
    return GroupMark(
        f"{namespace_of(pod)}/{group}",
        min_member,
        "voltpack",
        queue=annotations.get(QUEUE_ANNOTATION) or None,
        joins_running=WORLD_SIZE_ANNOTATION in annotations or not _gpujob_worker(pod),
    )


def _gpujob_worker(pod: dict[str, Any]) -> bool:
    return any(ref.get("kind") == "GPUJob" for ref in pod["metadata"].get("ownerReferences") or [])
