"""Even loads for a plan's replica groups: the cheapest fleet kept, its traffic re-split.

The planner's MILP fixes what a fleet costs (its replica counts); among the many ways to split
the buckets' traffic over that fleet it returns whichever HiGHS reaches first, which may load
one group to the last request its capacity allows and leave another idle at the same cost.
A group's capacity holds at the load it is planned for, not past it, so a burst the planning
window did not show first breaks the fullest group. This LP keeps the replica counts and
chooses the slice shares that minimise the highest load of any group (planned rate over
capacity, per replica): the same cost, with the slack spread over every group.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import csr_array, diags_array, hstack

SOLVE_LIMIT_S = 2.0
"""The LP is small (no integers); past this the MILP's own shares stand."""


def balanced_solution(
    matrix: csr_array,
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    column_upper: NDArray[np.float64],
    replica_columns: Sequence[int],
    solution: NDArray[np.float64],
) -> NDArray[np.float64]:
    """`solution` (columns of the planner's MILP) with the same replica counts and slice
    shares that minimise the highest group load. Each load row of `matrix` holds a group's
    slice loads and -1 on its replica column (`sum load <= replicas`); here it becomes
    `sum load <= t x replicas` with t minimised. The MILP's shares are returned unchanged when
    the LP does not solve (they satisfy t = 1)."""
    replicas_column = np.asarray(list(replica_columns), dtype=np.int64)
    replicas = np.zeros(matrix.shape[1])
    replicas[replicas_column] = np.round(solution[replicas_column])
    keep = np.ones(matrix.shape[1])
    keep[replicas_column] = 0.0
    # t's column: -replicas in each group's load row (the replica column's -1 times its count)
    t_column = matrix @ replicas
    balanced = hstack([matrix @ diags_array(keep), csr_array(t_column.reshape(-1, 1))]).tocsr()
    bounds_upper = np.append(np.where(keep > 0, column_upper, 0.0), np.inf)
    costs = np.zeros(matrix.shape[1] + 1)
    costs[-1] = 1.0
    from scipy.optimize import Bounds, LinearConstraint, milp  # noqa: PLC0415 - 0.3 s import

    result = milp(
        c=costs,
        constraints=LinearConstraint(balanced, lower, upper),
        integrality=np.zeros(costs.size, dtype=np.int64),
        bounds=Bounds(np.zeros(costs.size), bounds_upper),
        options={"time_limit": SOLVE_LIMIT_S},
    )
    if result.x is None or result.status != 0 or result.x[-1] > 1.0 + 1e-6:
        return solution
    out = np.asarray(result.x[:-1], dtype=np.float64)
    out[replicas_column] = replicas[replicas_column]
    return out
