"""Synthetic Gavel-format job traces, drawn as Gavel's own trace generator draws them.

Gavel (stanford-futuredata/gavel, `scheduler/scripts/utils/generate_trace.py`) keeps one
`random.Random` per quantity, seeded `seed`, `seed + 1`, `seed + 2`, `seed + 3`:

- job type (stream `seed`): uniform over Gavel's 26-entry job table, in the table's order;
- arrival (stream `seed + 1`): the first job at 0 s, then gaps of `-ln(1 - U) * lam` seconds
  (Poisson arrivals with mean gap `lam`), written truncated to whole seconds;
- duration (stream `seed + 2`): one of `linspace(min_h, max_h, n)` hours (1, 2, 3, 4 by
  default), converted to steps with the job's throughput on a V100: `int(rate * duration_s)`;
- scale factor (stream `seed + 3`, only with `-m` and for distributed job types): U in
  [0.7, 0.8] -> 2 GPUs, U >= 0.8 -> 4 GPUs, else 1.

With the defaults this module reproduces Gavel's output job for job (the shipped
`data/gavel/generated/gavel_gen_120jobs_lam1200_seed0.trace` byte for byte). Two further
duration sources: `loguniform`, the Philly-fitted draw of Gavel's `utils.generate_job`
(80%: 10^U(1.5, 3) minutes, 20%: 10^U(3, 4) minutes), and `philly`, which draws (duration,
GPU count) pairs from Microsoft's Philly trace and then a job type that can run at that GPU
count, as `generate_job` does. Priorities (`multi_priority`, 20% of jobs weight 5, as Gavel's
`generate_multi_priority_jobs`) come from a fifth stream, `seed + 4`, so that turning them on
changes no other draw.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from voltpack.model.csv_rows import csv_rows
from voltpack.model.errors import InvalidRequestError, TraceFormatError, VoltpackError
from voltpack.perf.throughput_table import ThroughputTable, load_gavel_throughputs
from voltpack.sim.traces.gavel import GavelJob, write_gavel_trace

DurationSource = Literal["gavel", "loguniform", "philly"]
PhillyGpuMapping = Literal["nearest", "keep"]
DURATION_SOURCES: tuple[DurationSource, ...] = ("gavel", "loguniform", "philly")
PHILLY_GPU_MAPPINGS: tuple[PhillyGpuMapping, ...] = ("nearest", "keep")

HIGH_PRIORITY_WEIGHT = 5.0
HIGH_PRIORITY_SHARE = 0.2


@dataclass(frozen=True)
class JobTemplate:
    """One entry of Gavel's job table (`scheduler/job_table.py`): a model and how to run it."""

    job_type: str
    command: str
    working_directory: str
    num_steps_arg: str
    needs_data_dir: bool = True
    distributed: bool = False


def _family(
    name: str, command: str, directory: str, steps_arg: str, batches: Sequence[int], dist: bool
) -> list[JobTemplate]:
    return [
        JobTemplate(
            f"{name} (batch size {batch})",
            command.format(batch=batch),
            directory,
            steps_arg,
            distributed=dist,
        )
        for batch in batches
    ]


