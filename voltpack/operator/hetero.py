"""Heterogeneity-aware training in the operator: GPUJob annotations in, model choices out.

Each cycle this module reads the GPUJobs: the job type (`voltpack.io/job-type`, a row of the
throughput table) and the throughput a running job reports
(`voltpack.io/measured-steps-per-second`, on the GPU model its workers run on), which refines
the table (`ThroughputTable.observed`, once per reported value). Over the active jobs that have
a known type and accept more than one GPU model of the cluster, it solves the policy file's
allocation policy (`spec.allocation`) at most once per round, or when such a job arrives or
completes; the core (`voltpack/policies/hetero/model_choice.py`) turns the allocation into an
order of models per job, which the queue cycle tries in order for a pending job.

A malformed annotation never stops the loop: it gets a Warning Event naming the annotation (once
per value) and is ignored. Only the leader calls this module (its Events are written by the
runner).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from voltpack.model.errors import PolicyError, TraceFormatError, VoltpackError
from voltpack.model.resources import API_GROUP, API_VERSION, GpuJobSpec
from voltpack.operator.jobs import JOB_LABEL
from voltpack.perf.throughput_table import ThroughputTable, load_gavel_throughputs
from voltpack.policies.hetero.model_choice import (
    ModelAllocation,
    ModelChoice,
    TrainingJob,
    allocate_models,
)
from voltpack.policies.hetero.registry import AllocationPolicy, make_allocation_policy
from voltpack.policies.schema import AllocationSpec
from voltpack.sim.datasets import data_dir

log = logging.getLogger(__name__)

JOB_TYPE_ANNOTATION = "voltpack.io/job-type"
"""On a GPUJob: its job type, a row of the throughput table (e.g. `ResNet-50 (batch size 64)`)."""
MEASURED_THROUGHPUT_ANNOTATION = "voltpack.io/measured-steps-per-second"
"""On a GPUJob: the training steps per second the running job measures (written by the job)."""
TERMINAL_JOB_PHASES = ("Succeeded", "Failed")


def default_throughputs_path() -> Path:
    """The Gavel table shipped in `data/gavel/`."""
    return data_dir() / "gavel" / "simulation_throughputs.json"


def load_table(spec: AllocationSpec) -> ThroughputTable:
    """The throughput table the policy file names; PolicyError naming the field if unusable."""
    try:
        path = Path(spec.throughputs) if spec.throughputs else default_throughputs_path()
        return load_gavel_throughputs(path)
    except (TraceFormatError, VoltpackError) as exc:
        raise PolicyError(f"field spec.allocation.throughputs: {exc}") from None


@dataclass(frozen=True)
class JobWarning:
    """A Warning Event to record on a GPUJob."""

    job: dict[str, Any]
    reason: str
    message: str


@dataclass
class HeteroCycle:
    """What one cycle learned: each participating job's model choice, by gang name."""

    choices: dict[str, ModelChoice] = field(default_factory=dict)
    warnings: list[JobWarning] = field(default_factory=list)
    solved: bool = False
    """True when the allocation was recomputed in this cycle."""


def job_object(job: Mapping[str, Any]) -> dict[str, Any]:
    """A GPUJob as an Event's involved object (the cache's items have no kind)."""
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": "GPUJob", **job}


