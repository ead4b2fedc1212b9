"""The fault simulator's workload: large training gangs beside a stream of Philly-sized jobs.

Large gangs (e.g. 512 and 256 GPUs) are made of whole-node workers, arrive at time 0 and have
more work than the run lasts (pre-training runs), so their effective training time is measured
over the whole run; elastic ones accept down to `min_worker_share` of their workers. Small jobs
draw (duration, GPU count) pairs from Microsoft's Philly trace (one worker of 1-8 GPUs; larger
Philly jobs become whole-node workers), durations truncated to `max_duration_s`, arriving as a
Poisson process whose rate offers `small_load` of the GPUs the large gangs leave.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from voltpack.sim.faults import DAY_S, FaultJob, FaultSimConfig
from voltpack.sim.traces.gavel_generator import PhillyDistribution


@dataclass(frozen=True)
class FaultWorkload:
    """What runs on the cluster."""

    large_gpus: tuple[int, ...] = (512, 256)
    min_worker_share: float = 0.75
    """Elastic large gangs run with at least this share of their workers (1: not elastic)."""
    small_load: float = 0.9
    max_duration_s: float = 2 * DAY_S

    def __post_init__(self) -> None:
        if not 0 < self.min_worker_share <= 1:
            raise ValueError(f"min_worker_share must be in (0, 1], got {self.min_worker_share}")
        if not 0 <= self.small_load < 2:
            raise ValueError(f"small_load must be in [0, 2), got {self.small_load}")


def fault_jobs(
    config: FaultSimConfig,
    workload: FaultWorkload,
    philly: PhillyDistribution,
    seed: int,
) -> list[FaultJob]:
    """The jobs of one run, drawn from `seed`."""
    rng = np.random.default_rng(seed)
    jobs = []
    run_s = config.days * DAY_S
    for i, gpus in enumerate(workload.large_gpus):
        workers = math.ceil(gpus / config.gpus_per_node)
        minimum = max(1, math.ceil(workload.min_worker_share * workers))
        jobs.append(
            FaultJob(f"large-{i}", 0.0, workers, config.gpus_per_node, 2 * run_s, minimum, True)
        )
    left_gpus = config.nodes * config.gpus_per_node - sum(workload.large_gpus)
    if left_gpus <= 0 or workload.small_load == 0:
        return jobs
    durations = np.minimum(np.asarray(philly.durations_s), workload.max_duration_s)
    sizes = np.asarray(philly.num_gpus)
    mean_gpu_s = float((durations * sizes).mean())
    rate_per_s = workload.small_load * left_gpus / mean_gpu_s
    time_s = 0.0
    index = 0
    while True:
        time_s += float(rng.exponential(1.0 / rate_per_s))
        if time_s >= run_s:
            return jobs
        pick = int(rng.integers(len(durations)))
        jobs.append(_small_job(f"small-{index}", time_s, int(sizes[pick]),
                               float(durations[pick]), config))  # fmt: skip
        index += 1


def _small_job(
    name: str, arrival_s: float, gpus: int, duration_s: float, config: FaultSimConfig
) -> FaultJob:
    per_node = config.gpus_per_node
    if gpus <= per_node:
        return FaultJob(name, arrival_s, 1, gpus, duration_s, 1)
    workers = math.ceil(gpus / per_node)
    return FaultJob(name, arrival_s, workers, per_node, duration_s, workers)