GAVEL_JOB_TABLE: tuple[JobTemplate, ...] = (
    *_family(
        "ResNet-18",
        "python3 main.py --data_dir=%s/cifar10 --batch_size {batch}",
        "image_classification/cifar10",
        "--num_steps",
        (16, 32, 64, 128, 256),
        True,
    ),
    *_family(
        "ResNet-50",
        "python3 main.py -j 8 -a resnet50 -b {batch} %s/imagenet/",
        "image_classification/imagenet",
        "--num_minibatches",
        (16, 32, 64, 128),
        True,
    ),
    *_family(
        "Transformer",
        "python3 train.py -data %s/translation/multi30k.atok.low.pt -batch_size {batch} "
        "-proj_share_weight",
        "translation",
        "-step",
        (16, 32, 64, 128, 256),
        True,
    ),
    *_family(
        "LM",
        "python main.py --cuda --data %s/wikitext2 --batch_size {batch}",
        "language_modeling",
        "--steps",
        (5, 10, 20, 40, 80),
        True,
    ),
    *_family(
        "Recommendation",
        "python3 train.py --data_dir %s/ml-20m/pro_sg/ --batch_size {batch}",
        "recommendation",
        "-n",
        (512, 1024, 2048, 4096, 8192),
        False,
    ),
    JobTemplate(
        "A3C",
        "python3 main.py --env PongDeterministic-v4 --workers 4 --amsgrad True",
        "rl",
        "--max-steps",
        needs_data_dir=False,
    ),
    JobTemplate(
        "CycleGAN",
        "python3 cyclegan.py --dataset_path %s/monet2photo --decay_epoch 0",
        "cyclegan",
        "--n_steps",
    ),
)
"""Gavel's job table in Gavel's order (the order decides which type a seed draws)."""


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate; defaults are those of Gavel's `generate_trace.py`.

    `mean_interarrival_s` is Gavel's `-l/--lam`; `multi_gpu` is `-m`; `min_duration_h`,
    `max_duration_h` and `num_durations` are `-a`, `-b`, `-n` (used by the `gavel` source).
    `philly_gpus` maps a Philly GPU count to the nearest count the throughput table measured
    for the job type (`nearest`) or keeps it (`keep`, the table then estimates the rate).
    """

    num_jobs: int
    mean_interarrival_s: float
    seed: int = 0
    multi_gpu: bool = False
    durations: DurationSource = "gavel"
    min_duration_h: float = 1.0
    max_duration_h: float = 4.0
    num_durations: int = 4
    philly_gpus: PhillyGpuMapping = "nearest"
    multi_priority: bool = False
    reference_gpu: str = "v100"
    whole_second_arrivals: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.num_jobs, bool) or not isinstance(self.num_jobs, int):
            raise InvalidRequestError(f"num_jobs={self.num_jobs!r} must be an integer >= 1")
        if self.num_jobs < 1:
            raise InvalidRequestError(f"num_jobs={self.num_jobs} must be >= 1")
        if not _positive(self.mean_interarrival_s):
            raise InvalidRequestError(
                f"mean_interarrival_s={self.mean_interarrival_s!r} must be a finite number > 0 "
                f"(Gavel's -l/--lam, the mean gap between arrivals in seconds)"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InvalidRequestError(f"seed={self.seed!r} must be an integer")
        if self.durations not in DURATION_SOURCES:
            raise InvalidRequestError(
                f"durations={self.durations!r} must be one of {', '.join(DURATION_SOURCES)}"
            )
        if self.philly_gpus not in PHILLY_GPU_MAPPINGS:
            raise InvalidRequestError(
                f"philly_gpus={self.philly_gpus!r} must be one of {', '.join(PHILLY_GPU_MAPPINGS)}"
            )
        if not _positive(self.min_duration_h):
            raise InvalidRequestError(
                f"min_duration_h={self.min_duration_h!r} must be a finite number > 0"
            )
        if not _positive(self.max_duration_h) or self.max_duration_h < self.min_duration_h:
            raise InvalidRequestError(
                f"max_duration_h={self.max_duration_h!r} must be finite and >= "
                f"min_duration_h={self.min_duration_h!r}"
            )
        if isinstance(self.num_durations, bool) or not isinstance(self.num_durations, int):
            raise InvalidRequestError(f"num_durations={self.num_durations!r} must be an integer")
        if self.num_durations < 1:
            raise InvalidRequestError(f"num_durations={self.num_durations} must be >= 1")


@dataclass(frozen=True)
class PhillyDistribution:
    """(duration, GPU count) pairs of Philly jobs, sampled together; index i is one job."""

    durations_s: tuple[float, ...]
    num_gpus: tuple[int, ...]
    source: str = "in memory"

    def __post_init__(self) -> None:
        if not self.durations_s or len(self.durations_s) != len(self.num_gpus):
            raise InvalidRequestError(
                f"{self.source}: durations_s and num_gpus must be non-empty and of equal length "
                f"({len(self.durations_s)} vs {len(self.num_gpus)})"
            )


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def load_philly_distribution(path: Path) -> PhillyDistribution:
    """Read a CSV with columns `duration_s` (> 0) and `num_gpus` (integer >= 1)."""
    durations_s: list[float] = []
    num_gpus: list[int] = []
    for line, row in csv_rows(path, ("duration_s", "num_gpus")):
        text = row["duration_s"].strip()
        try:
            duration_s = float(text)
        except ValueError:
            raise TraceFormatError(
                f"{path}:{line}: field duration_s={text!r} is not a number"
            ) from None
        if not _positive(duration_s):
            raise TraceFormatError(
                f"{path}:{line}: field duration_s={text!r} must be a finite number > 0"
            )
        text = row["num_gpus"].strip()
        try:
            gpus = float(text)
        except ValueError:
            raise TraceFormatError(
                f"{path}:{line}: field num_gpus={text!r} is not a number"
            ) from None
        if not math.isfinite(gpus) or not gpus.is_integer() or gpus < 1:
            raise TraceFormatError(
                f"{path}:{line}: field num_gpus={text!r} must be an integer >= 1"
            )
        durations_s.append(duration_s)
        num_gpus.append(int(gpus))
    if not durations_s:
        raise TraceFormatError(f"{path}: no rows after the header")
    return PhillyDistribution(tuple(durations_s), tuple(num_gpus), str(path))


def _gavel_scale_factor(rng: random.Random) -> int:
    draw = rng.uniform(0, 1)
    if 0.7 <= draw <= 0.8:
        return 2
    if draw >= 0.8:
        return 4
    return 1


def _loguniform_duration_s(rng: random.Random) -> float:
    if rng.random() >= 0.8:
        return 60 * 10 ** rng.uniform(3, 4)
    return 60 * 10 ** rng.uniform(1.5, 3)


def _linspace(low: float, high: float, count: int) -> list[float]:
    if count == 1:
        return [low]
    step = (high - low) / (count - 1)
    # as numpy.linspace: the last point is exactly `high`
    return [low + i * step for i in range(count - 1)] + [high]


def _measured_counts(table: ThroughputTable, job_type: str, gpu: str) -> list[int]:
    return sorted(
        w for (job, w), rates in table.steps_per_s.items() if job == job_type and gpu in rates
    )


def _nearest(counts: list[int], wanted: int) -> int:
    # a tie (3 between 2 and 4) goes to the smaller count
    return min(counts, key=lambda count: (abs(count - wanted), count))


class _Streams:
    """Gavel's independent random streams, one per quantity."""

    def __init__(self, seed: int) -> None:
        self.job = random.Random(seed)
        self.arrival = random.Random(seed + 1)
        self.duration = random.Random(seed + 2)
        self.scale = random.Random(seed + 3)
        self.priority = random.Random(seed + 4)


