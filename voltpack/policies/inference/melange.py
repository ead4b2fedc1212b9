"""Mélange's formulation (Griggs et al., 2024), the baseline voltpack's planner is measured
against: every bucket cut into `slices` slices, one binary per (slice, GPU configuration),
an integer GPU count per configuration covering its slices' load, unified replicas only
(voltpack's replica options: each GPU type x TP degree x prefill chunk counts as a "GPU").

Written from the paper's description and its solver's documented inputs (workload
distribution, per-GPU max throughput per bucket, slice factor); it runs on voltpack's
capacity tables so both planners see the same profiles.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from voltpack.perf.inference_profile import ProfileBook, default_profile_book
from voltpack.policies.inference.mix_planner import (
    MIP_RELATIVE_GAP,
    CapacityTables,
    InfeasiblePlanError,
    PlanRequest,
    allowed_profiles,
    capacity_tables,
    finished_plan,
    replica_group,
)
from voltpack.policies.inference.plan import ServingPlan


def solve_melange(request: PlanRequest, tables: CapacityTables) -> ServingPlan:
    """Mélange's binary slice-assignment MILP over `tables` (unified capacities)."""
    started = time.perf_counter()
    capacity = tables.capacity["unified"]
    configs, buckets = capacity.shape
    slices = request.slices
    slice_rate = np.array([b.share * request.rate_per_s / slices for b in request.mix.buckets])
    # columns: x[slice, config] binaries (only where the config can serve), then n[config]
    assignment: list[tuple[int, int, int]] = []  # (bucket, slice, config)
    for b in range(buckets):
        servers = np.flatnonzero(capacity[:, b] > 0)
        if servers.size == 0:
            raise InfeasiblePlanError(
                f"Mélange: no configuration serves {request.mix.buckets[b].label}"
            )
        for s in range(slices):
            assignment += [(b, s, int(c)) for c in servers]
    columns = len(assignment) + configs
    rows, cols, values = [], [], []
    lower, upper = [], []
    slice_row: dict[tuple[int, int], int] = {}
    for column, (b, s, _c) in enumerate(assignment):
        row = slice_row.setdefault((b, s), len(slice_row))
        rows.append(row)
        cols.append(column)
        values.append(1.0)
    lower += [1.0] * len(slice_row)
    upper += [1.0] * len(slice_row)
    load_row = len(slice_row)
    for column, (b, _s, c) in enumerate(assignment):
        rows.append(load_row + c)
        cols.append(column)
        values.append(float(slice_rate[b] / capacity[c, b]))
    for c in range(configs):
        rows.append(load_row + c)
        cols.append(len(assignment) + c)
        values.append(-1.0)
    lower += [-np.inf] * configs
    upper += [0.0] * configs
    matrix = coo_array((values, (rows, cols)), shape=(load_row + configs, columns)).tocsr()
    options = tables.options["unified"]
    costs = np.concatenate(
        [np.zeros(len(assignment)), np.array([o.price_per_hour for o in options])]
    )
    result = milp(
        c=costs,
        constraints=LinearConstraint(matrix, np.array(lower), np.array(upper)),
        integrality=np.ones(columns),
        bounds=Bounds(
            np.zeros(columns),
            np.concatenate([np.ones(len(assignment)), np.full(configs, np.inf)]),
        ),
        options={"time_limit": request.time_limit_s, "mip_rel_gap": MIP_RELATIVE_GAP},
    )
    if result.x is None:
        raise InfeasiblePlanError(f"Mélange's formulation has no solution: {result.message}")
    solution = np.rint(result.x)
    groups = []
    for c in range(configs):
        replicas = int(solution[len(assignment) + c])
        if replicas == 0:
            continue
        rates: dict[int, float] = {}
        for column, (b, _s, cc) in enumerate(assignment):
            if cc == c and solution[column] > 0.5:
                rates[b] = rates.get(b, 0.0) + float(slice_rate[b])
        capacities = {b: float(rate) for b, rate in enumerate(capacity[c]) if rate > 0}
        groups.append(replica_group(options[c], "unified", replicas, rates, capacities))
    return finished_plan(request, groups, "melange", started, result)


def melange_plan(request: PlanRequest, book: ProfileBook | None = None) -> ServingPlan:
    """Mélange's plan for `request` on voltpack's profiles."""
    profiles = allowed_profiles(request, book or default_profile_book())
    return solve_melange(request, capacity_tables(request, profiles, ("unified",)))
