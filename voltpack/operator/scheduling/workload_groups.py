"""The workload objects gang conventions read (JobSets, LeaderWorkerSets, RayClusters, Volcano's
and KAI's PodGroups), each in a cache of its own, and each cycle's `GroupOf` over them.

A kind whose CRD is not installed is simply empty (its cache retries quietly); a pod that
names an object not yet cached waits with that reason (`groups.mark.GroupUnreadableError`).
"""

from __future__ import annotations

import threading
from typing import Any

from kubernetes.client import CustomObjectsApi

from voltpack.operator.kube.cache import ResourceCache
from voltpack.operator.kube.groups.mark import CachedWorkloadObjects, GroupMark
from voltpack.operator.kube.groups.resolve import WORKLOAD_RESOURCES, group_of
from voltpack.operator.kube.same_object_memo import SameObjectMemo
from voltpack.operator.kube.setup_problems import SetupLog
from voltpack.operator.scheduling.cluster_view import GroupOf


class WorkloadGroups:
    """Caches of the workload kinds, and a pod's gang over them, remembered per pod object for
    as long as no workload object changes."""

    def __init__(self, custom: CustomObjectsApi, setup: SetupLog | None = None) -> None:
        self.caches = {
            resource: ResourceCache(resource, _lister(custom, *where), setup)
            for resource, where in WORKLOAD_RESOURCES.items()
        }
        self.objects = CachedWorkloadObjects(
            {resource: cache.peek for resource, cache in self.caches.items()}
        )
        self._memo: SameObjectMemo[GroupMark | None] = SameObjectMemo(self._group_of)
        self._generations: tuple[int, ...] = ()

    def start(self, stop: threading.Event) -> None:
        for cache in self.caches.values():
            cache.start(stop)

    def cycle(self) -> GroupOf:
        """This cycle's `GroupOf`: marks made since a workload object last changed are kept."""
        generations = tuple(cache.generation for cache in self.caches.values())
        if generations != self._generations:
            self._memo = SameObjectMemo(self._group_of)
            self._generations = generations
        else:
            self._memo.new_cycle()
        return self._memo

    def _group_of(self, pod: dict[str, Any]) -> GroupMark | None:
        return group_of(pod, self.objects)


def _lister(custom: CustomObjectsApi, group: str, version: str, plural: str) -> Any:
    def list_objects(**kwargs: Any) -> Any:
        return custom.list_cluster_custom_object(group, version, plural, **kwargs)

    return list_objects
