"""GPU-demand targets: GPUs requested by alive pods or jobs, averaged per window.

Demand is what the workload asks for, whether or not it was placed: a pod counts
`num_gpu * gpu_milli / 1000` GPUs from its creation to its deletion (pending pods included),
a Gavel job counts `scale_factor` GPUs from its arrival for as long as it would run alone on
V100s (`total_steps` / Gavel's measured isolated V100 steps/s, the throughput Gavel's trace
generator used to turn Philly durations into steps; queueing delay is not modelled, so this is
the offered load).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from voltpack.forecast.series import TimeSeries
from voltpack.model.errors import TraceFormatError
from voltpack.model.workload import Pod
from voltpack.perf.throughput_table import ThroughputTable
from voltpack.sim.forecast_targets.windows import (
    FloatArray,
    alive_mean,
    seasons_for,
    step_label,
    window_count,
)
from voltpack.sim.traces.gavel import GavelJob, load_gavel_trace
from voltpack.sim.traces.openb import load_pods

FAMILY = "gpu_demand"
UNIT = "gpus"
ALL = "all"
ANY_MODEL = "any"
DEFAULT_MIN_SHARE = 0.01
"""A key (GPU model, queue) gets its own series when it holds at least this share of the
total GPU-time: smaller keys are mostly zeros, which no one needs forecast."""
GAVEL_REFERENCE_GPU = "v100"


def _series(source: str, key: str, step_s: float, start_s: float, values: FloatArray) -> TimeSeries:
    return TimeSeries(
        name=f"{source}/{FAMILY}/{key}/{step_label(step_s)}", family=FAMILY, step_s=step_s,
        start_s=start_s, values=values, unit=UNIT, seasons=seasons_for(step_s, values.size),
    )  # fmt: skip


def demand_series(
    source: str,
    begin_s: FloatArray,
    end_s: FloatArray,
    gpus: FloatArray,
    keys: Sequence[str],
    step_s: float,
    until_s: float,
    min_share: float = DEFAULT_MIN_SHARE,
    key_until_s: Mapping[str, float] | None = None,
) -> list[TimeSeries]:
    """One series for the total (`all`) and one per key holding >= `min_share` of GPU-time;
    windows start at the first begin (rounded down to a step) and end by `until_s` (or by the
    key's own `key_until_s`)."""
    start_s = math.floor(float(begin_s.min()) / step_s) * step_s
    windows = window_count(start_s, until_s, step_s)
    out = [_series(source, ALL, step_s, start_s, alive_mean(begin_s, end_s, gpus, start_s,
                                                            step_s, windows))]  # fmt: skip
    key_array = np.asarray(keys, dtype=object)
    gpu_time = gpus * (np.minimum(end_s, until_s) - begin_s)
    total = float(gpu_time.sum())
    for key in sorted(set(keys)):
        mask = key_array == key
        if key == ALL or total <= 0 or float(gpu_time[mask].sum()) < min_share * total:
            continue
        key_windows = (
            windows if key_until_s is None else window_count(start_s, key_until_s[key], step_s)
        )
        values = alive_mean(begin_s[mask], end_s[mask], gpus[mask], start_s, step_s, key_windows)
        out.append(_series(source, key, step_s, start_s, values))
    return out


def openb_source(path: Path) -> str:
    """`openb` for the default pod list, `openb-<variant>` for the others."""
    variant = path.stem.removeprefix("openb_pod_list_")
    return "openb" if variant in ("default", path.stem) else f"openb-{variant}"


def _pod_intervals(path: Path, pods: list[Pod]) -> tuple[FloatArray, FloatArray, FloatArray]:
    with_gpu = [p for p in pods if p.num_gpu > 0]
    if not with_gpu:
        raise TraceFormatError(f"{path}: no pod asks for a GPU; no GPU demand to build")
    if all(p.deletion_time_s is None and p.creation_time_s == 0 for p in with_gpu):
        raise TraceFormatError(
            f"{path}: fields creation_time and deletion_time are missing; GPU demand over time "
            "needs them (the multigpu variants carry no times)"
        )
    begin = np.array([p.creation_time_s for p in with_gpu], dtype=np.float64)
    # pods never deleted stay alive to the trace's last event
    last_s = max(*(p.deletion_time_s or 0.0 for p in with_gpu), float(begin.max()))
    end = np.array(
        [last_s if p.deletion_time_s is None else p.deletion_time_s for p in with_gpu],
        dtype=np.float64,
    )
    gpus = np.array([p.num_gpu * p.gpu_milli / 1000.0 for p in with_gpu], dtype=np.float64)
    return begin, end, gpus


def openb_gpu_demand(
    path: Path, step_s: float, by: str, min_share: float = DEFAULT_MIN_SHARE
) -> list[TimeSeries]:
    """GPU demand of an openb pod list per window, in total and per `by`: "gpu_model" (the
    pod's `gpu_spec`, "any" when empty; a spec of several models is one key, e.g. "P100|T4")
    or "queue" (the pod's `qos`). Pods never deleted stay alive to the trace's last event."""
    pods = load_pods(path)
    begin, end, gpus = _pod_intervals(path, pods)
    with_gpu = [p for p in pods if p.num_gpu > 0]
    if by == "gpu_model":
        keys = ["|".join(sorted(p.gpu_models)) or ANY_MODEL for p in with_gpu]
    elif by == "queue":
        keys = [p.qos for p in with_gpu]
    else:
        raise ValueError(f"by must be 'gpu_model' or 'queue', got {by!r}")
    return demand_series(
        openb_source(path), begin, end, gpus, keys, step_s, float(end.max()), min_share
    )


def gavel_job_duration_s(job: GavelJob, table: ThroughputTable) -> float:
    """How long the job runs alone on `scale_factor` V100s (Gavel's reference GPU)."""
    return job.total_steps / table.rate(job.job_type, GAVEL_REFERENCE_GPU, job.scale_factor)


def gavel_gpu_demand(
    trace_paths: Sequence[Path],
    table: ThroughputTable,
    step_s: float,
    source: str = "gavel",
    min_share: float = DEFAULT_MIN_SHARE,
) -> list[TimeSeries]:
    """GPU demand of Gavel msr traces per window: one queue per file (a Philly virtual
    cluster, keyed by the file's stem) and the total over all files (their clocks share
    time 0). A series ends at its last arrival: after it, it would only drain."""
    begin: list[float] = []
    end: list[float] = []
    gpus: list[float] = []
    keys: list[str] = []
    for path in trace_paths:
        for job in load_gavel_trace(path):
            begin.append(job.arrival_s)
            end.append(job.arrival_s + gavel_job_duration_s(job, table))
            gpus.append(float(job.scale_factor))
            keys.append(path.stem)
    if not begin:
        raise TraceFormatError("no Gavel trace files given")
    begin_a = np.asarray(begin, dtype=np.float64)
    last_arrival_s: dict[str, float] = {}
    for key, arrival_s in zip(keys, begin, strict=True):
        last_arrival_s[key] = max(arrival_s, last_arrival_s.get(key, arrival_s))
    return demand_series(
        source, begin_a, np.asarray(end, dtype=np.float64), np.asarray(gpus, dtype=np.float64),
        keys, step_s, float(begin_a.max()), min_share, last_arrival_s,
    )  # fmt: skip
