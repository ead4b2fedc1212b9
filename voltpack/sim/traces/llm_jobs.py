"""An LLM-cluster training-job generator after Acme's Kalos and Seren clusters (NSDI'24).

Jobs are `training_jobs.TrainingJob`s, written and read with the same CSV format
(`write_training_jobs` / `load_training_jobs`); the job type is the prefix of `job_id`
(`pretrain-0042`), so the format needs no new column. The tables and the source of every
number are in `acme_stats` (published, read off a plot, assumed, or solved from a published
share); docs/llm_workload.md summarises them.

Drawing, with one `numpy` generator seeded `seed` (same inputs, same trace):

- type: from the cluster's job-type shares (`JobTypeStats.count_share`);
- GPUs: from the type's GPU-count table; counts above 8 are whole 8-GPU hosts;
- duration: log-normal with the type's median and sigma;
- a job larger than `max_gpus` (default: the cluster's GPUs, so every job fits an empty
  cluster) is cut to the largest count <= `max_gpus` that is a multiple of 8 (of 1 below 8)
  and of its model's tensor x pipeline (x expert_parallel), and its duration grows by the
  same factor, so its GPU-seconds (its work) stay as drawn;
- duration: truncated to `max_duration_s` (default 2 days as for Philly: the trace's tail
  reaches 7 days on Kalos and 14 on Seren, longer than a few thousand jobs take to arrive);
- model: by type and GPU count (`JobTypeStats.models`, `model_for_gpus`);
- steps: duration / the model's ideal step time on those GPUs (`ideal_step_s`), rounded,
  at least 1, so the durations are run times on an ideal placement;
- arrivals: Poisson, the first at 0 s, at rate = target_load x cluster GPUs / (mean
  GPU-seconds per sampled job): the offered load is `target_load` up to Poisson noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.training_models import (
    TrainingModelCatalog,
    default_training_models,
    model_parallel_gpus,
)
from voltpack.sim.traces.acme_stats import ACME_STATS, JOB_TYPES, Cluster, JobTypeStats
from voltpack.sim.traces.training_jobs import (
    DEFAULT_MAX_DURATION_S,
    IdealStep,
    TrainingJob,
    model_for_gpus,
    poisson_arrivals_s,
)

__all__ = [
    "LlmJobsConfig",
    "expected_shares",
    "generate_llm_jobs",
    "job_type_of",
    "solve_pretrain_median_s",
]

HOST_GPUS = 8
"""Multi-host jobs use whole hosts of this many GPUs (Acme's nodes have 8 A100s)."""


@dataclass(frozen=True)
class LlmJobsConfig:
    """How `generate_llm_jobs` draws a trace."""

    num_jobs: int = 4000
    seed: int = 0
    cluster: Cluster = "kalos"
    """Which Acme cluster's statistics: "kalos" or "seren"."""
    target_load: float = 0.9
    """Offered GPU-seconds per second over the cluster's GPUs, at ideal step times."""
    max_gpus: int | None = None
    """Largest job, in GPUs (None: the cluster's GPUs)."""
    max_duration_s: float | None = DEFAULT_MAX_DURATION_S
    """Durations above this are truncated to it (None: keep the tail)."""
    stats: Mapping[str, JobTypeStats] | None = field(default=None, compare=False)
    """Override of the job-type tables (None: `ACME_STATS[cluster]`)."""

    def __post_init__(self) -> None:
        if self.num_jobs < 1:
            raise InvalidRequestError(f"num_jobs={self.num_jobs} must be >= 1")
        if self.cluster not in ACME_STATS:
            raise InvalidRequestError(
                f"cluster={self.cluster!r} is unknown; use one of {sorted(ACME_STATS)}"
            )
        if not (math.isfinite(self.target_load) and self.target_load > 0):
            raise InvalidRequestError(f"target_load={self.target_load} must be a number > 0")
        if self.max_gpus is not None and self.max_gpus < 1:
            raise InvalidRequestError(f"max_gpus={self.max_gpus} must be >= 1")
        if self.max_duration_s is not None and not self.max_duration_s > 0:
            raise InvalidRequestError(f"max_duration_s={self.max_duration_s} must be > 0")

    def tables(self) -> Mapping[str, JobTypeStats]:
        """The job-type tables this config draws from."""
        return self.stats if self.stats is not None else ACME_STATS[self.cluster]


def job_type_of(job: TrainingJob) -> str:
    """The job type a generated job's id starts with (`pretrain-0042` -> `pretrain`)."""
    kind = job.job_id.rsplit("-", 1)[0]
    if kind not in JOB_TYPES:
        raise InvalidRequestError(f"job_id={job.job_id!r} does not start with a job type")
    return kind


def _fit_gpus(gpus: int, max_gpus: int) -> int:
    """`gpus` cut to at most `max_gpus`, whole hosts above one host."""
    if gpus <= max_gpus:
        return gpus
    if max_gpus >= HOST_GPUS:
        return max_gpus - max_gpus % HOST_GPUS
    return max_gpus


def generate_llm_jobs(
    config: LlmJobsConfig,
    cluster_gpus: int,
    ideal_step_s: IdealStep,
    catalog: TrainingModelCatalog | None = None,
) -> list[TrainingJob]:
    """`config.num_jobs` jobs in arrival order, drawn as the module docstring says."""
    if cluster_gpus < 1:
        raise InvalidRequestError(f"cluster_gpus={cluster_gpus} must be >= 1")
    catalog = catalog or default_training_models()
    max_gpus = min(config.max_gpus or cluster_gpus, cluster_gpus)
    tables = config.tables()
    kinds = [kind for kind in JOB_TYPES if kind in tables]
    shares = np.array([tables[kind].count_share for kind in kinds], dtype=np.float64)
    rng = np.random.default_rng(config.seed)
    type_index = rng.choice(len(kinds), size=config.num_jobs, p=shares / shares.sum())
    gpus = np.empty(config.num_jobs, dtype=np.int64)
    durations = np.empty(config.num_jobs, dtype=np.float64)
    for index, kind in enumerate(kinds):
        rows = np.flatnonzero(type_index == index)
        stats = tables[kind]
        counts = np.array([count for count, _ in stats.gpus], dtype=np.int64)
        weights = np.array([weight for _, weight in stats.gpus], dtype=np.float64)
        gpus[rows] = counts[rng.choice(len(counts), size=len(rows), p=weights / weights.sum())]
        durations[rows] = stats.duration_median_s * np.exp(
            stats.duration_sigma * rng.standard_normal(len(rows))
        )
    models: list[str] = []
    for row in range(config.num_jobs):
        stats = tables[kinds[int(type_index[row])]]
        drawn = int(gpus[row])
        count = _fit_gpus(drawn, max_gpus)
        model = model_for_gpus(count, catalog, stats.models)
        count -= count % model_parallel_gpus(model)
        gpus[row] = count
        durations[row] *= drawn / count
        models.append(model.name)
    if config.max_duration_s is not None:
        durations = np.minimum(durations, config.max_duration_s)
    arrivals = poisson_arrivals_s(rng, durations, gpus, config.target_load, cluster_gpus)
    ideal: dict[tuple[str, int], float] = {}
    width = len(str(config.num_jobs - 1))
    jobs: list[TrainingJob] = []
    for row in range(config.num_jobs):
        count = int(gpus[row])
        key = (models[row], count)
        if key not in ideal:
            ideal[key] = ideal_step_s(catalog.get(models[row]), count)
        jobs.append(
            TrainingJob(
                job_id=f"{kinds[int(type_index[row])]}-{row:0{width}d}",
                arrival_s=round(float(arrivals[row]), 3),
                num_gpus=count,
                model=models[row],
                steps=max(1, round(float(durations[row]) / ideal[key])),
            )
        )
    return jobs


def _truncated_lognormal_mean(median_s: float, sigma: float, cap_s: float | None) -> float:
    """E[min(D, cap)] for D log-normal with `median_s` and `sigma` (cap None: E[D])."""
    mu = math.log(median_s)
    full = math.exp(mu + sigma * sigma / 2)
    if cap_s is None:
        return full

    def phi(x: float) -> float:
        return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))

    log_cap = math.log(cap_s)
    below = full * phi((log_cap - mu - sigma * sigma) / sigma)
    return below + cap_s * (1.0 - phi((log_cap - mu) / sigma))


