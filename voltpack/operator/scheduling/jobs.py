"""The GPUJob controller: a job's worker pods, its status, and cleanup on deletion."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import CoreV1Api, CustomObjectsApi
from pydantic import ValidationError

from voltpack.model.resources import API_GROUP, API_VERSION, GpuJobSpec
from voltpack.operator.kube.binder import record_event
from voltpack.operator.kube.client import api_message, call_json, status_code
from voltpack.operator.kube.conventions import (
    GPU_MILLI_ANNOTATION,
    GPU_MODELS_ANNOTATION,
    GPU_RESOURCE,
    MIN_MEMBERS_ANNOTATION,
    NICS_ANNOTATION,
    PIPELINE_PARALLEL_ANNOTATION,
    PLACEMENT_REASON_ANNOTATION,
    POD_GROUP_ANNOTATION,
    PREEMPTIBLE_ANNOTATION,
    PRIORITY_ANNOTATION,
    QUEUE_ANNOTATION,
    RANK_ANNOTATION,
    RDMA_PERCENT_ANNOTATION,
    REJOIN_RANK_ANNOTATION,
    SCHEDULER_NAME,
    TENSOR_PARALLEL_ANNOTATION,
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    TRAINING_MODEL_ANNOTATION,
    WORKER_RANKS_ANNOTATION,
    WORLD_SIZE_ANNOTATION,
)
from voltpack.operator.kube.status_writes import patch_status_guarded
from voltpack.operator.kube.translate import gpu_indices

log = logging.getLogger(__name__)

PLURAL = "gpujobs"
JOB_LABEL = "voltpack.io/job"
FINALIZER = "voltpack.io/worker-cleanup"


@dataclass(frozen=True)
class WorkerPlan:
    """What fault recovery (gang_recovery.py) asks of the controller for one job."""

    skip: frozenset[int] = frozenset()
    """Worker indices not to create now (an elastic job's missing workers, or all of a gang
    whose old pods are still being deleted)."""
    rejoin: Mapping[int, int] = field(default_factory=dict)
    """Worker index -> rank: create as a worker joining the running job (placed alone)."""
    world_size: int | None = None
    """Workers the job runs with now (elastic); None: `spec.workers`."""
    ranks: tuple[int, ...] = ()
    """Ranks of the job's workers now (elastic), for `voltpack.io/world-ranks`."""
    recovery: dict[str, Any] | None = None
    """`status.recovery`; None: keep what the status has."""
    condition: dict[str, Any] | None = None
    """The `Recovered` condition; None: keep what the status has."""


def is_elastic(spec: GpuJobSpec) -> bool:
    """A job that may run with fewer workers than it asks for (docs/elastic-training.md)."""
    return spec.min_workers is not None and spec.min_workers < spec.workers


def worker_name(job: str, index: int) -> str:
    """Name of a job's worker pod."""
    return f"{job}-worker-{index}"


def worker_index(job: str, pod_name: str) -> int | None:
    """The index of a worker pod of `job` from its name; None if not one."""
    prefix = f"{job}-worker-"
    tail = pod_name[len(prefix) :] if pod_name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else None


