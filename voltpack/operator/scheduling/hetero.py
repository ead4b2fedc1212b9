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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from voltpack.model.data_files import DATA_DIR_ENV, data_dir_candidates, find_data_dir
from voltpack.model.errors import PolicyError, TraceFormatError
from voltpack.model.resources import API_GROUP, API_VERSION, GpuJobSpec
from voltpack.operator.kube.timestamps import created_s
from voltpack.operator.scheduling.training_rounds import (
    ServiceClock,
    Workers,
    gpus_held_by_others,
    workers_by_job,
)
from voltpack.perf.throughput_table import ThroughputTable, load_gavel_throughputs
from voltpack.policies.hetero.model_choice import (
    ModelAllocation,
    ModelChoice,
    TrainingJob,
    allocate_models,
)
from voltpack.policies.hetero.registry import AllocationPolicy, make_allocation_policy
from voltpack.policies.schema import AllocationSpec
from voltpack.scheduler.round_moves import Move, RoundJob, plan_moves

log = logging.getLogger(__name__)

JOB_TYPE_ANNOTATION = "voltpack.io/job-type"
"""On a GPUJob: its job type, a row of the throughput table (e.g. `ResNet-50 (batch size 64)`)."""
MEASURED_THROUGHPUT_ANNOTATION = "voltpack.io/measured-steps-per-second"
"""On a GPUJob: the training steps per second the running job measures (written by the job)."""
TERMINAL_JOB_PHASES = ("Succeeded", "Failed")


def default_throughputs_path() -> Path:
    """The Gavel table shipped in `data/gavel/` (`$VOLTPACK_DATA_DIR`, or beside the source).

    Raises PolicyError naming `spec.allocation.throughputs` when this installation has no
    `data/` folder with it (mount one, or name a file).
    """
    relative = Path("gavel") / "simulation_throughputs.json"
    found = find_data_dir(relative)
    if found is not None:
        return found / relative
    candidates = [folder / relative for folder in data_dir_candidates()]
    raise PolicyError(
        f"field spec.allocation.throughputs: not set, and the shipped Gavel table is not in "
        f"this installation (looked for {', '.join(map(str, candidates))}); name a "
        f"Gavel-format throughput file, or set {DATA_DIR_ENV} to a folder with {relative}"
    )


def load_table(spec: AllocationSpec) -> ThroughputTable:
    """The throughput table the policy file names; PolicyError naming the field if unusable."""
    path = Path(spec.throughputs) if spec.throughputs else default_throughputs_path()
    try:
        return load_gavel_throughputs(path)
    except TraceFormatError as exc:
        raise PolicyError(f"field spec.allocation.throughputs: {exc}") from None


@dataclass(frozen=True)
class JobWarning:
    """A Warning Event to record on a GPUJob."""

    job: dict[str, Any]
    reason: str
    message: str


@dataclass(frozen=True)
class PlannedMove:
    """A move of the round and the workers to preempt for it."""

    move: Move
    workers: Workers


@dataclass
class HeteroCycle:
    """What one cycle learned: each participating job's model choice, by gang name."""

    choices: dict[str, ModelChoice] = field(default_factory=dict)
    warnings: list[JobWarning] = field(default_factory=list)
    moves: list[PlannedMove] = field(default_factory=list)
    solved: bool = False
    """True when the allocation was recomputed in this cycle."""


def job_object(job: Mapping[str, Any]) -> dict[str, Any]:
    """A GPUJob as an Event's involved object (the cache's items have no kind)."""
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": "GPUJob", **job}


