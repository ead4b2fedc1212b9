"""Training-job traces for the topology simulator: a CSV format and a Philly-style generator.

**Format.** A CSV file with the header `job_id,arrival_s,num_gpus,model,steps` (extra columns
are ignored), one job per row:

- `job_id`: any non-empty text, unique in the file;
- `arrival_s`: submission time in seconds (a finite number >= 0; rows need not be sorted);
- `num_gpus`: the job's GPUs, an integer >= 1, a multiple of the model's tensor x pipeline
  degree (x expert_parallel for a mixture-of-experts model; data parallelism takes the rest,
  `voltpack.perf.training_models.default_parallelism`);
- `model`: a name from the training-model catalog (`voltpack/perf/training_models.yaml`),
  case-insensitive;
- `steps`: optimizer steps to run, an integer >= 1.

A malformed row raises `TraceFormatError` naming the file, the line and the field.

**Generator.** `generate_philly_jobs` draws (duration, GPU count) pairs from Microsoft's Philly
trace (`data/gavel/philly_job_distribution.csv`, as Gavel's generator uses it), so duration
and size stay correlated as in the trace, then:

- GPUs: Philly's count times `gpu_scale` (default 8: Philly's 1/2/4/8-GPU jobs become 8, 16,
  32 and 64 GPUs, i.e. 1 to 8 whole 8-GPU hosts. Philly's jobs fit in one host, so unscaled
  they would never touch the network and topology would not matter; today's LLM clusters run
  jobs of whole hosts);
- model: by GPU count from `MODEL_BY_GPUS`, the largest threshold not above the count whose
  model's tensor x pipeline divides it (GPT 1.3B for 1 GPU up to GPT-3 175B from 128 GPUs);
- steps: duration / the model's ideal step time on that many GPUs (`ideal_step_s`, e.g. the
  topology's best placement), rounded, at least 1, so that Philly's durations are the jobs'
  run times on an ideal placement;
- arrivals: Poisson, the first at 0 s. The rate is set from the sampled jobs themselves:
  rate = target_load x cluster GPUs / (mean GPU-seconds per sampled job), so over the trace's
  arrival span the offered load (GPU-seconds asked per second over the cluster's GPUs) is
  `target_load` up to the Poisson noise of the span (about 1/sqrt(jobs));
- durations: truncated to `max_duration_s` (default 2 days, Philly's 86th percentile; None
  keeps them). Philly's tail reaches 60 days; untruncated, a trace of a few thousand jobs
  arrives in less time than its longest job runs, and the cluster mostly drains one
  long job after the last arrival instead of being loaded.

Everything is drawn from one `numpy` generator seeded `seed`: same inputs, same trace.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from voltpack.model.csv_rows import csv_rows, integer_field, number_field
from voltpack.model.errors import InvalidRequestError, TraceFormatError
from voltpack.perf.training_models import (
    PerfModelError,
    TrainingModel,
    TrainingModelCatalog,
    default_parallelism,
    default_training_models,
    model_parallel_gpus,
)
from voltpack.sim.traces.gavel_generator import PhillyDistribution

COLUMNS = ("job_id", "arrival_s", "num_gpus", "model", "steps")

MODEL_BY_GPUS: tuple[tuple[int, str], ...] = (
    (1, "gpt-1.3b"),
    (2, "gpt-2.7b"),
    (4, "gpt-6.7b"),
    (8, "gpt-13b"),
    (16, "megatron-18.4b"),
    (32, "megatron-39.1b"),
    (64, "llama-2-70b"),
    (128, "gpt-175b"),
)
"""(least GPUs, model): a job of n GPUs trains the model of the largest threshold <= n whose
tensor x pipeline degree divides n."""


DEFAULT_MAX_DURATION_S = 2 * 86_400.0


@dataclass(frozen=True)
class TrainingJob:
    """One training job: when it arrives, its GPUs, its model and how many steps it runs."""

    job_id: str
    arrival_s: float
    num_gpus: int
    model: str
    steps: int


def load_training_jobs(
    path: Path, catalog: TrainingModelCatalog | None = None
) -> list[TrainingJob]:
    """The jobs of a trace CSV, in arrival order (file order among equal times).

    Raises TraceFormatError naming the file, line and field for a malformed row, an unknown
    model (listing the known ones), or a GPU count the model's parallelism cannot use.
    """
    catalog = catalog or default_training_models()
    jobs: list[tuple[float, int, TrainingJob]] = []
    seen: dict[str, int] = {}
    for line, row in csv_rows(path, COLUMNS):
        where = f"{path}:{line}"
        job_id = row["job_id"].strip()
        if not job_id:
            raise TraceFormatError(f"{where}: field job_id is empty")
        if job_id in seen:
            raise TraceFormatError(
                f"{where}: field job_id={job_id!r} repeats the job of line {seen[job_id]}"
            )
        seen[job_id] = line
        arrival_s = number_field(where, row, "arrival_s", minimum=0.0)
        num_gpus = integer_field(where, row, "num_gpus", 1)
        steps = integer_field(where, row, "steps", 1)
        name = row["model"].strip()
        try:
            model = catalog.get(name)
        except PerfModelError as exc:
            raise TraceFormatError(f"{where}: field model: {exc}") from None
        try:
            default_parallelism(model, num_gpus)
        except PerfModelError as exc:
            raise TraceFormatError(f"{where}: field num_gpus: {exc}") from None
        jobs.append((arrival_s, line, TrainingJob(job_id, arrival_s, num_gpus, model.name, steps)))
    if not jobs:
        raise TraceFormatError(f"{path}: no jobs after the header ({','.join(COLUMNS)})")
    jobs.sort(key=lambda item: (item[0], item[1]))
    return [job for _, _, job in jobs]


def write_training_jobs(path: Path, jobs: Sequence[TrainingJob]) -> None:
    """Write `jobs` as a trace CSV that `load_training_jobs` reads back unchanged."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(COLUMNS)
        for job in jobs:
            writer.writerow([job.job_id, repr(job.arrival_s), job.num_gpus, job.model, job.steps])


