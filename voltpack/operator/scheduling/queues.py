"""Queues in the operator: Queue objects to a tree, pods to gangs, evictions, Queue status.

The decisions are the core's (`voltpack/scheduler/queue_cycle.py`); this module reads what it
needs from the cached objects and writes back: deletes the pods of evicted gangs (a GPUJob's
controller creates its workers again, pending), records Events saying who preempted whom and
why, and keeps each Queue's status (allocated and borrowed GPUs per model, pending gangs, and
the conditions `AtLimit`, `Borrowing` and `Valid`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kubernetes.client import CoreV1Api, CustomObjectsApi
from pydantic import ValidationError

from voltpack.model.errors import InvalidRequestError
from voltpack.model.resources import API_GROUP, API_VERSION, QueueSpec
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.work import Eviction, PendingWork, RunningGang
from voltpack.model.workload import Pod
from voltpack.operator.kube.binder import record_event
from voltpack.operator.kube.cache import ResourceCache
from voltpack.operator.kube.client import api_message, call_json, status_code
from voltpack.operator.kube.conventions import (
    MIN_MEMBERS_ANNOTATION,
    POD_GROUP_ANNOTATION,
    PREEMPTIBLE_ANNOTATION,
    QUEUE_ANNOTATION,
    RANK_ANNOTATION,
    SERVED_SCHEDULERS,
    WORLD_SIZE_ANNOTATION,
)
from voltpack.operator.kube.pod_conditions import mark_disruption_target, preemption_message
from voltpack.operator.kube.status_writes import patch_status_guarded
from voltpack.operator.kube.timestamps import pod_start_s
from voltpack.operator.kube.translate import gpu_indices, pod_from_k8s, pod_key
from voltpack.operator.power.objects import rfc3339, with_transition
from voltpack.operator.scheduling.cluster_view import TERMINAL_PHASES
from voltpack.operator.scheduling.disruption_budgets import budget_violations
from voltpack.operator.scheduling.jobs import owning_job
from voltpack.scheduler.queue_cycle import QueueReport
from voltpack.scheduler.queues import DEFAULT_QUEUE, QueueTree

log = logging.getLogger(__name__)

PLURAL = "queues"
AT_LIMIT = "AtLimit"
BORROWING = "Borrowing"
VALID = "Valid"


def queue_tree(objects: Iterable[dict[str, Any]]) -> QueueTree:
    """The tree of every Queue object; each one that cannot be used is named with its problem."""
    specs: dict[str, QueueSpec] = {}
    invalid: dict[str, str] = {}
    for obj in objects:
        name = obj["metadata"]["name"]
        try:
            specs[name] = QueueSpec.model_validate(obj.get("spec") or {})
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            field = f"spec.{where}" if where else "spec"
            message = str(error["msg"]).removeprefix("Value error, ")
            invalid[name] = f"Queue {name}: field {field}: {message}"
    return QueueTree.build(specs, invalid)


def gang_key(pod: dict[str, Any]) -> str:
    """The gang a pod belongs to, named as `pending_work` names it."""
    meta = pod["metadata"]
    group = (meta.get("annotations") or {}).get(POD_GROUP_ANNOTATION)
    return f"{meta.get('namespace', 'default')}/{group}" if group else pod_key(pod)


def gang_queue(pod: dict[str, Any]) -> tuple[str, bool]:
    """(queue, preemptible) of a pod, from its annotations."""
    annotations = pod["metadata"].get("annotations") or {}
    queue = annotations.get(QUEUE_ANNOTATION) or DEFAULT_QUEUE
    return queue, annotations.get(PREEMPTIBLE_ANNOTATION, "").lower() == "true"


def pending_queues(
    work: PendingWork, pods: Iterable[dict[str, Any]]
) -> dict[str, tuple[str, bool]]:
    """Pending gang name -> (queue, preemptible), from the first member's annotations."""
    by_key = {pod_key(p): p for p in pods}
    found: dict[str, tuple[str, bool]] = {}
    for group in work.groups:
        first = by_key.get(group.pods[0].name)
        if first is not None:
            found[group.name] = gang_queue(first)
    return found