def expected_shares(
    tables: Mapping[str, JobTypeStats], max_duration_s: float | None = DEFAULT_MAX_DURATION_S
) -> dict[str, tuple[float, float]]:
    """Per job type, its expected (share of jobs, share of GPU time) under `tables` when no
    job is cut to `max_gpus` (GPU count and duration are drawn independently per type)."""
    total_count = sum(stats.count_share for stats in tables.values())
    gpu_time: dict[str, float] = {}
    for kind, stats in tables.items():
        weight = sum(p for _, p in stats.gpus)
        mean_gpus = sum(count * p for count, p in stats.gpus) / weight
        mean_s = _truncated_lognormal_mean(
            stats.duration_median_s, stats.duration_sigma, max_duration_s
        )
        gpu_time[kind] = stats.count_share / total_count * mean_gpus * mean_s
    total_time = sum(gpu_time.values())
    return {
        kind: (stats.count_share / total_count, gpu_time[kind] / total_time)
        for kind, stats in tables.items()
    }


def solve_pretrain_median_s(
    tables: Mapping[str, JobTypeStats],
    gpu_time_share: float,
    max_duration_s: float | None = DEFAULT_MAX_DURATION_S,
) -> float:
    """The pretraining duration median that gives it `gpu_time_share` of the GPU time
    (bisection on a log scale; how the [solved] medians of `acme_stats` were set)."""
    low, high = 1.0, 1e7
    for _ in range(200):
        middle = math.sqrt(low * high)
        trial = dict(tables)
        trial["pretrain"] = _replace_median(tables["pretrain"], middle)
        if expected_shares(trial, max_duration_s)["pretrain"][1] < gpu_time_share:
            low = middle
        else:
            high = middle
    return math.sqrt(low * high)


def _replace_median(stats: JobTypeStats, median_s: float) -> JobTypeStats:
    return replace(stats, duration_median_s=median_s)