def model_for_gpus(
    num_gpus: int,
    catalog: TrainingModelCatalog | None = None,
    rule: Sequence[tuple[int, str]] = MODEL_BY_GPUS,
) -> TrainingModel:
    """The model a job of `num_gpus` trains under `rule` (see `MODEL_BY_GPUS`)."""
    catalog = catalog or default_training_models()
    for least, name in sorted(rule, reverse=True):
        if least > num_gpus:
            continue
        model = catalog.get(name)
        if num_gpus % model_parallel_gpus(model) == 0:
            return model
    raise InvalidRequestError(
        f"no model of the rule fits {num_gpus} GPUs (each model's tensor x pipeline (x "
        "expert_parallel) must divide the GPU count); add a threshold for it"
    )


@dataclass(frozen=True)
class PhillyJobsConfig:
    """How `generate_philly_jobs` draws a trace."""

    num_jobs: int = 4000
    seed: int = 0
    target_load: float = 0.9
    """Offered GPU-seconds per second over the cluster's GPUs, at ideal step times."""
    gpu_scale: int = 8
    """Philly's GPU count is multiplied by this."""
    max_duration_s: float | None = DEFAULT_MAX_DURATION_S
    """Philly durations above this are truncated to it (None: keep the tail)."""
    model_by_gpus: tuple[tuple[int, str], ...] = MODEL_BY_GPUS

    def __post_init__(self) -> None:
        if self.num_jobs < 1:
            raise InvalidRequestError(f"num_jobs={self.num_jobs} must be >= 1")
        if not (math.isfinite(self.target_load) and self.target_load > 0):
            raise InvalidRequestError(f"target_load={self.target_load} must be a number > 0")
        if self.gpu_scale < 1:
            raise InvalidRequestError(f"gpu_scale={self.gpu_scale} must be an integer >= 1")
        if self.max_duration_s is not None and not self.max_duration_s > 0:
            raise InvalidRequestError(f"max_duration_s={self.max_duration_s} must be > 0")