def running_gangs(
    pods: Iterable[dict[str, Any]],
    snapshot: ClusterSnapshot,
    scheduler_names: frozenset[str] = SERVED_SCHEDULERS,
    budgets: Sequence[dict[str, Any]] = (),
    request_of: Callable[[dict[str, Any]], Pod] = pod_from_k8s,
) -> list[RunningGang]:
    """The gangs voltpack placed that still run (pods being deleted are leaving already).
    `request_of` translates a pod (the operator's remembers the translations of unchanged pods).

    A gang's start is the latest start of its pods (None until every pod has started).
    An elastic GPUJob's gang (workers with `voltpack.io/world-size`) may be shrunk to its
    `voltpack.io/min-members` by preemption: its pods come in rank order, the highest last.
    `budgets` are the cluster's PodDisruptionBudgets (each gang's violations counted).
    """
    members: dict[str, list[tuple[dict[str, Any], Any, int, tuple[int, ...]]]] = {}
    for pod in pods:
        spec, meta = pod.get("spec") or {}, pod["metadata"]
        node_name = spec.get("nodeName")
        if spec.get("schedulerName") not in scheduler_names or not node_name:
            continue
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in (
            TERMINAL_PHASES
        ):
            continue
        try:
            request = request_of(pod)
            node = snapshot.node_index(node_name)
        except (InvalidRequestError, KeyError):
            continue
        gpus = gpu_indices(pod)
        if request.num_gpu and (gpus is None or len(gpus) != request.num_gpu):
            continue  # GPUs not recorded by voltpack: not ours to account or evict
        members.setdefault(gang_key(pod), []).append((pod, request, node, gpus or ()))
    gangs = []
    for name, entries in sorted(members.items()):
        entries.sort(key=lambda entry: _annotation_int(entry[0], RANK_ANNOTATION) or 0)
        queue, preemptible = gang_queue(entries[0][0])
        starts = [pod_start_s(pod) for pod, _, _, _ in entries]
        gangs.append(
            RunningGang(
                name=name,
                queue=queue,
                priority=max(request.priority for _, request, _, _ in entries),
                preemptible=preemptible,
                started_s=None if None in starts else max(s for s in starts if s is not None),
                pods=tuple((request, node, gpus) for _, request, node, gpus in entries),
                min_pods=_elastic_minimum([pod for pod, _, _, _ in entries]),
                budget_violations=(
                    budget_violations([pod for pod, _, _, _ in entries], budgets) if budgets else 0
                ),
            )
        )
    return gangs


def _annotation_int(pod: dict[str, Any], name: str) -> int | None:
    text = (pod["metadata"].get("annotations") or {}).get(name)
    return int(text) if text and text.isdigit() else None


def _elastic_minimum(pods: list[dict[str, Any]]) -> int | None:
    """The fewest pods an elastic GPUJob's running gang may be shrunk to; None: not elastic.
    (A worker rejoining the job is a gang of one: the largest minimum of the workers counts.)"""
    if not any(WORLD_SIZE_ANNOTATION in (p["metadata"].get("annotations") or {}) for p in pods):
        return None
    minimums = [m for p in pods if (m := _annotation_int(p, MIN_MEMBERS_ANNOTATION)) is not None]
    return max(minimums) if minimums else None