def worker_pod(
    job: dict[str, Any],
    spec: GpuJobSpec,
    index: int,
    plan: WorkerPlan | None = None,
) -> dict[str, Any]:
    """The pod of worker `index`, from the job's template, for voltpack to schedule.

    An elastic job's workers carry `voltpack.io/world-size` and `voltpack.io/world-ranks`
    (their `WORLD_SIZE` comes from the first); a worker rejoining a running elastic job is a
    gang of one that takes the rank the job lacks (`plan.rejoin`).
    """
    plan = plan or WorkerPlan()
    meta = job["metadata"]
    template = copy.deepcopy(spec.template)
    pod_meta = template.get("metadata") or {}
    labels = {**(pod_meta.get("labels") or {}), JOB_LABEL: meta["name"]}
    annotations = {
        **(pod_meta.get("annotations") or {}),
        POD_GROUP_ANNOTATION: meta["name"],
        MIN_MEMBERS_ANNOTATION: str(spec.min_workers or spec.workers),
        QUEUE_ANNOTATION: spec.queue,
    }
    if spec.preemptible:
        annotations[PREEMPTIBLE_ANNOTATION] = "true"
    if spec.priority:
        annotations[PRIORITY_ANNOTATION] = str(spec.priority)
    if spec.gpu_milli is not None:
        annotations[GPU_MILLI_ANNOTATION] = str(spec.gpu_milli)
    if spec.gpu_models:
        annotations[GPU_MODELS_ANNOTATION] = "|".join(spec.gpu_models)
    annotations.update(_topology_annotations(spec))
    if is_elastic(spec):
        annotations[WORLD_SIZE_ANNOTATION] = str(plan.world_size or spec.workers)
        ranks = plan.ranks or tuple(range(plan.world_size or spec.workers))
        annotations[WORKER_RANKS_ANNOTATION] = ",".join(str(r) for r in ranks)
    if index in plan.rejoin:
        annotations[MIN_MEMBERS_ANNOTATION] = "1"
        annotations[REJOIN_RANK_ANNOTATION] = str(plan.rejoin[index])
    pod_spec = template.get("spec") or {}
    pod_spec["schedulerName"] = SCHEDULER_NAME
    containers = pod_spec.get("containers") or [{"name": "worker", "image": "busybox"}]
    pod_spec["containers"] = containers
    if spec.gpus_per_worker and spec.gpu_milli is None:
        resources = containers[0].setdefault("resources", {})
        resources.setdefault("limits", {})[GPU_RESOURCE] = str(spec.gpus_per_worker)
    for container in containers:
        _add_worker_env(container, spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": worker_name(meta["name"], index),
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": f"{API_GROUP}/{API_VERSION}",
                    "kind": "GPUJob",
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                }
            ],
        },
        "spec": pod_spec,
    }


def _topology_annotations(spec: GpuJobSpec) -> dict[str, str]:
    """The job's topology request and NIC share as the pod annotations the scheduler reads."""
    written: dict[str, str] = {}
    if spec.rdma_percent:
        written[RDMA_PERCENT_ANNOTATION] = str(spec.rdma_percent)
    request = spec.topology
    if request is None:
        return written
    for name, value in (
        (TOPOLOGY_REQUIRED_ANNOTATION, request.required_level),
        (TOPOLOGY_PREFERRED_ANNOTATION, request.preferred_level),
        (TRAINING_MODEL_ANNOTATION, request.model),
    ):
        if value:
            written[name] = value
    written[TENSOR_PARALLEL_ANNOTATION] = str(request.tensor_parallel)
    written[PIPELINE_PARALLEL_ANNOTATION] = str(request.pipeline_parallel)
    return written


def _from_annotation(annotation: str) -> dict[str, Any]:
    return {"fieldRef": {"fieldPath": f"metadata.annotations['{annotation}']"}}


def _add_worker_env(container: dict[str, Any], spec: GpuJobSpec) -> None:
    """`RANK` and `NCCL_IB_HCA` through the downward API (the kubelet reads the annotations
    voltpack wrote at binding when the container starts), `WORLD_SIZE` as a value (elastic
    jobs: from `voltpack.io/world-size` too); variables the template already sets are left
    alone."""
    env = list(container.get("env") or [])
    present = {entry.get("name") for entry in env}
    world_size: dict[str, Any] = (
        {"name": "WORLD_SIZE", "valueFrom": _from_annotation(WORLD_SIZE_ANNOTATION)}
        if is_elastic(spec)
        else {"name": "WORLD_SIZE", "value": str(spec.workers)}
    )
    wanted: list[dict[str, Any]] = [
        {"name": "RANK", "valueFrom": _from_annotation(RANK_ANNOTATION)},
        world_size,
    ]
    if spec.rdma_percent:
        wanted.append({"name": "NCCL_IB_HCA", "valueFrom": _from_annotation(NICS_ANNOTATION)})
    env.extend(entry for entry in wanted if entry["name"] not in present)
    container["env"] = env


