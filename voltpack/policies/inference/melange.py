"""Mélange's formulation (Griggs et al., 2024), the baseline voltpack's planner is measured
against: every bucket cut into `slices` slices, one binary per (slice, GPU configuration),
an integer GPU count per configuration covering its slices' load (voltpack's replica options:
each GPU type x TP degree x prefill chunk x context class counts as a "GPU").

Mélange itself places unified replicas only (`split=False`); with `split=True` a slice may
instead take one prefill and one decode configuration (two more binaries per slice and
configuration), so the baseline has every right voltpack's planner has except splitting a
bucket's traffic in any proportion (continuous shares).

Written from the paper's description and its solver's documented inputs (workload
distribution, per-GPU max throughput per bucket, slice factor); it runs on voltpack's
capacity tables so both planners see the same profiles.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from voltpack.perf.inference_profile import ProfileBook, default_profile_book
from voltpack.perf.serving_capacity import Role
from voltpack.policies.inference.mix_planner import (
    MIP_RELATIVE_GAP,
    ROLES,
    CapacityTables,
    InfeasiblePlanError,
    PlanRequest,
    allowed_profiles,
    capacity_tables,
    finished_plan,
    replica_group,
    servable_by,
)
from voltpack.policies.inference.plan import ServingPlan


def solve_melange(
    request: PlanRequest, tables: CapacityTables, roles: Sequence[Role] = ("unified",)
) -> ServingPlan:
    """Mélange's binary slice-assignment MILP over the options of `roles` in `tables`:
    each slice goes to one unified option, or (with prefill and decode in `roles`) to one
    prefill and one decode option."""
    started = time.perf_counter()
    buckets = len(request.mix.buckets)
    slices = request.slices
    slice_rate = np.array([b.share * request.rate_per_s / slices for b in request.mix.buckets])
    split = "prefill" in roles and "decode" in roles
    used: tuple[Role, ...] = ("unified", "prefill", "decode") if split else ("unified",)
    servable = servable_by(tables, used, buckets)
    if not servable.all():
        missing = request.mix.buckets[int(np.flatnonzero(~servable)[0])]
        raise InfeasiblePlanError(f"Mélange: no configuration serves {missing.label}")
    # columns: binaries (role, bucket, slice, option) where the option serves the bucket,
    # then one replica count per (role, option)
    assignment: list[tuple[Role, int, int, int]] = []
    for role in used:
        capacity = tables.capacity.get(role, np.zeros((0, buckets)))
        for b in range(buckets):
            servers = np.flatnonzero(capacity[:, b] > 0).tolist()
            assignment += [(role, b, s, c) for s in range(slices) for c in servers]
    replicas = [(role, c) for role in used for c in range(len(tables.options.get(role, ())))]
    replica_column = {key: len(assignment) + i for i, key in enumerate(replicas)}
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    lower: list[float] = []
    upper: list[float] = []
    # each slice served once (unified + prefill = 1) and its prefill paired (prefill = decode)
    served_row = {(b, s): b * slices + s for b in range(buckets) for s in range(slices)}
    paired_row = {key: len(served_row) + row for key, row in served_row.items()}
    lower += [1.0] * len(served_row)
    upper += [1.0] * len(served_row)
    if split:
        lower += [0.0] * len(paired_row)
        upper += [0.0] * len(paired_row)
    load_row = {key: len(lower) + i for i, key in enumerate(replicas)}
    lower += [-np.inf] * len(replicas)
    upper += [0.0] * len(replicas)
    for column, (role, b, s, c) in enumerate(assignment):
        if role != "decode":
            rows.append(served_row[(b, s)])
            cols.append(column)
            values.append(1.0)
        if role != "unified":
            rows.append(paired_row[(b, s)])
            cols.append(column)
            values.append(1.0 if role == "prefill" else -1.0)
        rows.append(load_row[(role, c)])
        cols.append(column)
        values.append(float(slice_rate[b] / tables.capacity[role][c, b]))
    for key, column in replica_column.items():
        rows.append(load_row[key])
        cols.append(column)
        values.append(-1.0)
    columns = len(assignment) + len(replicas)
    matrix = coo_array((values, (rows, cols)), shape=(len(lower), columns)).tocsr()
    costs = np.concatenate(
        [
            np.zeros(len(assignment)),
            np.array([tables.options[role][c].price_per_hour for role, c in replicas]),
        ]
    )
    result = milp(
        c=costs,
        constraints=LinearConstraint(matrix, np.array(lower), np.array(upper)),
        integrality=np.ones(columns),
        bounds=Bounds(
            np.zeros(columns),
            np.concatenate([np.ones(len(assignment)), np.full(len(replicas), np.inf)]),
        ),
        options={"time_limit": request.time_limit_s, "mip_rel_gap": MIP_RELATIVE_GAP},
    )
    if result.x is None:
        raise InfeasiblePlanError(f"Mélange's formulation has no solution: {result.message}")
    solution = np.rint(result.x)
    rates: dict[tuple[Role, int], dict[int, float]] = {key: {} for key in replicas}
    for column, (role, b, _s, c) in enumerate(assignment):
        if solution[column] > 0.5:
            served = rates[(role, c)]
            served[b] = served.get(b, 0.0) + float(slice_rate[b])
    groups = []
    for (role, c), column in replica_column.items():
        count = int(solution[column])
        if count == 0:
            continue
        capacity = tables.capacity[role][c]
        capacities = {b: float(rate) for b, rate in enumerate(capacity) if rate > 0}
        option = tables.options[role][c]
        groups.append(replica_group(option, role, count, rates[(role, c)], capacities))
    name = "melange-split" if split else "melange"
    return finished_plan(request, groups, name, started, result)


def melange_plan(
    request: PlanRequest, book: ProfileBook | None = None, split: bool = False
) -> ServingPlan:
    """Mélange's plan for `request` on voltpack's profiles and context classes: unified
    replicas, or with `split` (and `request.allow_split`) also prefill and decode pools."""
    profiles = allowed_profiles(request, book or default_profile_book())
    roles: tuple[Role, ...] = ROLES if split and request.allow_split else ("unified",)
    tables = capacity_tables(request, profiles, roles)
    if roles == ("unified",):
        return solve_melange(request, tables, roles)
    # the split formulation holds the unified one; when HiGHS stops at its time limit on the
    # (much larger) split model before matching the unified plan, the unified plan is the
    # best split-allowed plan found
    either = solve_melange(request, tables, roles)
    try:
        unified = solve_melange(request, tables, ("unified",))
    except InfeasiblePlanError:  # some bucket only split pools serve
        return either
    if unified.cost_per_hour < either.cost_per_hour:
        note = "the split formulation stopped above the unified plan: the unified plan is kept"
        return replace(unified, formulation="melange-split", notes=(*unified.notes, note))
    return either