class QueueWriter:
    """Carries out evictions and keeps Queue status; only the leader calls it."""

    def __init__(
        self,
        core: CoreV1Api,
        custom: CustomObjectsApi,
        queues: ResourceCache,
        pods: ResourceCache,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.core = core
        self.custom = custom
        self.queues = queues
        self.pods = pods
        self.clock = clock
        self._told: dict[str, str] = {}

    def evict(self, eviction: Eviction, by_key: Mapping[str, dict[str, Any]]) -> int:
        """Delete every pod of the victim gang as kube-scheduler preempts: the `DisruptionTarget`
        condition (reason `PreemptionByScheduler`) first, then a graceful deletion with the
        pod's own `terminationGracePeriodSeconds` (a training job can checkpoint on SIGTERM).
        Its GPUs stay counted until the pod is gone; the preemptor waits, nominated."""
        deleted = 0
        owners: dict[str, dict[str, Any]] = {}
        for request, _, _ in eviction.gang.pods:
            pod = by_key.get(request.name)
            if pod is None:
                continue
            meta = pod["metadata"]
            record_event(self.core, pod, "Preempted", eviction.reason)
            mark_disruption_target(self.core, pod, preemption_message(pod))
            owner = owning_job(pod)
            if owner is not None:
                owners[owner["metadata"]["name"]] = owner
            try:
                reply = call_json(
                    self.core.delete_namespaced_pod, meta["name"], meta.get("namespace", "default")
                )
            except Exception as error:
                if status_code(error) != 404:
                    log.warning("eviction of %s failed: %s", request.name, api_message(error))
                    continue
                reply = {}
            if (reply.get("metadata") or {}).get("deletionTimestamp"):
                # terminating: still holds its node until it is gone (unless the watch has
                # already reported it gone: `assume` never brings a deleted pod back)
                self.pods.assume(reply)
            else:
                self.pods.forget(request.name)
            deleted += 1
        for job in owners.values():
            record_event(self.core, job, "Preempted", eviction.reason)
        return deleted

    def write_status(
        self, tree: QueueTree, reports: Mapping[str, QueueReport], objects: Iterable[dict[str, Any]]
    ) -> None:
        """Status and conditions of every Queue object; a Warning Event once per problem."""
        for obj in objects:
            name = obj["metadata"]["name"]
            problem = tree.invalid.get(name)
            if problem is not None:
                if self._told.get(name) != problem:
                    involved = {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": "Queue", **obj}
                    record_event(self.core, involved, "InvalidQueue", problem)
                    self._told[name] = problem
                status = {"allocatedGpus": {}, "borrowedGpus": {}, "pendingJobs": 0}
                conditions = [_condition(VALID, False, "InvalidSpec", problem)]
            else:
                self._told.pop(name, None)
                report = reports.get(name) or QueueReport({}, {}, 0)
                status = {
                    "allocatedGpus": report.allocated_gpus,
                    "borrowedGpus": report.borrowed_gpus,
                    "pendingJobs": report.pending_gangs,
                }
                conditions = [_condition(VALID, True, "Valid", ""), *queue_conditions(report)]
            self._patch(obj, status, conditions)

    def _patch(
        self, obj: dict[str, Any], status: dict[str, Any], conditions: list[dict[str, Any]]
    ) -> None:
        """Write the Queue's status onto the version it was computed from (two replicas write
        it during a leader handover): a stale write gets 409 and is computed again."""
        now = rfc3339(self.clock())

        def status_for(current: dict[str, Any]) -> dict[str, Any] | None:
            previous = current.get("status") or {}
            written = [with_transition(c, previous, now) for c in conditions]
            wanted = {**status, "conditions": written}
            return None if {key: previous.get(key) for key in wanted} == wanted else wanted

        name = obj["metadata"]["name"]
        try:
            updated = patch_status_guarded(
                lambda body: call_json(
                    self.custom.patch_cluster_custom_object_status,
                    API_GROUP,
                    API_VERSION,
                    PLURAL,
                    name,
                    body,
                ),
                lambda: call_json(
                    self.custom.get_cluster_custom_object, API_GROUP, API_VERSION, PLURAL, name
                ),
                obj,
                status_for,
            )
        except Exception as error:
            log.warning("Queue %s: status not written (retrying): %s", name, api_message(error))
            return
        if updated:
            self.queues.assume(updated)


def _condition(kind: str, true: bool, reason: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": "True" if true else "False", "reason": reason,
            "message": message}  # fmt: skip


def queue_conditions(report: QueueReport) -> list[dict[str, Any]]:
    """`AtLimit` and `Borrowing` from what the queue holds and what waits for its limit."""
    limit_parts = list(report.at_limit)
    if report.held_by_limit:
        limit_parts.append(f"{report.held_by_limit} gang(s) wait: they would exceed a limit")
    borrowed = ", ".join(f"{model} {gpus:g}" for model, gpus in report.borrowed_gpus.items())
    return [
        _condition(
            AT_LIMIT,
            bool(limit_parts),
            "LimitReached" if limit_parts else "BelowLimit",
            "; ".join(limit_parts),
        ),
        _condition(
            BORROWING,
            bool(borrowed),
            "AboveGuarantee" if borrowed else "WithinGuarantee",
            f"GPUs in use above the guarantee: {borrowed}" if borrowed else "",
        ),
    ]