def owning_job(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The GPUJob that owns a worker pod, as an Event's involved object; None if none does."""
    meta = pod["metadata"]
    for owner in meta.get("ownerReferences") or []:
        if owner.get("kind") == "GPUJob":
            return {
                "apiVersion": owner.get("apiVersion", f"{API_GROUP}/{API_VERSION}"),
                "kind": "GPUJob",
                "metadata": {
                    "name": owner["name"],
                    "namespace": meta.get("namespace"),
                    "uid": owner.get("uid"),
                },
            }
    return None


def job_status(
    job: dict[str, Any],
    workers: list[dict[str, Any]],
    unplaced: dict[str, str],
    plan: WorkerPlan | None = None,
) -> dict[str, Any]:
    """The job's status from its worker pods, the scheduler's last reasons and what fault
    recovery did (`plan`)."""
    plan = plan or WorkerPlan()
    meta = job["metadata"]
    phases = [(w.get("status") or {}).get("phase", "Pending") for w in workers]
    bound = [w for w in workers if (w.get("spec") or {}).get("nodeName")]
    wanted = plan.world_size or int((job.get("spec") or {}).get("workers") or 0)
    if phases and all(p == "Succeeded" for p in phases) and len(phases) == wanted:
        phase = "Succeeded"
    elif any(p == "Failed" for p in phases):
        phase = "Failed"
    elif len(bound) == wanted and all(p == "Running" for p in phases):
        phase = "Running"
    elif len(bound) == wanted and wanted:
        phase = "Scheduled"
    else:
        phase = "Pending"
    existing = sum(1 for w in workers if not w["metadata"].get("deletionTimestamp"))
    # fewer workers than wanted: the controller has just created them (or replaces deleted
    # ones) and the scheduler holds the gang until all exist; waiting, not unschedulable
    reasons = (
        []
        if existing < wanted
        else [
            unplaced[key]
            for w in workers
            if (key := f"{meta['namespace']}/{w['metadata']['name']}") in unplaced
        ]
    )
    scheduled = len(bound) == wanted and wanted > 0
    placed_because = sorted(
        {
            text
            for w in bound
            if (text := (w["metadata"].get("annotations") or {}).get(PLACEMENT_REASON_ANNOTATION))
        }
    )
    bound_message = f"{len(bound)}/{wanted} bound"
    if scheduled and placed_because:
        bound_message += ": " + placed_because[0]
    condition = {
        "type": "Scheduled",
        "status": "True" if scheduled else "False",
        "reason": "AllWorkersBound" if scheduled else "Unschedulable" if reasons else "Waiting",
        "message": reasons[0] if reasons and not scheduled else bound_message,
        "observedGeneration": meta.get("generation"),
    }
    placement = [
        {
            "pod": w["metadata"]["name"],
            "node": w["spec"]["nodeName"],
            "gpus": list(gpu_indices(w) or ()),
        }
        for w in sorted(bound, key=lambda w: str(w["metadata"]["name"]))
    ]
    before = job.get("status") or {}
    recovered = plan.condition or next(
        (c for c in before.get("conditions") or [] if c.get("type") == "Recovered"), None
    )
    status: dict[str, Any] = {
        "phase": phase,
        "placement": placement,
        "conditions": [condition, recovered] if recovered else [condition],
        "observedGeneration": meta.get("generation"),
    }
    recovery = plan.recovery if plan.recovery is not None else before.get("recovery")
    if recovery is not None:
        status["recovery"] = recovery
    return status


class JobController:
    """Reconciles every GPUJob: finalizer, worker pods, status; cleanup when deleted."""

    def __init__(self, core: CoreV1Api, custom: CustomObjectsApi) -> None:
        self.core = core
        self.custom = custom

    def list_function(self, **kwargs: Any) -> Any:
        """Cluster-wide list/watch of GPUJobs (for a ResourceCache)."""
        return self.custom.list_cluster_custom_object(API_GROUP, API_VERSION, PLURAL, **kwargs)

    def reconcile_all(
        self,
        jobs: Iterable[dict[str, Any]],
        pods: list[dict[str, Any]],
        unplaced: dict[str, str],
        plans: Mapping[str, WorkerPlan] | None = None,
    ) -> None:
        """Reconcile each job; one job's failure does not stop the others. `plans`: fault
        recovery's word per job (`namespace/name`)."""
        for job in jobs:
            key = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
            try:
                self.reconcile(job, pods, unplaced, (plans or {}).get(key))
            except Exception as error:
                log.warning("GPUJob %s: %s", job["metadata"].get("name"), api_message(error))

    def reconcile(
        self,
        job: dict[str, Any],
        pods: list[dict[str, Any]],
        unplaced: dict[str, str],
        plan: WorkerPlan | None = None,
    ) -> None:
        """Bring one job's pods and status in line with its spec (and fault recovery's plan)."""
        plan = plan or WorkerPlan()
        meta = job["metadata"]
        name, namespace = meta["name"], meta["namespace"]
        workers = [
            p
            for p in pods
            if p["metadata"].get("namespace") == namespace
            and (p["metadata"].get("labels") or {}).get(JOB_LABEL) == name
        ]
        if meta.get("deletionTimestamp"):
            self._clean_up(job, workers)
            return
        if FINALIZER not in (meta.get("finalizers") or []):
            patch = {"metadata": {"finalizers": [*(meta.get("finalizers") or []), FINALIZER]}}
            updated = call_json(
                self.custom.patch_namespaced_custom_object,
                API_GROUP, API_VERSION, namespace, PLURAL, name, patch,
            )  # fmt: skip
            if updated.get("metadata"):  # its resourceVersion guards the status write
                job = updated
        try:
            spec = GpuJobSpec.model_validate(job.get("spec") or {})
        except ValidationError as exc:
            failed = {"phase": "Failed", "conditions": [_invalid(exc)]}
            self._write_status(job, lambda _: failed)
            return
        existing = {w["metadata"]["name"] for w in workers}
        for index in range(spec.workers):
            if worker_name(name, index) in existing or index in plan.skip:
                continue
            try:
                pod = worker_pod(job, spec, index, plan)
                call_json(self.core.create_namespaced_pod, namespace, pod)
            except Exception as error:
                if status_code(error) != 409:
                    raise
        status = job_status(job, workers, unplaced, plan)
        if status != (job.get("status") or {}):
            self._write_status(job, lambda current: job_status(current, workers, unplaced, plan))
            condition = status["conditions"][0]
            before = ((job.get("status") or {}).get("conditions") or [{}])[0]
            if (
                condition["reason"] == "Unschedulable"
                and before.get("message") != condition["message"]
            ):
                record_event(
                    self.core,
                    {**job, "apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": "GPUJob"},
                    "FailedScheduling",
                    condition["message"],
                )

    def _clean_up(self, job: dict[str, Any], workers: list[dict[str, Any]]) -> None:
        meta = job["metadata"]
        for worker in workers:
            try:
                call_json(
                    self.core.delete_namespaced_pod, worker["metadata"]["name"], meta["namespace"]
                )
            except Exception as error:
                if status_code(error) != 404:
                    raise
        finalizers = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        call_json(
            self.custom.patch_namespaced_custom_object,
            API_GROUP, API_VERSION, meta["namespace"], PLURAL, meta["name"],
            {"metadata": {"finalizers": finalizers}},
        )  # fmt: skip

    def _write_status(
        self, job: dict[str, Any], status_of: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> None:
        """`status_of(job)` onto the job's version: two replicas during a leader handover both
        write it, so a stale write gets 409 and is computed again on the job read fresh."""
        meta = job["metadata"]
        namespace, name = meta["namespace"], meta["name"]

        def status_for(current: dict[str, Any]) -> dict[str, Any] | None:
            status = status_of(current)
            return None if status == (current.get("status") or {}) else status

        patch_status_guarded(
            lambda body: call_json(
                self.custom.patch_namespaced_custom_object_status,
                API_GROUP,
                API_VERSION,
                namespace,
                PLURAL,
                name,
                body,
            ),
            lambda: call_json(
                self.custom.get_namespaced_custom_object,
                API_GROUP,
                API_VERSION,
                namespace,
                PLURAL,
                name,
            ),
            job,
            status_for,
        )


def _invalid(error: ValidationError) -> dict[str, Any]:
    first = error.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "spec"
    return {
        "type": "Scheduled",
        "status": "False",
        "reason": "InvalidSpec",
        "message": f"spec.{field}: {first['msg']}",
    }
