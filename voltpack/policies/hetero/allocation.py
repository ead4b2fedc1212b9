"""What an allocation policy sees and returns, and the linear program they share.

An allocation X (jobs x GPU models) gives the share of time each job should spend on each GPU
model. Every policy respects the same base constraints (Gavel, OSDI'20, section 3):
X >= 0; a job's shares sum to at most 1; and per model, the GPUs the jobs use on average,
sum_i scale_factor_i * X[i, j], fit in the model's GPU count. A job whose throughput on a model
is zero (it cannot run there) gets no share of it. The programs are solved exactly with HiGHS
(`scipy.optimize.linprog`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.optimize import linprog

from voltpack.model.errors import InvalidRequestError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class AllocationInput:
    """The active jobs and the cluster, as arrays indexed [job] or [job, GPU model].

    `throughputs_steps_per_s[i, j]` is job i's throughput on `scale_factors[i]` GPUs of model j
    (0 where it cannot run); `time_since_arrival_s` and `steps_remaining` feed the policies
    that look at progress (finish-time fairness, makespan).
    """

    gpu_models: tuple[str, ...]
    capacity_gpus: IntArray
    throughputs_steps_per_s: FloatArray
    scale_factors: IntArray
    priority_weights: FloatArray
    steps_remaining: FloatArray
    time_since_arrival_s: FloatArray
    job_ids: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        jobs, models = self.throughputs_steps_per_s.shape
        if models != len(self.gpu_models) or self.capacity_gpus.shape != (models,):
            raise InvalidRequestError(
                f"allocation input: {len(self.gpu_models)} GPU models, {models} throughput "
                f"columns and {self.capacity_gpus.shape[0]} capacities must agree"
            )
        for name in ("scale_factors", "priority_weights", "steps_remaining"):
            if getattr(self, name).shape != (jobs,):
                raise InvalidRequestError(f"allocation input: {name} needs one value per job")
        if self.time_since_arrival_s.shape != (jobs,):
            raise InvalidRequestError("allocation input: time_since_arrival_s needs one per job")
        if self.job_ids and len(self.job_ids) != jobs:
            raise InvalidRequestError("allocation input: job_ids needs one id per job")
        if jobs and (self.scale_factors < 1).any():
            raise InvalidRequestError("allocation input: every scale factor must be >= 1")
        if jobs and (self.priority_weights <= 0).any():
            raise InvalidRequestError("allocation input: every priority weight must be > 0")
        if (self.capacity_gpus < 0).any() or not np.isfinite(self.throughputs_steps_per_s).all():
            raise InvalidRequestError(
                "allocation input: capacities must be >= 0 and throughputs finite"
            )

    @property
    def job_count(self) -> int:
        """Number of active jobs."""
        return int(self.throughputs_steps_per_s.shape[0])

    @property
    def runnable(self) -> NDArray[np.bool_]:
        """[job, model]: the job can run there (positive throughput, enough GPUs of the model)."""
        return (self.throughputs_steps_per_s > 0) & (
            self.scale_factors[:, None] <= self.capacity_gpus[None, :]
        )

    def agnostic(self) -> AllocationInput:
        """The same input as a heterogeneity-agnostic policy sees it: every GPU model alike.

        Each job's throughput is 1 wherever it can run (so shares are GPU time), as in Gavel's
        heterogeneity-agnostic policies.
        """
        equal = np.where(self.runnable, 1.0, 0.0)
        return _replace_throughputs(self, equal)


def _replace_throughputs(source: AllocationInput, throughputs: FloatArray) -> AllocationInput:
    return AllocationInput(
        gpu_models=source.gpu_models,
        capacity_gpus=source.capacity_gpus,
        throughputs_steps_per_s=throughputs,
        scale_factors=source.scale_factors,
        priority_weights=source.priority_weights,
        steps_remaining=source.steps_remaining,
        time_since_arrival_s=source.time_since_arrival_s,
        job_ids=source.job_ids,
    )


class AllocationLp:
    """A linear program over X (row-major, jobs x models) plus `extra` scalar variables.

    The base constraints are built in; policies add rows and an objective, then `solve`.
    Constraint rows are `A_ub @ v <= b_ub` over v = [X.ravel(), extra...].
    """

    def __init__(self, problem: AllocationInput, extra: int = 0) -> None:
        self.problem = problem
        self.jobs = problem.job_count
        self.models = len(problem.gpu_models)
        self.extra = extra
        self.size = self.jobs * self.models + extra
        self._rows: list[sparse.csr_matrix] = []
        self._bounds_b: list[FloatArray] = []
        self._base_rows()

    def x_index(self, job: int, model: int) -> int:
        """Position of X[job, model] in the variable vector."""
        return job * self.models + model

    def extra_index(self, k: int) -> int:
        """Position of the k-th extra variable."""
        return self.jobs * self.models + k

    def add_rows(self, matrix: sparse.spmatrix, bound: FloatArray) -> None:
        """Add `matrix @ v <= bound`."""
        self._rows.append(sparse.csr_matrix(matrix))
        self._bounds_b.append(np.asarray(bound, dtype=np.float64))

    def per_job_rows(self, coefficients: FloatArray) -> sparse.csr_matrix:
        """Rows r_i = sum_j coefficients[i, j] * X[i, j] (one row per job), over all variables."""
        rows = np.repeat(np.arange(self.jobs), self.models)
        cols = np.arange(self.jobs * self.models)
        return sparse.csr_matrix((coefficients.ravel(), (rows, cols)), shape=(self.jobs, self.size))

    def solve(
        self, objective: FloatArray, extra_bounds: list[tuple[float | None, float | None]]
    ) -> tuple[FloatArray, FloatArray] | None:
        """Minimise `objective @ v`; (X, extras), or None when infeasible."""
        upper = np.where(self.problem.runnable, 1.0, 0.0).ravel()
        bounds = [(0.0, float(u)) for u in upper] + list(extra_bounds)
        result = linprog(
            objective,
            A_ub=sparse.vstack(self._rows, format="csr"),
            b_ub=np.concatenate(self._bounds_b),
            bounds=bounds,
            method="highs",
        )
        if result.status == 2:
            return None
        if result.status != 0:
            raise RuntimeError(f"HiGHS could not solve the allocation LP: {result.message}")
        values = np.asarray(result.x, dtype=np.float64)
        split = self.jobs * self.models
        allocation = np.clip(values[:split].reshape(self.jobs, self.models), 0.0, 1.0)
        return allocation, values[split:]

    def _base_rows(self) -> None:
        problem = self.problem
        jobs, models = self.jobs, self.models
        # Capacity: sum_i sf_i X[i, j] <= capacity_j.
        rows = np.tile(np.arange(models), jobs)
        cols = np.arange(jobs * models)
        values = np.repeat(problem.scale_factors.astype(np.float64), models)
        capacity = sparse.csr_matrix((values, (rows, cols)), shape=(models, self.size))
        self.add_rows(capacity, problem.capacity_gpus.astype(np.float64))
        # Each job: sum_j X[i, j] <= 1.
        self.add_rows(self.per_job_rows(np.ones((jobs, models))), np.ones(jobs))


def empty_allocation(problem: AllocationInput) -> FloatArray:
    """An all-zero allocation of the right shape."""
    return np.zeros((problem.job_count, len(problem.gpu_models)))


def spread_over_models(problem: AllocationInput, allocation: FloatArray) -> FloatArray:
    """Each job's total time share re-split over the models it can run on, by GPU count.

    This is how a heterogeneity-agnostic policy sees the cluster: one pool of GPUs. When the
    proportional split would overfill a model (jobs restricted to some models), the given
    allocation is kept as it is.
    """
    weights = np.where(problem.runnable, problem.capacity_gpus[None, :].astype(np.float64), 0.0)
    totals = weights.sum(axis=1, keepdims=True)
    shares = np.divide(weights, totals, out=np.zeros_like(weights), where=totals > 0)
    spread = shares * allocation.sum(axis=1, keepdims=True)
    used = (problem.scale_factors[:, None] * spread).sum(axis=0)
    if (used > problem.capacity_gpus + 1e-9).any():
        return allocation
    return np.asarray(spread, dtype=np.float64)
