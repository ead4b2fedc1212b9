"""Which GPU model each live training job should run on: an allocation, read job by job.

The operator knows, for each active training job, its job type (a row of the throughput
table), its gang size in GPUs and the GPU models it accepts; the cluster gives the GPUs per
model. An allocation policy (`registry.py`) turns that into time shares per job and model;
here each job's shares become an order of models to try (largest share first, then the
fastest), each with a reason a person can read. Pure: no clock, no I/O.

What the operator cannot know about a live job is treated alike for every job: the steps left
(1 for every job, so duration-based policies weigh jobs equally) and the priority weight (1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from voltpack.perf.throughput_table import ThroughputTable
from voltpack.policies.hetero.allocation import AllocationInput, FloatArray
from voltpack.policies.hetero.registry import AllocationPolicy


@dataclass(frozen=True)
class TrainingJob:
    """One active training job as the allocation sees it.

    `job_id` must be stable for the job's lifetime and increase with arrival (FIFO policies
    keep state by it); `accepted_models` empty means every model of the cluster.
    """

    job_id: int
    name: str
    job_type: str
    gpus: int
    accepted_models: tuple[str, ...] = ()
    age_s: float = 0.0


@dataclass(frozen=True)
class ModelChoice:
    """One job's GPU models, best first, with the share and throughput behind the order."""

    job: str
    models: tuple[str, ...]
    """Models the job can run on: largest allocation share first, then highest throughput."""
    shares: Mapping[str, float]
    rates_steps_per_s: Mapping[str, float]

    @property
    def best(self) -> str | None:
        """The model the allocation gives the largest share of (None: it can run nowhere)."""
        return self.models[0] if self.models else None

    def reason(self, model: str) -> str:
        """Why `model`: e.g. 'job d/j: A100 (allocation 0.80, 2.1x the throughput of V100)'."""
        share = self.shares.get(model, 0.0)
        rate = self.rates_steps_per_s.get(model, 0.0)
        others = [m for m in self.models if m != model]
        if not others:
            return f"job {self.job}: {model} (allocation {share:.2f}, the only model it runs on)"
        fastest_other = max(others, key=lambda m: (self.rates_steps_per_s[m], m))
        ratio = rate / self.rates_steps_per_s[fastest_other]
        return (
            f"job {self.job}: {model} (allocation {share:.2f}, {ratio:.1f}x the throughput of "
            f"{fastest_other})"
        )


@dataclass(frozen=True)
class ModelAllocation:
    """The allocation of one solve: each job's choice, by job name."""

    policy: str
    gpu_models: tuple[str, ...]
    choices: Mapping[str, ModelChoice]


def job_rates(
    table: ThroughputTable, job: TrainingJob, gpu_models: Sequence[str]
) -> dict[str, float]:
    """Steps/s of `job` on each accepted model of `gpu_models` it can run on (rate > 0)."""
    rates = {}
    for model in gpu_models:
        if job.accepted_models and model not in job.accepted_models:
            continue
        try:
            rate = table.rate(job.job_type, table.model_name(model), job.gpus)
        except LookupError:
            continue
        if rate > 0:
            rates[model] = rate
    return rates


def allocate_models(
    policy: AllocationPolicy,
    table: ThroughputTable,
    jobs: Sequence[TrainingJob],
    capacity_gpus: Mapping[str, int],
) -> ModelAllocation:
    """Solve `policy` over `jobs` on a cluster of `capacity_gpus` (GPUs per model)."""
    models = tuple(sorted(m for m, n in capacity_gpus.items() if n > 0))
    rates = [job_rates(table, job, models) for job in jobs]
    if not jobs or not models:
        return ModelAllocation(policy.name, models, {})
    throughputs = np.array([[r.get(m, 0.0) for m in models] for r in rates], dtype=np.float64)
    problem = AllocationInput(
        gpu_models=models,
        capacity_gpus=np.array([capacity_gpus[m] for m in models], dtype=np.int64),
        throughputs_steps_per_s=throughputs,
        scale_factors=np.array([job.gpus for job in jobs], dtype=np.int64),
        priority_weights=np.ones(len(jobs)),
        steps_remaining=np.ones(len(jobs)),
        time_since_arrival_s=np.array([max(job.age_s, 0.0) for job in jobs]),
        job_ids=tuple(job.job_id for job in jobs),
    )
    allocation: FloatArray = policy.allocate(problem)
    choices = {}
    for row, job in enumerate(jobs):
        # + 0.0 turns the solver's -0.0 into 0.0 (reasons print '0.00')
        shares = {m: float(allocation[row, col]) + 0.0 for col, m in enumerate(models)}
        runnable = [m for m in models if m in rates[row] and problem.runnable[row, models.index(m)]]
        order = sorted(runnable, key=lambda m: (-round(shares[m], 6), -rates[row][m], m))
        choices[job.name] = ModelChoice(
            job=job.name,
            models=tuple(order),
            shares={m: shares[m] for m in order},
            rates_steps_per_s={m: rates[row][m] for m in order},
        )
    return ModelAllocation(policy.name, models, choices)
