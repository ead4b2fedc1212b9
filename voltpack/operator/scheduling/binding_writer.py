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
from voltpack.operator.kube.translate import pod_key
from voltpack.operator.scheduling.apply import CycleInput, OperatorStats
from voltpack.operator.scheduling.bind_pool import (
    ClaimsWriter,
    GangBinding,
    bind_gangs,
    with_claims,
)
from voltpack.operator.scheduling.gang_recovery import join_ranks
from voltpack.operator.scheduling.jobs import owning_job
from voltpack.scheduler.session import Plan


class PendingEventWriter:
    """A `FailedScheduling` Event for each pod that waits, when its reason changed."""

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
            if pod is not None and self._last.get(key) != reason:
                record_event(self.core, pod, "FailedScheduling", reason)
                self._last[key] = reason
                self.stats.events += 1


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
    ) -> None:
        self.core, self.pods, self.still_leader = core, pods, still_leader
        self.write_claims, self.pool, self.pending, self.stats = write_claims, pool, pending, stats

    def apply(self, plan: Plan, cycle: CycleInput) -> None:
        by_key = cycle.by_key
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
            if decision.placed
        ]
        results = bind_gangs(self.core, bindings, self.pool(), self.still_leader, self.write_claims)
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
        the one the cycle started from (e.g. already Running, with its startTime).
        """
        if pod is None:
            return None
        cached = self.pods.peek(pod_key(pod))  # read only: no copy per bound pod
        if cached is not None and (cached.get("spec") or {}).get("nodeName"):
            return cached
        meta = pod["metadata"]
        bound = {
            **pod,
            "metadata": {**meta, "annotations": {**(meta.get("annotations") or {}), **written}},
            "spec": {**(pod.get("spec") or {}), "nodeName": node},
        }
        self.pods.assume(bound)
        return bound


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
