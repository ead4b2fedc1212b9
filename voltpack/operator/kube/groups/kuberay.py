"""KubeRay: a RayCluster's head and its workers are one gang (a RayJob runs one RayCluster).

From github.com/ray-project/kuberay/ray-operator v1.5.0: pods carry `ray.io/cluster` and
`ray.io/node-type` (`head`, `worker`). The gang's size is KubeRay's own for its batch
schedulers (`batchscheduler/volcano`): the head plus every worker group's desired replicas
(`replicas` held between `minReplicas` and `maxReplicas`, times `numOfHosts`), or with the
autoscaler on (`enableInTreeAutoscaling`) the head plus the groups' `minReplicas` x
`numOfHosts`; a suspended group counts none.
"""

from __future__ import annotations

from typing import Any

from voltpack.operator.kube.groups.mark import (
    GroupMark,
    GroupUnreadableError,
    WorkloadObjects,
    labels_of,
    namespace_of,
    owner_of,
)

RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
RAYCLUSTER_RESOURCE = "rayclusters.ray.io"
MAX_REPLICAS = 2**31 - 1
"""The CRD's default `maxReplicas`."""


def ray_group(pod: dict[str, Any], objects: WorkloadObjects) -> GroupMark | None:
    labels = labels_of(pod)
    name = labels.get(RAY_CLUSTER_LABEL)
    if not name or labels.get(RAY_NODE_TYPE_LABEL) not in ("head", "worker"):
        return None
    namespace = namespace_of(pod)
    cluster = objects.get(RAYCLUSTER_RESOURCE, namespace, name)
    if cluster is None:
        raise GroupUnreadableError(f"its RayCluster {namespace}/{name} is not known yet")
    spec = cluster.get("spec") or {}
    autoscaling = bool(spec.get("enableInTreeAutoscaling"))
    try:
        workers = sum(
            _group_pods(group, autoscaling) for group in spec.get("workerGroupSpecs") or []
        )
    except (TypeError, ValueError):
        raise GroupUnreadableError(
            f"RayCluster {namespace}/{name}: a worker group's replicas, "
            "minReplicas, maxReplicas or numOfHosts is not an integer"
        ) from None
    return GroupMark(f"{namespace}/ray:{name}", 1 + workers, "kuberay", owner=owner_of(cluster))


def _group_pods(group: dict[str, Any], autoscaling: bool) -> int:
    """KubeRay's `GetWorkerGroupDesiredReplicas` (or its minimum under the autoscaler)."""
    if group.get("suspend"):
        return 0
    hosts = int(group.get("numOfHosts", 1))
    low = int(group.get("minReplicas", 0))
    if autoscaling:
        return low * hosts
    high = int(group.get("maxReplicas", MAX_REPLICAS))
    replicas = group.get("replicas")
    if low > high:
        wanted = high
    elif replicas is None or int(replicas) < low:
        wanted = low
    else:
        wanted = min(int(replicas), high)
    return wanted * hosts
