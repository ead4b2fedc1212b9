"""Job history for forecasting and fairness: each GPUJob recorded when its phase changes.

The leader writes a `JobRecord` (buffered by the store) when a job is first seen, when it
starts (all its workers bound: its queue wait ends) and when it ends; the start and end times
are when the operator saw the change.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from voltpack.operator.power.objects import epoch_s
from voltpack.store import BufferedStore, JobRecord

TERMINAL = ("Succeeded", "Failed")


class JobHistoryRecorder:
    """Remembers each job's last recorded phase; records a change once."""

    def __init__(self, store: BufferedStore, clock: Callable[[], float]) -> None:
        self._store = store
        self._clock = clock
        self._seen: dict[tuple[str, str, float], JobRecord] = {}

    def observe(self, jobs: Iterable[dict[str, Any]]) -> int:
        """Record the jobs whose phase changed since the last call; how many were recorded."""
        now = self._clock()
        current: dict[tuple[str, str, float], JobRecord] = {}
        recorded = 0
        for job in jobs:
            meta = job.get("metadata") or {}
            submitted = epoch_s(meta.get("creationTimestamp"))
            if not math.isfinite(submitted):
                submitted = now
            key = (meta.get("namespace") or "default", str(meta.get("name")), submitted)
            phase = str((job.get("status") or {}).get("phase") or "Pending")
            before = self._seen.get(key)
            if before is not None and before.state == phase:
                current[key] = before
                continue
            record = _record(job, key, phase, now, before)
            self._store.record_job(record)
            current[key] = record
            recorded += 1
        self._seen = current
        return recorded


def _record(
    job: dict[str, Any],
    key: tuple[str, str, float],
    phase: str,
    now: float,
    before: JobRecord | None,
) -> JobRecord:
    spec = job.get("spec") or {}
    workers = int(spec.get("workers") or 1)
    milli = spec.get("gpuMilli")
    per_worker = float(milli) / 1000 if milli else float(spec.get("gpusPerWorker", 1))
    models = spec.get("gpuModels") or []
    started = before.started_at_s if before is not None else None
    if started is None and phase in ("Scheduled", "Running", *TERMINAL):
        started = now
    return JobRecord(
        job=key[1],
        namespace=key[0],
        queue=str(spec.get("queue") or "default"),
        gpu_model=str(models[0]) if len(models) == 1 else None,
        gpus=workers * per_worker,
        priority=int(spec.get("priority") or 0),
        submitted_at_s=key[2],
        started_at_s=started,
        finished_at_s=now if phase in TERMINAL else None,
        state=phase,
    )
