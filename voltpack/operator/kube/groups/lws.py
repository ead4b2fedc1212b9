"""LeaderWorkerSet: each group (a leader and its workers) is one gang.

From sigs.k8s.io/lws v0.7.0 (`api/leaderworkerset/v1`, `pkg/controllers`): every pod of a group
carries `leaderworkerset.sigs.k8s.io/name` and `group-index` labels and the group's `size`
annotation; the leader has `worker-index` 0. The controller creates a group's workers only
after its leader exists, and, under `startupPolicy: LeaderReady` or exclusive placement
(`leaderworkerset.sigs.k8s.io/exclusive-topology`), only after the leader is Ready or
scheduled. In those two cases the leader is placed alone first and its workers then join it
(the leader, running, counts towards the gang); otherwise the gang waits for all its members.
"""

from __future__ import annotations

from typing import Any

from voltpack.operator.kube.groups.mark import (
    GroupMark,
    WorkloadObjects,
    annotations_of,
    count,
    labels_of,
    namespace_of,
    owner_of,
)

LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
LWS_EXCLUSIVE_ANNOTATION = "leaderworkerset.sigs.k8s.io/exclusive-topology"
LWS_RESOURCE = "leaderworkersets.leaderworkerset.x-k8s.io"


def lws_group(pod: dict[str, Any], objects: WorkloadObjects) -> GroupMark | None:
    labels = labels_of(pod)
    name, index = labels.get(LWS_NAME_LABEL), labels.get(LWS_GROUP_INDEX_LABEL)
    size = annotations_of(pod).get(LWS_SIZE_ANNOTATION)
    if not name or index is None or size is None:
        return None
    namespace = namespace_of(pod)
    members = count(size, f"annotation {LWS_SIZE_ANNOTATION}")
    lws = objects.get(LWS_RESOURCE, namespace, name)
    leader_first = LWS_EXCLUSIVE_ANNOTATION in annotations_of(pod) or (
        lws is not None
        and (
            (lws.get("spec") or {}).get("startupPolicy") == "LeaderReady"
            or LWS_EXCLUSIVE_ANNOTATION in (lws["metadata"].get("annotations") or {})
        )
    )
    is_leader = labels.get(LWS_WORKER_INDEX_LABEL) == "0"
    return GroupMark(
        f"{namespace}/lws:{name}-{index}",
        1 if leader_first and is_leader else members,
        "lws",
        owner=None if lws is None else owner_of(lws),
    )