def _created_s(job: Mapping[str, Any]) -> float | None:
    text = job["metadata"].get("creationTimestamp")
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class HeteroAllocator:
    """The operator's heterogeneity-aware training state: the refined table, the allocation."""

    def __init__(self, spec: AllocationSpec, seed: int = 0) -> None:
        if spec.policy is None:
            raise PolicyError("field spec.allocation.policy: needed to run the allocation")
        self.spec = spec
        self.policy: AllocationPolicy = make_allocation_policy(spec.policy, seed)
        self.table = load_table(spec)
        self.allocation: ModelAllocation | None = None
        self._solved_at_s: float | None = None
        self._solved_for: frozenset[str] = frozenset()
        self._ids: dict[str, int] = {}
        self._applied: dict[str, tuple[str, str, str]] = {}
        self._warned: dict[tuple[str, str], str] = {}

    def cycle(
        self,
        gpujobs: Iterable[dict[str, Any]],
        pods: Iterable[dict[str, Any]],
        capacity_gpus: Mapping[str, float],
        node_models: Mapping[str, str],
        now_s: float,
    ) -> HeteroCycle:
        """Read the annotations, refine the table, re-solve when due; the choices by gang."""
        result = HeteroCycle()
        capacity = {m: int(n) for m, n in capacity_gpus.items() if int(n) > 0}
        running_on = _running_models(pods, node_models)
        jobs: list[TrainingJob] = []
        seen: set[str] = set()
        for job in sorted(gpujobs, key=lambda j: (_created_s(j) or 0.0, _key(j))):
            key = _key(job)
            if job["metadata"].get("deletionTimestamp"):
                continue
            if (job.get("status") or {}).get("phase") in TERMINAL_JOB_PHASES:
                continue
            seen.add(key)
            training = self._training_job(job, key, capacity, running_on.get(key), now_s, result)
            if training is not None:
                jobs.append(training)
        self._forget_except(seen)
        names = frozenset(job.name for job in jobs)
        due = (
            self.allocation is None
            or names != self._solved_for
            or self._solved_at_s is None
            or now_s - self._solved_at_s >= self.spec.round_s
        )
        if due:
            self.allocation = allocate_models(self.policy, self.table, jobs, capacity)
            self._solved_at_s, self._solved_for = now_s, names
            result.solved = True
            log.info(
                "allocation %s solved for %d training jobs on %s",
                self.policy.name, len(jobs), capacity,
            )  # fmt: skip
        assert self.allocation is not None
        result.choices = {n: c for n, c in self.allocation.choices.items() if n in names}
        return result

    def _training_job(
        self,
        job: dict[str, Any],
        key: str,
        capacity: Mapping[str, int],
        running_model: str | None,
        now_s: float,
        result: HeteroCycle,
    ) -> TrainingJob | None:
        annotations = job["metadata"].get("annotations") or {}
        job_type = (annotations.get(JOB_TYPE_ANNOTATION) or "").strip()
        if not job_type:
            return None
        try:
            spec = GpuJobSpec.model_validate(job.get("spec") or {})
        except ValidationError:
            return None  # the GPUJob controller reports the invalid spec
        gpus = spec.workers * spec.gpus_per_worker
        if gpus == 0 or spec.gpu_milli is not None:
            return None
        self._observe(job, key, job_type, gpus, running_model, annotations, result)
        if job_type not in self.table.job_types:
            self._warn(
                job, key, JOB_TYPE_ANNOTATION, job_type, "UnknownJobType", result,
                f"annotation {JOB_TYPE_ANNOTATION}: {job_type!r} is not a job type of the "
                f"throughput table ({self.table.source}), which knows "
                f"{', '.join(self.table.job_types)}; scheduled without heterogeneity awareness",
            )  # fmt: skip
            return None
        accepted = tuple(m for m in (spec.gpu_models or sorted(capacity)) if m in capacity)
        if len(accepted) < 2:
            return None
        if key not in self._ids:
            self._ids[key] = max(self._ids.values(), default=-1) + 1
        created = _created_s(job)
        return TrainingJob(
            job_id=self._ids[key],
            name=key,
            job_type=job_type,
            gpus=gpus,
            accepted_models=accepted,
            age_s=max(now_s - created, 0.0) if created is not None else 0.0,
        )

    def _observe(
        self,
        job: dict[str, Any],
        key: str,
        job_type: str,
        gpus: int,
        running_model: str | None,
        annotations: Mapping[str, str],
        result: HeteroCycle,
    ) -> None:
        text = annotations.get(MEASURED_THROUGHPUT_ANNOTATION)
        if text is None:
            return
        try:
            steps_per_s = float(text)
        except ValueError:
            steps_per_s = math.nan
        if not math.isfinite(steps_per_s) or steps_per_s < 0:
            self._warn(
                job, key, MEASURED_THROUGHPUT_ANNOTATION, text, "MalformedAnnotation", result,
                f"annotation {MEASURED_THROUGHPUT_ANNOTATION}: {text!r} is not a throughput "
                f"(a finite number of steps per second >= 0); ignored",
            )  # fmt: skip
            return
        if running_model is None:
            return  # not running (or across models): the report cannot be placed on a model
        uid = str(job["metadata"].get("uid") or key)
        reported = (uid, text, running_model)
        if self._applied.get(key) == reported:
            return
        self._applied[key] = reported
        model = self.table.model_name(running_model)
        self.table = self.table.observed(job_type, model, gpus, steps_per_s)
        log.info(
            "job %s (%s) reports %g steps/s on %d x %s: table refined to %g",
            key, job_type, steps_per_s, gpus, running_model,
            self.table.rate(job_type, model, gpus),
        )  # fmt: skip

    def _warn(
        self,
        job: dict[str, Any],
        key: str,
        annotation: str,
        value: str,
        reason: str,
        result: HeteroCycle,
        message: str,
    ) -> None:
        """A Warning Event, once per annotation value."""
        if self._warned.get((key, annotation)) == value:
            return
        self._warned[(key, annotation)] = value
        result.warnings.append(JobWarning(job_object(job), reason, message))

    def _forget_except(self, keys: set[str]) -> None:
        self._ids = {k: v for k, v in self._ids.items() if k in keys}
        self._applied = {k: v for k, v in self._applied.items() if k in keys}
        self._warned = {k: v for k, v in self._warned.items() if k[0] in keys}


def _key(job: Mapping[str, Any]) -> str:
    meta = job["metadata"]
    return f"{meta.get('namespace', 'default')}/{meta['name']}"


def _running_models(
    pods: Iterable[dict[str, Any]], node_models: Mapping[str, str]
) -> dict[str, str]:
    """GPUJob key -> the GPU model its bound workers run on (when they all run on one)."""
    models: dict[str, set[str]] = {}
    for pod in pods:
        meta = pod["metadata"]
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        node = (pod.get("spec") or {}).get("nodeName")
        if not job or not node or (pod.get("status") or {}).get("phase") in TERMINAL_JOB_PHASES:
            continue
        model = node_models.get(node)
        if model is not None:
            models.setdefault(f"{meta.get('namespace', 'default')}/{job}", set()).add(model)
    return {key: next(iter(found)) for key, found in models.items() if len(found) == 1}