def _check_table(config: GeneratorConfig, table: ThroughputTable) -> None:
    if config.reference_gpu not in table.gpu_models:
        raise InvalidRequestError(
            f"reference_gpu={config.reference_gpu!r} has no throughput in {table.source}; "
            f"measured: {', '.join(table.gpu_models)}"
        )
    missing = sorted({t.job_type for t in GAVEL_JOB_TABLE} - set(table.job_types))
    if missing:
        raise InvalidRequestError(
            f"{table.source} lacks Gavel job type(s) {', '.join(missing)}; generate_trace needs "
            f"a throughput for every type in Gavel's job table"
        )


def _philly_job(
    config: GeneratorConfig, table: ThroughputTable, philly: PhillyDistribution, rng: _Streams
) -> tuple[JobTemplate, int, float]:
    index = rng.duration.randrange(len(philly.durations_s))
    duration_s = philly.durations_s[index]
    wanted = philly.num_gpus[index] if config.multi_gpu else 1
    while True:
        template = rng.job.choice(GAVEL_JOB_TABLE)
        if wanted == 1 or template.distributed:
            break
    scale_factor = wanted
    if config.philly_gpus == "nearest" and wanted > 1:
        counts = _measured_counts(table, template.job_type, config.reference_gpu)
        scale_factor = _nearest(counts, wanted) if counts else wanted
    return template, scale_factor, duration_s