class HeteroAllocator:
    """The operator's heterogeneity-aware training state: the refined table, the allocation."""

    def __init__(self, spec: AllocationSpec, seed: int = 0) -> None:
        if spec.policy is None:
            raise PolicyError("field spec.allocation.policy: needed to run the allocation")
        self.spec = spec
        self.policy: AllocationPolicy = make_allocation_policy(spec.policy, seed)
        self.table = load_table(spec)
        self.allocation: ModelAllocation | None = None
        self.clock = ServiceClock(spec.round_s)
        self._solved_for: frozenset[str] = frozenset()
        self._targets: dict[str, str] = {}
        """Job -> the model a move sends it to: tried first when it is placed again."""
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
        """Read the annotations, refine the table, re-solve when due, plan the round's moves."""
        result = HeteroCycle()
        pods = list(pods)
        capacity = {m: int(n) for m, n in capacity_gpus.items() if int(n) > 0}
        workers = workers_by_job(pods, node_models)
        jobs: list[TrainingJob] = []
        specs: dict[str, GpuJobSpec] = {}
        seen: set[str] = set()
        for job in sorted(
            gpujobs,
            key=lambda j: (created_s(j) or 0.0, _key(j)),
        ):
            key = _key(job)
            if job["metadata"].get("deletionTimestamp"):
                continue
            if (job.get("status") or {}).get("phase") in TERMINAL_JOB_PHASES:
                continue
            seen.add(key)
            running = workers.get(key)
            found = self._training_job(
                job, key, capacity, running.model if running else None, now_s, result
            )
            if found is not None:
                jobs.append(found[0])
                specs[key] = found[1]
        self._forget_except(seen)
        names = frozenset(job.name for job in jobs)
        running_on = {
            name: model
            for name in names
            if (model := _running_model(workers.get(name), specs[name])) is not None
        }
        self.clock.account(now_s, running_on)
        changed = names != self._solved_for or self.allocation is None
        boundary = self.clock.boundary(now_s)
        if changed or boundary:
            self.allocation = allocate_models(self.policy, self.table, jobs, capacity)
            self._solved_for = names
            result.solved = True
            if changed:
                self.clock.reset(names, self.allocation.gpu_models)
                self._targets = {k: v for k, v in self._targets.items() if k in names}
            log.info(
                "allocation %s solved for %d training jobs on %s (round %d)",
                self.policy.name, len(jobs), capacity, self.clock.round_index,
            )  # fmt: skip
        assert self.allocation is not None
        # a moved job that runs again (where it was sent, or elsewhere) has arrived
        self._targets = {k: v for k, v in self._targets.items() if k not in running_on}
        if boundary:
            held = gpus_held_by_others(pods, node_models, running_on)
            free = {m: max(n - held.get(m, 0), 0) for m, n in capacity.items()}
            result.moves = self._plan_moves(jobs, specs, workers, running_on, free, now_s)
        result.choices = {
            n: _first(c, self._targets.get(n))
            for n, c in self.allocation.choices.items()
            if n in names
        }
        return result

    def _plan_moves(
        self,
        jobs: list[TrainingJob],
        specs: Mapping[str, GpuJobSpec],
        workers: Mapping[str, Workers],
        running_on: Mapping[str, str],
        free_for_jobs: Mapping[str, int],
        now_s: float,
    ) -> list[PlannedMove]:
        """The round's moves; `free_for_jobs`: GPUs per model not held by other pods."""
        assert self.allocation is not None
        round_jobs = []
        for job in jobs:
            choice = self.allocation.choices.get(job.name)
            if choice is None:
                continue
            running = workers.get(job.name)
            started = running.started_s if running else None
            movable = (
                specs[job.name].preemptible
                and job.name in running_on
                and started is not None
                and now_s - started >= self.spec.min_runtime_s
            )
            round_jobs.append(
                RoundJob(
                    name=job.name,
                    gpus=job.gpus,
                    choice=choice,
                    running_model=running_on.get(job.name),
                    movable=movable,
                    job_time_s=self.clock.job_time_s.get(job.name),
                )
            )
        moves = plan_moves(
            round_jobs,
            free_for_jobs,
            self.clock.model_time_s,
            round_index=self.clock.round_index,
            round_s=self.spec.round_s,
            restart_cost_s=self.spec.restart_cost_s,
        )
        for move in moves:
            self._targets[move.job] = move.to_model
            log.info("%s", move.reason)
        return [PlannedMove(move, workers[move.job]) for move in moves]

    def _training_job(
        self,
        job: dict[str, Any],
        key: str,
        capacity: Mapping[str, int],
        running_model: str | None,
        now_s: float,
        result: HeteroCycle,
    ) -> tuple[TrainingJob, GpuJobSpec] | None:
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
        created = created_s(job)
        training = TrainingJob(
            job_id=self._ids[key],
            name=key,
            job_type=job_type,
            gpus=gpus,
            accepted_models=accepted,
            age_s=max(now_s - created, 0.0) if created is not None else 0.0,
        )
        return training, spec

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


def _running_model(workers: Workers | None, spec: GpuJobSpec) -> str | None:
    """The model a job runs on when all its workers are bound there and none is leaving."""
    if workers is None or workers.leaving or workers.bound < spec.workers:
        return None
    return workers.model


def _first(choice: ModelChoice, model: str | None) -> ModelChoice:
    """`choice` with `model` tried first (where a move sends the job)."""
    if model is None or model not in choice.models or choice.models[0] == model:
        return choice
    return replace(choice, models=(model, *(m for m in choice.models if m != model)))
