"""Rounds for live training jobs: what their workers say, the time each job received on each
GPU model, and carrying out a move (the checkpoint contract, docs/hetero.md).

A move deletes a job's worker pods with their grace period (no `gracePeriodSeconds`: the pod's
`terminationGracePeriodSeconds` applies): the workers get SIGTERM, write a checkpoint and exit;
the GPUJob controller recreates them once they are gone, and they resume from the checkpoint on
the model the round chose.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import CoreV1Api

from voltpack.model.errors import InvalidRequestError
from voltpack.operator.kube.binder import record_event
from voltpack.operator.kube.client import api_message, call_json, status_code
from voltpack.operator.kube.timestamps import pod_start_s
from voltpack.operator.kube.translate import pod_from_k8s
from voltpack.operator.scheduling.jobs import JOB_LABEL, owning_job
from voltpack.scheduler.round_moves import Move

log = logging.getLogger(__name__)

TERMINAL_POD_PHASES = ("Succeeded", "Failed")


@dataclass
class Workers:
    """A GPUJob's active worker pods: where they run and since when."""

    pods: list[dict[str, Any]] = field(default_factory=list)
    models: set[str] = field(default_factory=set)
    bound: int = 0
    started_s: float | None = None
    """The latest start of a worker (None until every worker has started)."""
    leaving: bool = False
    """A worker is being deleted (moved or stopped)."""

    @property
    def model(self) -> str | None:
        """The one GPU model the bound workers run on (None: none bound, or several models)."""
        return next(iter(self.models)) if len(self.models) == 1 else None


def workers_by_job(
    pods: Iterable[dict[str, Any]], node_models: Mapping[str, str]
) -> dict[str, Workers]:
    """GPUJob key (`namespace/name`) -> its active workers."""
    found: dict[str, Workers] = {}
    starts: dict[str, list[float | None]] = {}
    for pod in pods:
        meta = pod["metadata"]
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if not job or (pod.get("status") or {}).get("phase") in TERMINAL_POD_PHASES:
            continue
        key = f"{meta.get('namespace', 'default')}/{job}"
        workers = found.setdefault(key, Workers())
        workers.pods.append(pod)
        workers.leaving = workers.leaving or bool(meta.get("deletionTimestamp"))
        node = (pod.get("spec") or {}).get("nodeName")
        starts.setdefault(key, []).append(pod_start_s(pod) if node else None)
        if node:
            workers.bound += 1
            if node in node_models:
                workers.models.add(node_models[node])
    for key, times in starts.items():
        if times and None not in times:
            found[key].started_s = max(t for t in times if t is not None)
    return found


def gpus_held_by_others(
    pods: Iterable[dict[str, Any]], node_models: Mapping[str, str], jobs: Iterable[str]
) -> dict[str, int]:
    """GPUs per model held by bound, active pods that are not workers of `jobs`."""
    taking_part = set(jobs)
    held: dict[str, int] = {}
    for pod in pods:
        meta = pod["metadata"]
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or node not in node_models:
            continue
        if (pod.get("status") or {}).get("phase") in TERMINAL_POD_PHASES:
            continue
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if job and f"{meta.get('namespace', 'default')}/{job}" in taking_part:
            continue
        try:
            gpus = pod_from_k8s(pod).num_gpu
        except InvalidRequestError:
            continue
        held[node_models[node]] = held.get(node_models[node], 0) + gpus
    return held


class ServiceClock:
    """The time each job received on each model since the allocation was reset (Gavel's
    priorities: allocation / share received), and the round boundaries."""

    def __init__(self, round_s: float) -> None:
        self.round_s = round_s
        self.round_index = 0
        self.next_round_s: float | None = None
        self.job_time_s: dict[str, dict[str, float]] = {}
        self.model_time_s: dict[str, float] = {}
        self._last_s: float | None = None

    def account(self, now_s: float, running: Mapping[str, str]) -> None:
        """Credit the time since the last call to each running job (job -> model)."""
        elapsed = 0.0 if self._last_s is None else max(now_s - self._last_s, 0.0)
        self._last_s = now_s
        for job, model in running.items():
            times = self.job_time_s.setdefault(job, {})
            times[model] = times.get(model, 0.0) + elapsed
            self.model_time_s[model] = self.model_time_s.get(model, 0.0) + elapsed

    def reset(self, jobs: Iterable[str], models: Iterable[str]) -> None:
        """A new allocation: every job starts from half a round on every model (as Gavel)."""
        half = self.round_s / 2
        names, columns = list(jobs), list(models)
        self.job_time_s = {job: dict.fromkeys(columns, half) for job in names}
        self.model_time_s = dict.fromkeys(columns, half * len(names))

    def boundary(self, now_s: float) -> bool:
        """True (and a new round begins) when a round has ended."""
        if self.next_round_s is not None and now_s < self.next_round_s:
            return False
        self.round_index += 1
        self.next_round_s = now_s + self.round_s
        return True


def carry_out_move(core: CoreV1Api, move: Move, workers: Workers) -> int:
    """Preempt the job whole: a `Preempted` Event on each worker and the GPUJob, then delete
    the workers with their grace period (they checkpoint on SIGTERM). Returns pods deleted."""
    deleted = 0
    job: dict[str, Any] | None = None
    for pod in workers.pods:
        meta = pod["metadata"]
        job = job or owning_job(pod)
        record_event(core, pod, "Preempted", move.reason)
        try:
            call_json(core.delete_namespaced_pod, meta["name"], meta.get("namespace", "default"))
        except Exception as error:
            if status_code(error) != 404:
                log.warning("move of %s: %s not deleted: %s", move.job, meta["name"],
                            api_message(error))  # fmt: skip
                continue
        deleted += 1
    if job is not None:
        record_event(core, job, "Preempted", move.reason)
    return deleted
