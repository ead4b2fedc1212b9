"""Shortest remaining time, heterogeneity-aware: voltpack's policy for low average JCT.

The allocation maximises the sum over jobs of their completion rates, rate_i(X) / R_i (the
share of a job's remaining work done per second). With one GPU model this is shortest
remaining processing time first, which minimises average completion time on one machine; with
several models the same objective also sends each job where its speed-up per GPU is largest.
`fair_floor` > 0 guarantees every job that share of its max-min fair throughput (starvation
guard); the default 0 gave the best average and p99 on the traces measured
(`benchmarks/results/hetero_gavel.md`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from voltpack.policies.hetero.allocation import (
    AllocationInput,
    AllocationLp,
    FloatArray,
    empty_allocation,
    spread_over_models,
)
from voltpack.policies.hetero.efficiency import agnostic_rates
from voltpack.policies.hetero.fairness import isolated_throughputs


def _completion_rate_lp(
    problem: AllocationInput, rates: FloatArray, fair_floor: float
) -> FloatArray:
    lp = AllocationLp(problem)
    if fair_floor > 0:
        floor = fair_floor * isolated_throughputs(problem)
        lp.add_rows(-lp.per_job_rows(rates), -floor)
    remaining = np.maximum(problem.steps_remaining, 1.0)
    objective = np.zeros(lp.size)
    objective[: lp.jobs * lp.models] = -(rates / remaining[:, None]).ravel()
    solved = lp.solve(objective, [])
    if solved is None and fair_floor > 0:
        return _completion_rate_lp(problem, rates, 0.0)
    return empty_allocation(problem) if solved is None else solved[0]


def shortest_remaining_aware(fair_floor: float = 0.0) -> Callable[[AllocationInput], FloatArray]:
    """The heterogeneity-aware policy, with its starvation guard."""

    def allocate(problem: AllocationInput) -> FloatArray:
        if problem.job_count == 0:
            return empty_allocation(problem)
        return _completion_rate_lp(problem, problem.throughputs_steps_per_s, fair_floor)

    return allocate


def shortest_remaining_agnostic(fair_floor: float = 0.0) -> Callable[[AllocationInput], FloatArray]:
    """The same objective believing each job runs at its mean speed on every model."""

    def allocate(problem: AllocationInput) -> FloatArray:
        if problem.job_count == 0:
            return empty_allocation(problem)
        allocation = _completion_rate_lp(problem, agnostic_rates(problem), fair_floor)
        return spread_over_models(problem, allocation)

    return allocate
