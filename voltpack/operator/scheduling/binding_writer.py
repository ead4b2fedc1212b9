"""The plan's bindings, and the Events of the pods that wait.

`BindingWriter` binds each gang the session placed, all or none (its ResourceClaims, reserved
by the session's Reserve step, written first), records a `Scheduled` Event with the reason,
and puts each bound pod into the cache as the binding made it. `PendingEventWriter` tells each
pod that still waits why, once per reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from typing import Any

from kubernetes.client import CoreV1Api

from voltpack.model.decision import Placement
from voltpack.operator.dra.support import GangClaims
from voltpack.operator.kube.binder import (
    UNDONE_REASON,
    binding_annotations,
    controlled,
    record_event,
)
from voltpack.operator.kube.cache import ResourceCache
from voltpack.operator.kube.conventions import (
    IDEAL_STEP_ANNOTATION,
    PLACEMENT_REASON_ANNOTATION,
    PREDICTED_STEP_ANNOTATION,
)
from voltpack.operator.kube.event_queue import EventQueue
from voltpack.operator.kube.pod_conditions import (
    SCHEDULING_GATED,
    UNSCHEDULABLE,
    mark_unscheduled,
)
from voltpack.operator.kube.translate import pod_key
from voltpack.operator.scheduling.apply import CycleInput, OperatorStats
from voltpack.operator.scheduling.bind_pool import (
    ClaimsWriter,
    GangBinding,
    bind_gangs,
    with_claims,
)
from voltpack.operator.scheduling.cluster_view import GATED_MESSAGE
from voltpack.operator.scheduling.gang_recovery import join_ranks
from voltpack.operator.scheduling.jobs import owning_job
from voltpack.operator.scheduling.nominations import nominate
from voltpack.scheduler.session import Plan


class PendingEventWriter:
    """A `FailedScheduling` Event for each pod that waits, when its reason changed, and its
    `PodScheduled=False` condition (reason `Unschedulable`, or `SchedulingGated` with no Event
    for a gated pod, as kube-scheduler does)."""

    def __init__(self, core: CoreV1Api, stats: OperatorStats) -> None:
        self.core, self.stats = core, stats
        self._last: dict[str, str] = {}
        """Pod -> the reason its last Event gave."""

    def bound(self, key: str) -> None:
        """The pod was bound: a later wait is news again."""
        self._last.pop(key, None)

    def keep_only(self, existing: Iterable[str]) -> None:
        """Forget pods that are gone (memory stays bounded)."""
        present = set(existing)
        self._last = {k: v for k, v in self._last.items() if k in present}

    def apply(self, plan: Plan, cycle: CycleInput) -> None:
        for key, reason in plan.unplaced.items():
            pod = cycle.by_key.get(key)
            if pod is None or self._last.get(key) == reason:
                continue
            if key in cycle.gated:
                mark_unscheduled(self.core, pod, SCHEDULING_GATED, GATED_MESSAGE)
            else:
                record_event(self.core, pod, "FailedScheduling", reason)
                mark_unscheduled(self.core, pod, UNSCHEDULABLE, reason)
                self.stats.events += 1
            self._last[key] = reason


class BindingWriter:
    """Binds the session's gangs (several at a time in `pool`), all or none each."""

    def __init__(
        self,
        core: CoreV1Api,
        pods: ResourceCache,
        still_leader: Callable[[], bool],
        write_claims: ClaimsWriter,
        pool: Callable[[], Executor | None],
        pending: PendingEventWriter,
        stats: OperatorStats,
        events: EventQueue | None = None,
    ) -> None:
        """`events`: where each bound pod's Scheduled Event is queued (None: written by the
        binding thread)."""
        self.core, self.pods, self.still_leader = core, pods, still_leader
        self.write_claims, self.pool, self.pending, self.stats = write_claims, pool, pending, stats
        self.events = events

    def apply(self, plan: Plan, cycle: CycleInput) -> None:
        by_key = cycle.by_key
        preempting = {eviction.by for eviction in plan.evictions}
        for decision in plan.decisions:
            if decision.placed and decision.subject in preempting:
                # its victims terminate gracefully first: nominated now, bound once they are gone
                self.stats.nominated += nominate(self.core, decision.placements, by_key)
                for placement in decision.placements:
                    plan.unplaced[placement.pod] = (
                        f"{decision.reason}; nominated to node {placement.node}, waiting for the "
                        "preempted pods to terminate"
                    )
        allocated = {  # pod -> why the allocation (or the topology placement) chose this
            placement.pod: decision.reason
            for decision in plan.decisions
            if decision.placed
            and (
                decision.subject in cycle.hetero.choices or decision.subject in cycle.topology_gangs
            )
            for placement in decision.placements
        }
        step_times = {
            decision.placements[0].pod: (decision.predicted_step_s, decision.ideal_step_s)
            for decision in plan.decisions
            if decision.placed
            and decision.placements
            and decision.predicted_step_s is not None
            and decision.ideal_step_s is not None
        }
        bindings = [
            with_claims(
                gang_binding(decision.placements, by_key, allocated, step_times),
                cycle.reserver.claims.get(decision.subject, GangClaims()),
            )
            for decision in plan.decisions
            if decision.placed and decision.subject not in preempting
        ]
        results = bind_gangs(
            self.core, bindings, self.pool(), self.still_leader, self.write_claims, self.events
        )
        for binding, result in zip(bindings, results, strict=True):
            if result is None:  # not tried: the Lease was lost first; the new leader decides
                continue  # (gangs bound concurrently: a later one may have been bound)
            gang, failures = binding.placements, result.failures
            if result.undone:
                self._undone(result.undone, by_key, failures[gang[0].pod])
            self.stats.bind_failures += len(failures)
            reason = binding.annotations.get(PLACEMENT_REASON_ANNOTATION)
            if reason and not failures:
                job = owning_job(by_key[gang[0].pod]) if gang[0].pod in by_key else None
                if job is not None:
                    record_event(self.core, job, "Scheduled", reason, kind="Normal")
                    self.stats.events += 1
            for position, placement in enumerate(gang):
                rank = binding.ranks.get(placement.pod, position)
                if placement.pod in failures:
                    plan.unplaced[placement.pod] = failures[placement.pod]
                    continue
                self.stats.bound += 1
                self.pending.bound(placement.pod)
                written = {**binding.annotations, **binding_annotations(placement, rank)}
                pod = self._assume_bound(by_key.get(placement.pod), placement.node, written)
                if pod is not None:
                    cycle.assumed[placement.pod] = pod

    def _undone(self, keys: Iterable[str], by_key: dict[str, dict[str, Any]], cause: str) -> None:
        """Pods deleted to undo a gang: gone from the cache now, a Warning on their GPUJob."""
        jobs: dict[str, dict[str, Any]] = {}
        for key in keys:
            self.pods.forget(key)
            pod = by_key.get(key)
            job = owning_job(pod) if pod is not None else None
            if job is not None:
                jobs[job["metadata"]["name"]] = job
        self.stats.undone_gangs += 1
        for job in jobs.values():
            record_event(self.core, job, UNDONE_REASON, cause)
            self.stats.events += 1

    def _assume_bound(
        self, pod: dict[str, Any] | None, node: str, written: dict[str, str]
    ) -> dict[str, Any] | None:
        """The pod in the cache as the binding made it (node, `written` annotations: GPUs,
        rank, NICs, reasons); returns that new object (`pod`, the cached one, is not changed).

        Not when the watch has already reported the pod bound: that version is newer than
        the one the cycle started from (e.g. already Running, with its startTime). Not when
        the watch has reported it deleted since the cycle began (someone deleted it as soon as
        it was bound): assuming it would bring back a pod that is gone, and no later watch
        event would take it out again.
        """
        if pod is None:
            return None
        cached = self.pods.peek(pod_key(pod))  # read only: no copy per bound pod
        if cached is None:
            return None
        if (cached.get("spec") or {}).get("nodeName"):
            return cached
        meta = pod["metadata"]
        bound = {
            **pod,
            "metadata": {**meta, "annotations": {**(meta.get("annotations") or {}), **written}},
            "spec": {**(pod.get("spec") or {}), "nodeName": node},
        }
        return bound if self.pods.assume(bound) else None  # not if deleted since the peek