def generate_trace(
    config: GeneratorConfig, table: ThroughputTable, philly: PhillyDistribution | None = None
) -> list[GavelJob]:
    """`config.num_jobs` jobs in arrival order; same config and table, same trace.

    `philly` is required when `config.durations` is `philly`. Steps are the duration times the
    job's steps/s on `scale_factor` GPUs of `config.reference_gpu`, truncated, at least 1.
    """
    if config.durations == "philly" and philly is None:
        raise InvalidRequestError(
            "durations='philly' needs a PhillyDistribution (load_philly_distribution(path))"
        )
    _check_table(config, table)
    rng = _Streams(config.seed)
    hours = _linspace(config.min_duration_h, config.max_duration_h, config.num_durations)
    jobs: list[GavelJob] = []
    arrival_s = 0.0
    for index in range(config.num_jobs):
        if config.durations == "philly":
            assert philly is not None
            template, scale_factor, duration_s = _philly_job(config, table, philly, rng)
        else:
            template = rng.job.choice(GAVEL_JOB_TABLE)
            scale_factor = 1
            if config.multi_gpu and template.distributed:
                scale_factor = _gavel_scale_factor(rng.scale)
            if config.durations == "gavel":
                duration_s = rng.duration.choice(hours) * 3600
            else:
                duration_s = _loguniform_duration_s(rng.duration)
        steps_per_s = table.rate(template.job_type, config.reference_gpu, scale_factor)
        total_steps = max(1, int(steps_per_s * duration_s))
        weight = 1.0
        if config.multi_priority and rng.priority.uniform(0, 1) <= HIGH_PRIORITY_SHARE:
            weight = HIGH_PRIORITY_WEIGHT
        if index > 0:
            arrival_s += -math.log(1.0 - rng.arrival.random()) * config.mean_interarrival_s
        jobs.append(
            GavelJob(
                job_type=template.job_type,
                total_steps=total_steps,
                scale_factor=scale_factor,
                arrival_s=float(math.floor(arrival_s))
                if config.whole_second_arrivals
                else arrival_s,
                priority_weight=weight,
                command=template.command,
                working_directory=template.working_directory,
                num_steps_arg=template.num_steps_arg,
                needs_data_dir=template.needs_data_dir,
            )
        )
    return jobs


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m voltpack.sim.traces.gavel_generator`: write one generated trace."""
    from voltpack.sim.datasets import data_dir  # noqa: PLC0415 - only the CLI needs data/

    parser = argparse.ArgumentParser(description="Generate a Gavel-format job trace.")
    parser.add_argument("--num-jobs", type=int, required=True)
    parser.add_argument("--lam", type=float, required=True, help="mean inter-arrival time (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--multi-gpu", action="store_true", help="Gavel's -m")
    parser.add_argument("--multi-priority", action="store_true", help="20%% of jobs weight 5")
    parser.add_argument("--durations", choices=DURATION_SOURCES, default="gavel")
    parser.add_argument("--philly-gpus", choices=PHILLY_GPU_MAPPINGS, default="nearest")
    parser.add_argument("--throughputs", type=Path, default=None)
    parser.add_argument("--philly", type=Path, default=None)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        config = GeneratorConfig(
            num_jobs=args.num_jobs,
            mean_interarrival_s=args.lam,
            seed=args.seed,
            multi_gpu=args.multi_gpu,
            durations=args.durations,
            philly_gpus=args.philly_gpus,
            multi_priority=args.multi_priority,
        )
        throughputs = args.throughputs or data_dir() / "gavel" / "simulation_throughputs.json"
        table = load_gavel_throughputs(throughputs)
        philly = None
        if args.durations == "philly":
            philly = load_philly_distribution(
                args.philly or data_dir() / "gavel" / "philly_job_distribution.csv"
            )
        jobs = generate_trace(config, table, philly)
        write_gavel_trace(args.out, jobs)
    except (VoltpackError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(jobs)} jobs to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
