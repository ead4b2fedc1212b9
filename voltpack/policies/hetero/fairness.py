"""Fairness policies: max-min fairness (least attained service) and finish-time fairness.

Both come in a heterogeneity-aware form (throughputs per GPU model) and an agnostic form (every
GPU alike), as in Gavel (Narayanan et al., OSDI'20, sections 4.1-4.2). Ties left by the fairness
objective are broken by using spare capacity: among allocations within 1e-6 of the optimum, the
one with the highest total normalized throughput is returned (a unique, efficient choice).
"""

from __future__ import annotations

import numpy as np

from voltpack.policies.hetero.allocation import (
    AllocationInput,
    AllocationLp,
    FloatArray,
    empty_allocation,
    spread_over_models,
)

OPTIMUM_SLACK = 1e-6
FINISH_TIME_TOLERANCE = 1e-4


def _normalized_rates(problem: AllocationInput) -> FloatArray:
    """Throughputs divided by each job's best throughput (1.0 on its fastest model)."""
    rates = problem.throughputs_steps_per_s
    best = rates.max(axis=1, keepdims=True)
    return np.asarray(np.divide(rates, best, out=np.zeros_like(rates), where=best > 0))


def _max_min(problem: AllocationInput, coefficients: FloatArray) -> FloatArray:
    """max t s.t. sum_j coefficients[i, j] X[i, j] >= t for every job, then the efficient tie."""
    lp = AllocationLp(problem, extra=1)
    t = lp.extra_index(0)
    # A job that can run nowhere gets nothing; it must not pin everyone's level at 0.
    counted = np.flatnonzero((coefficients * problem.runnable).sum(axis=1) > 0)
    rows = (-lp.per_job_rows(coefficients)[counted]).tolil()
    rows[:, t] = 1.0
    lp.add_rows(rows, np.zeros(len(counted)))
    objective = np.zeros(lp.size)
    objective[t] = -1.0
    solved = lp.solve(objective, [(0.0, None)])
    if solved is None:
        return empty_allocation(problem)
    _, extras = solved
    level = float(extras[0])
    tie = AllocationLp(problem)
    floor = np.full(len(counted), -level * (1 - OPTIMUM_SLACK))
    tie.add_rows(-tie.per_job_rows(coefficients)[counted], floor)
    return _most_efficient(problem, tie, solved[0])


def _most_efficient(problem: AllocationInput, lp: AllocationLp, fallback: FloatArray) -> FloatArray:
    """Among the allocations `lp` allows, the one with the highest total normalized throughput."""
    efficient = np.zeros(lp.size)
    efficient[: lp.jobs * lp.models] = -_normalized_rates(problem).ravel()
    settled = lp.solve(efficient, [])
    return settled[0] if settled is not None else fallback


def _active(problem: AllocationInput) -> bool:
    return problem.job_count > 0 and bool(problem.runnable.any())


def max_min_fairness_agnostic(problem: AllocationInput) -> FloatArray:
    """Least attained service, every GPU alike: equal GPU time for equal weights.

    A job on k GPUs counts k GPUs' worth of time, so it gets 1/k of a 1-GPU job's share.
    """
    if not _active(problem):
        return empty_allocation(problem)
    equal = problem.agnostic()
    coefficients = (
        equal.throughputs_steps_per_s
        * problem.scale_factors[:, None]
        / problem.priority_weights[:, None]
    )
    return spread_over_models(problem, _max_min(equal, coefficients))


def isolated_throughputs(problem: AllocationInput) -> FloatArray:
    """Each job's throughput under the agnostic max-min allocation (its 'fair share' rate)."""
    allocation = max_min_fairness_agnostic(problem)
    return np.asarray((problem.throughputs_steps_per_s * allocation).sum(axis=1))


def max_min_fairness_aware(problem: AllocationInput) -> FloatArray:
    """Heterogeneity-aware least attained service (Gavel's max_min_fairness_perf).

    Maximises the smallest throughput relative to the job's isolated fair-share throughput,
    weighted by scale factor and priority weight.
    """
    if not _active(problem):
        return empty_allocation(problem)
    isolated = isolated_throughputs(problem)
    safe = np.where(isolated > 0, isolated, 1.0)
    coefficients = (
        problem.throughputs_steps_per_s
        * problem.scale_factors[:, None]
        / (problem.priority_weights[:, None] * safe[:, None])
    )
    return _max_min(problem, coefficients)


def _finish_time(problem: AllocationInput, rates: FloatArray) -> FloatArray:
    """min rho s.t. each job's finish time <= rho x its finish time on its isolated share.

    Finish time under X is t_i + R_i / (rates_i . X_i): not linear, so rho is found by
    bisection over feasibility LPs (rho = 1 is always feasible: the isolated allocation).
    """
    isolated_allocation = max_min_fairness_agnostic(problem)
    isolated = (rates * isolated_allocation).sum(axis=1)
    elapsed = problem.time_since_arrival_s
    remaining = problem.steps_remaining
    can_run = isolated > 0
    expected = elapsed + np.divide(
        remaining, isolated, out=np.full_like(remaining, np.inf), where=can_run
    )

    def constrained(rho: float) -> AllocationLp:
        lp = AllocationLp(problem)
        slack = rho * expected - elapsed
        need = np.where(can_run, remaining / np.maximum(slack, 1e-12), 0.0)
        lp.add_rows(-lp.per_job_rows(rates), -need)
        return lp

    def feasible(rho: float) -> FloatArray | None:
        lp = constrained(rho)
        solved = lp.solve(np.zeros(lp.size), [])
        return None if solved is None else solved[0]

    low = float(np.max(np.where(can_run, elapsed / expected, 0.0)))
    high = 1.0
    best = feasible(high)
    if best is None:
        return isolated_allocation
    while high - low > FINISH_TIME_TOLERANCE * high:
        middle = (low + high) / 2
        candidate = feasible(middle)
        if candidate is None:
            low = middle
        else:
            high, best = middle, candidate
    return _most_efficient(problem, constrained(high), best)


def finish_time_fairness_aware(problem: AllocationInput) -> FloatArray:
    """Heterogeneity-aware finish-time fairness (Themis's metric; Gavel's _perf variant)."""
    if not _active(problem):
        return empty_allocation(problem)
    return _finish_time(problem, problem.throughputs_steps_per_s)


def finish_time_fairness_agnostic(problem: AllocationInput) -> FloatArray:
    """Finish-time fairness with every GPU alike."""
    if not _active(problem):
        return empty_allocation(problem)
    equal = problem.agnostic()
    return spread_over_models(problem, _finish_time(equal, equal.throughputs_steps_per_s))