IdealStep = Callable[[TrainingModel, int], float]
"""Seconds per step of a model on that many GPUs, placed ideally."""


def poisson_arrivals_s(
    rng: np.random.Generator,
    durations_s: npt.NDArray[np.float64],
    gpus: npt.NDArray[np.int64],
    target_load: float,
    cluster_gpus: int,
) -> npt.NDArray[np.float64]:
    """Poisson arrival times, the first at 0 s, at the rate that offers `target_load` of the
    cluster's GPUs: target_load x cluster GPUs / mean GPU-seconds per job."""
    mean_gpu_s = float((durations_s * gpus).mean())
    rate_per_s = target_load * cluster_gpus / mean_gpu_s
    gaps = rng.exponential(1.0 / rate_per_s, size=len(durations_s))
    gaps[0] = 0.0
    return np.asarray(np.cumsum(gaps), dtype=np.float64)


def generate_philly_jobs(
    philly: PhillyDistribution,
    config: PhillyJobsConfig,
    cluster_gpus: int,
    ideal_step_s: IdealStep,
    catalog: TrainingModelCatalog | None = None,
) -> list[TrainingJob]:
    """`config.num_jobs` jobs in arrival order, drawn as the module docstring says."""
    if cluster_gpus < 1:
        raise InvalidRequestError(f"cluster_gpus={cluster_gpus} must be >= 1")
    catalog = catalog or default_training_models()
    rng = np.random.default_rng(config.seed)
    picks = rng.integers(0, len(philly.durations_s), size=config.num_jobs)
    durations = np.asarray(philly.durations_s, dtype=np.float64)[picks]
    if config.max_duration_s is not None:
        durations = np.minimum(durations, config.max_duration_s)
    gpus = np.asarray(philly.num_gpus, dtype=np.int64)[picks] * config.gpu_scale
    too_big = gpus > cluster_gpus
    if too_big.any():
        raise InvalidRequestError(
            f"a sampled job asks for {int(gpus[too_big][0])} GPUs, the cluster has "
            f"{cluster_gpus}; lower gpu_scale"
        )
    arrivals = poisson_arrivals_s(rng, durations, gpus, config.target_load, cluster_gpus)
    ideal: dict[tuple[str, int], float] = {}
    jobs: list[TrainingJob] = []
    width = len(str(config.num_jobs - 1))
    for index in range(config.num_jobs):
        count = int(gpus[index])
        model = model_for_gpus(count, catalog, config.model_by_gpus)
        key = (model.name, count)
        if key not in ideal:
            ideal[key] = ideal_step_s(model, count)
        steps = max(1, round(float(durations[index]) / ideal[key]))
        jobs.append(
            TrainingJob(
                job_id=f"job-{index:0{width}d}",
                arrival_s=round(float(arrivals[index]), 3),
                num_gpus=count,
                model=model.name,
                steps=steps,
            )
        )
    return jobs


def offered_load(jobs: Sequence[TrainingJob], cluster_gpus: int, duration_of: IdealStep) -> float:
    """GPU-seconds the jobs ask for (steps x `duration_of` per step) per second of the
    arrival span, over the cluster's GPUs (the mean gap is added to the span, so one job
    counts too)."""
    if not jobs:
        return 0.0
    catalog = default_training_models()
    work = sum(
        job.num_gpus * job.steps * duration_of(catalog.get(job.model), job.num_gpus) for job in jobs
    )
    first = min(job.arrival_s for job in jobs)
    last = max(job.arrival_s for job in jobs)
    span = (last - first) * len(jobs) / max(1, len(jobs) - 1) if len(jobs) > 1 else 1.0
    return work / span / cluster_gpus