def gang_binding(
    gang: tuple[Placement, ...],
    by_key: dict[str, dict[str, Any]],
    allocated: dict[str, str],
    step_times: dict[str, tuple[float, float]],
) -> GangBinding:
    """What to bind for one gang: UIDs (precondition), the reason and predicted step time
    as annotations, and the ranks rejoining workers of an elastic job keep."""
    uids = {
        p.pod: str(by_key[p.pod]["metadata"].get("uid", ""))
        for p in gang
        if p.pod in by_key and by_key[p.pod]["metadata"].get("uid")
    }
    reason = allocated.get(gang[0].pod) if gang else None
    annotations = {PLACEMENT_REASON_ANNOTATION: reason} if reason else {}
    if gang and gang[0].pod in step_times:
        predicted, ideal = step_times[gang[0].pod]
        annotations[PREDICTED_STEP_ANNOTATION] = f"{predicted:.6g}"
        annotations[IDEAL_STEP_ANNOTATION] = f"{ideal:.6g}"
    # workers joining a running elastic job take the ranks it lacks
    ranks = join_ranks([p.pod for p in gang], by_key, by_key.values())
    owned = frozenset(p.pod for p in gang if p.pod in by_key and controlled(by_key[p.pod]))
    return GangBinding(tuple(gang), uids, annotations, ranks, owned=owned)
