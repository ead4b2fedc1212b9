"""Efficiency policies: minimum makespan and maximum total throughput (Gavel, section 4.3)."""

from __future__ import annotations

import numpy as np

from voltpack.policies.hetero.allocation import (
    AllocationInput,
    AllocationLp,
    FloatArray,
    empty_allocation,
    spread_over_models,
)
from voltpack.policies.hetero.fairness import OPTIMUM_SLACK, _normalized_rates


def agnostic_rates(problem: AllocationInput) -> FloatArray:
    """Each job's mean throughput over the models it can run on, on every such model."""
    runnable = problem.runnable
    rates = np.where(runnable, problem.throughputs_steps_per_s, 0.0)
    counts = runnable.sum(axis=1, keepdims=True)
    mean = np.divide(
        rates.sum(axis=1, keepdims=True), counts, out=np.zeros((len(rates), 1)), where=counts > 0
    )
    return np.where(runnable, mean, 0.0)


def _min_makespan(problem: AllocationInput, rates: FloatArray) -> FloatArray:
    """Max z s.t. rates_i . X_i >= R_i z for every job (all finish by 1/z), then efficiency.

    One exact LP instead of Gavel's bisection over the makespan.
    """
    # each job's row divided by its remaining steps times a scale that makes the level O(1):
    # the level is at most the slowest job's whole-allocation rate over its remaining steps,
    # and a level of 1e-7 (a slow job with many steps left) is below the solver's tolerance
    best = np.where(problem.runnable, rates, 0.0).max(axis=1) / problem.steps_remaining
    positive = best[best > 0]
    scale = float(positive.min()) if positive.size else 1.0
    per_job = 1.0 / (problem.steps_remaining * scale)
    lp = AllocationLp(problem, extra=1)
    z = lp.extra_index(0)
    rows = (-lp.per_job_rows(rates * per_job[:, None])).tolil()
    rows[:, z] = np.ones((lp.jobs, 1))
    lp.add_rows(rows, np.zeros(lp.jobs))
    objective = np.zeros(lp.size)
    objective[z] = -1.0
    solved = lp.solve(objective, [(0.0, None)])
    if solved is None:
        return empty_allocation(problem)
    scaled_level = float(solved[1][0])
    tie = AllocationLp(problem)
    tie.add_rows(
        -tie.per_job_rows(rates * per_job[:, None]),
        -np.full(tie.jobs, scaled_level * (1 - OPTIMUM_SLACK)),
    )
    efficient = np.zeros(tie.size)
    efficient[: tie.jobs * tie.models] = -_normalized_rates(problem).ravel()
    settled = tie.solve(efficient, [])
    return settled[0] if settled is not None else solved[0]


def min_makespan_aware(problem: AllocationInput) -> FloatArray:
    """Heterogeneity-aware minimum makespan (Gavel's min_total_duration_perf)."""
    if problem.job_count == 0:
        return empty_allocation(problem)
    return _min_makespan(problem, problem.throughputs_steps_per_s)


def min_makespan_agnostic(problem: AllocationInput) -> FloatArray:
    """Minimum makespan believing each job runs at its mean speed on every GPU model."""
    if problem.job_count == 0:
        return empty_allocation(problem)
    return spread_over_models(problem, _min_makespan(problem, agnostic_rates(problem)))


def max_total_throughput_aware(problem: AllocationInput) -> FloatArray:
    """Maximum total normalized throughput (each job's rate over its best-model rate).

    Gavel's max_sum_throughput_perf sums raw steps/s, which weighs a job by its step size;
    normalizing makes one unit mean 'one job running at its best speed'.
    """
    if problem.job_count == 0:
        return empty_allocation(problem)
    lp = AllocationLp(problem)
    objective = np.zeros(lp.size)
    objective[: lp.jobs * lp.models] = -_normalized_rates(problem).ravel()
    solved = lp.solve(objective, [])
    return empty_allocation(problem) if solved is None else solved[0]


def max_total_throughput_agnostic(problem: AllocationInput) -> FloatArray:
    """Maximum total GPU time in use, every GPU alike (work-conserving, no preference)."""
    if problem.job_count == 0:
        return empty_allocation(problem)
    equal = problem.agnostic()
    lp = AllocationLp(equal)
    objective = np.zeros(lp.size)
    objective[: lp.jobs * lp.models] = -(
        equal.throughputs_steps_per_s * problem.scale_factors[:, None]
    ).ravel()
    solved = lp.solve(objective, [])
    return empty_allocation(problem) if solved is None else spread_over_models(problem, solved[0])
