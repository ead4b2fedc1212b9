"""The cheapest fleet that serves a request mix within a TTFT and a TPOT SLO (MILP, HiGHS).

Mélange (Griggs et al., 2024) cuts each request-size bucket into `slices` equal slices and
assigns every slice to one GPU type with a binary variable; the GPU count of a type must cover
the load of its slices (`melange.py` implements that form as the baseline). Counting a
bucket's slices per configuration with one integer instead gives the same optimum with far
fewer variables (`integer_slices=True`); voltpack's planner goes one step further and lets a
bucket's traffic split in any proportion (continuous shares, integer replica counts), which can
only be cheaper and solves fastest.

voltpack's planner also chooses, per configuration (GPU type x tensor-parallel degree), a
role: `unified` replicas run prefill and decode; a bucket's slices may instead be split into a
prefill pool and a decode pool, possibly on different GPU types (Splitwise, DistServe), with
the KV cache's transfer between them counted in the decode side's time per token.

Unified and decode replicas are sized per context class (`context_classes.py`): their batch
cap keeps a full batch at the class's longest context within the TPOT SLO, and they serve
only the buckets their class covers (capacity 0 for the others), so short requests may go
to replicas with a large batch, or to small GPUs, while long ones go to replicas sized for
them.

Variables: slice counts `u[b,c]`, `p[b,c]`, `d[b,c]` (0..slices) and replica counts
`n_u[c]`, `n_p[c]`, `n_d[c]`; constraints: each bucket's slices are served once
(`sum_c u + sum_c p = slices`, `sum_c p = sum_c d`) and each pool's load fits its replicas
(`sum_b count x rate_b / slices / capacity_b,c <= n`); objective: GPU price x GPUs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import coo_array

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.inference_profile import ProfileBook, ServingProfile, default_profile_book
from voltpack.perf.serving_capacity import (
    Capacity,
    DecodeSteps,
    ReplicaSettings,
    RequestSize,
    Role,
    ServingSlo,
    batch_cap,
    capacity_table,
    decode_steps,
    kv_transfer_s,
)
from voltpack.policies.inference.buckets import RequestMix
from voltpack.policies.inference.context_classes import (
    MAX_CONTEXT_CLASSES,
    ContextClass,
    bucket_context_tokens,
    context_classes,
)
from voltpack.policies.inference.load_balance import balanced_solution
from voltpack.policies.inference.plan import ReplicaGroup, ServingPlan
from voltpack.policies.inference.prices import PriceList

if TYPE_CHECKING:
    from scipy.optimize import OptimizeResult

DEFAULT_SLICES = 8
"""Slices per bucket (Mélange's `slice_factor`): how finely a bucket's rate may be divided."""
KV_LINK_BYTES_PER_S_PER_GPU = 50e9
"""KV-cache transfer bandwidth per GPU of the sending prefill replica: one 400 Gb/s NIC per
GPU (a DGX H100 has eight ConnectX-7 400G ports)."""
TIME_LIMIT_S = 10.0
"""Default solver budget: HiGHS stops after this long and the best plan found so far is used,
its remaining optimality gap noted in the plan."""
ROLES: tuple[Role, ...] = ("unified", "prefill", "decode")
UNIFIED_CHUNKS = (256, 1024)
"""Prefill chunks tried for unified replicas: small keeps the iteration short (tight TPOT),
large prefills faster (tight TTFT)."""
UTILISATION_CAPS = (0.2, 0.5, 0.8)
"""Prompt-token load caps tried for unified and prefill replicas (see ReplicaSettings)."""
MIP_RELATIVE_GAP = 1e-4
"""HiGHS stops when the plan is within this share of the best possible cost (its default)."""


class InfeasiblePlanError(InvalidRequestError):
    """No fleet of the allowed GPU types meets the SLO for some requests; the message names
    the bucket and the bound that fails."""


@dataclass(frozen=True)
class PlanRequest:
    """What a service asks the planner for."""

    model: str
    mix: RequestMix
    rate_per_s: float
    slo: ServingSlo
    prices: PriceList
    gpu_types: tuple[str, ...] = ()
    """Allowed GPU types (catalog names); empty = every priced type."""
    allow_split: bool = True
    slices: int = DEFAULT_SLICES
    kv_link_bytes_per_s_per_gpu: float = KV_LINK_BYTES_PER_S_PER_GPU
    time_limit_s: float = TIME_LIMIT_S
    context_classes: int = MAX_CONTEXT_CLASSES
    """Most context classes unified and decode replicas are sized for (1: every replica
    sized for the mix's longest context)."""

    def __post_init__(self) -> None:
        if not self.rate_per_s > 0:
            raise InvalidRequestError(f"rate_per_s must be positive, got {self.rate_per_s}")
        if self.slices < 1:
            raise InvalidRequestError(f"slices must be at least 1, got {self.slices}")
        if self.context_classes < 1:
            raise InvalidRequestError(
                f"context_classes must be at least 1, got {self.context_classes}"
            )


@dataclass(frozen=True)
class ReplicaOption:
    """One way to run a replica: a profile, its settings, its price per hour and the context
    class it is sized for (None: any request, prefill replicas)."""

    profile: ServingProfile
    settings: ReplicaSettings
    price_per_hour: float
    context: ContextClass | None = None


@dataclass(frozen=True)
class CapacityTables:
    """Per role: the replica options, and each option's (rows) capacity per bucket (columns)."""

    options: dict[Role, tuple[ReplicaOption, ...]]
    capacity: dict[Role, NDArray[np.float64]]
    details: dict[Role, list[list[Capacity]]]


def allowed_profiles(request: PlanRequest, book: ProfileBook) -> list[ServingProfile]:
    """Every (GPU type, TP degree) profile of the allowed, priced types the model fits on."""
    types = request.gpu_types or tuple(request.prices.gpu_types)
    profiles: list[ServingProfile] = []
    for gpu_type in types:
        request.prices.per_gpu_hour(gpu_type)
        profiles += book.feasible_profiles(request.model, gpu_type)
    if not profiles:
        raise InfeasiblePlanError(
            f"{request.model} fits on none of the GPU types {', '.join(types)} "
            "(weights plus one 8,192-token sequence of KV cache at tensor parallel <= 8)"
        )
    return profiles


def replica_options(
    request: PlanRequest,
    profiles: Sequence[ServingProfile],
    role: Role,
    classes: Sequence[ContextClass] | None = None,
) -> list[ReplicaOption]:
    """The settings tried per profile. Unified and decode replicas: one option per context
    class of `classes` (default: `context_classes` of the mix), with the largest batch whose
    worst iteration (a full batch at the class's longest context, plus a full chunk of
    UNIFIED_CHUNKS for unified replicas) stays within the TPOT SLO, so TPOT holds whatever
    mix of the class's buckets the replica serves; prefill and unified replicas: each
    utilisation cap of UTILISATION_CAPS, the prompt queue's residual size taken over the
    buckets the class covers (prefill replicas: the whole mix). Options that cannot hold
    one sequence are left out."""
    buckets = request.mix.buckets
    chosen = tuple(classes) if classes is not None else mix_classes(request)
    bounds = np.array([bucket_context_tokens(b) for b in buckets])
    shares = np.array([b.share for b in buckets])
    prompts = np.array([b.size.prompt_tokens for b in buckets])

    def residual(covered: NDArray[np.bool_]) -> float:
        mean = float((shares * prompts)[covered].sum())
        return float((shares * prompts**2)[covered].sum()) / mean

    whole_mix = residual(np.ones(len(buckets), dtype=np.bool_))
    options = []
    for profile in profiles:
        price = request.prices.per_gpu_hour(profile.gpu_type) * profile.gpus
        if role == "prefill":
            for utilisation in UTILISATION_CAPS:
                settings = ReplicaSettings(
                    max_prefill_utilisation=utilisation, queue_prompt_tokens=whole_mix
                )
                options.append(ReplicaOption(profile, settings, price))
            continue
        for context in chosen:
            covered = context.covers(bounds)
            if not covered.any():
                continue
            if role == "decode":
                cap = batch_cap(profile, request.slo, context.tokens)
                if cap >= 1:
                    settings = ReplicaSettings(max_batch=cap)
                    options.append(ReplicaOption(profile, settings, price, context))
                continue
            queued = residual(covered)
            for chunk in UNIFIED_CHUNKS:
                cap = batch_cap(profile, request.slo, context.tokens, chunk)
                if cap < 1:
                    continue
                for utilisation in UTILISATION_CAPS:
                    settings = ReplicaSettings(cap, chunk, utilisation, queued)
                    options.append(ReplicaOption(profile, settings, price, context))
    return options


def mix_classes(request: PlanRequest) -> tuple[ContextClass, ...]:
    """The context classes of the request's mix (at most `request.context_classes`)."""
    return context_classes(request.mix, request.context_classes)


def capacity_tables(
    request: PlanRequest, profiles: Sequence[ServingProfile], roles: Sequence[Role] = ROLES
) -> CapacityTables:
    """Capacities of every replica option of every role for every bucket of the mix."""
    sizes = [bucket.size for bucket in request.mix.buckets]
    bounds = np.array([bucket_context_tokens(b) for b in request.mix.buckets])
    prompts = np.array([size.prompt_tokens for size in sizes])
    smallest_sender = min(profile.gpus for profile in profiles)
    link = request.kv_link_bytes_per_s_per_gpu * smallest_sender
    classes = mix_classes(request)
    options: dict[Role, tuple[ReplicaOption, ...]] = {}
    capacity: dict[Role, NDArray[np.float64]] = {}
    details: dict[Role, list[list[Capacity]]] = {}
    steps: dict[int, DecodeSteps] = {}  # by id of the profile
    for role in roles:
        options[role] = tuple(replica_options(request, profiles, role, classes))
        rows = []
        for option in options[role]:
            transfer = kv_transfer_s(option.profile, prompts, link)
            shared = None
            if role != "prefill":
                if id(option.profile) not in steps:
                    steps[id(option.profile)] = decode_steps(option.profile, sizes)
                shared = steps[id(option.profile)]
            rows.append(
                class_capacities(option, sizes, bounds, request.slo, role, transfer, shared)
            )
        table = np.array([[c.rate_per_s for c in row] for row in rows]).reshape(
            len(rows), len(sizes)
        )
        keep = undominated(table, np.array([o.price_per_hour for o in options[role]]))
        options[role] = tuple(options[role][i] for i in keep)
        details[role] = [rows[i] for i in keep]
        capacity[role] = table[keep]
    return CapacityTables(options, capacity, details)


def class_capacities(
    option: ReplicaOption,
    sizes: Sequence[RequestSize],
    bounds: NDArray[np.int64],
    slo: ServingSlo,
    role: Role,
    transfer_s: NDArray[np.float64],
    steps: DecodeSteps | None = None,
) -> list[Capacity]:
    """`capacity_table` of `option` for the sizes its context class covers (their context
    bounds `bounds`); 0 with limit `context` for the others. `steps`: the option profile's
    `decode_steps` for all of `sizes`, if computed."""
    covered = (
        np.ones(len(sizes), dtype=np.bool_)
        if option.context is None
        else option.context.covers(bounds)
    )
    positions = np.flatnonzero(covered)
    served = capacity_table(
        option.profile,
        [sizes[int(p)] for p in positions],
        slo,
        role,
        transfer_s[positions],
        option.settings,
        None if steps is None else steps.rows(positions),
    )
    row: list[Capacity | None] = [None] * len(sizes)
    for position, result in zip(positions.tolist(), served, strict=True):
        row[position] = result
    what = f"{option.profile.label} as {role}"
    label = option.context.label if option.context is not None else ""
    return [
        capacity
        if capacity is not None
        else Capacity(0.0, "context", f"{what} ({label}): requests reach {int(bound):,} tokens")
        for capacity, bound in zip(row, bounds.tolist(), strict=True)
    ]


def undominated(capacity: NDArray[np.float64], prices: NDArray[np.float64]) -> list[int]:
    """Rows that serve some bucket and that no other row dominates. Row j dominates row i
    when, for the largest whole k with k x price_j <= price_i, k replicas of j serve every
    bucket at least as fast as one of i (k = 1: j is at most as expensive and as fast; then
    one strictly better, or j an earlier identical row). Leaving a dominated option out
    cannot raise the optimum: any plan using n replicas of it can use k x n replicas of the
    dominating option instead, each with 1/k of the load, at no more cost."""
    keep = []
    order = np.arange(capacity.shape[0])
    for i in np.flatnonzero((capacity > 0).any(axis=1)):
        multiple = np.floor(prices[i] / prices + 1e-9)[:, None]
        dominated = (multiple >= 1)[:, 0] & (multiple * capacity >= capacity[i]).all(axis=1)
        strictly = (prices < prices[i]) | (capacity > capacity[i]).any(axis=1)
        dominated &= (strictly | (order < i)) & (order != i)
        if not dominated.any():
            keep.append(int(i))
    return keep


def _check_servable(
    request: PlanRequest,
    tables: CapacityTables,
    roles: Sequence[Role],
    profiles: Sequence[ServingProfile],
) -> None:
    servable = servable_by(tables, roles, len(request.mix.buckets))
    for position in np.flatnonzero(~servable):
        bucket = request.mix.buckets[int(position)]
        reasons = sorted(
            {
                row[int(position)].detail
                for role in roles
                for row in tables.details.get(role, [])
                if row[int(position)].rate_per_s <= 0 and row[int(position)].limit != "context"
            }
        )
        if not tables.options.get("unified"):
            fastest = min(profiles, key=lambda p: p.decode_step_s(1, bucket.size.prompt_tokens))
            step_s = fastest.decode_step_s(1, bucket.size.prompt_tokens)
            reasons.insert(
                0,
                f"the fastest decode step of one sequence ({fastest.label}) takes "
                f"{step_s * 1000:.1f} ms, over the TPOT SLO of {request.slo.tpot_s * 1000:.1f} ms",
            )
        raise InfeasiblePlanError(
            f"no allowed GPU type meets the SLO (TTFT {request.slo.ttft_s * 1000:.0f} ms, TPOT "
            f"{request.slo.tpot_s * 1000:.0f} ms) for {bucket.label} ({bucket.share:.1%} of "
            f"requests): " + "; ".join(reasons[:3])
        )


@dataclass
class _Model:
    """Column bookkeeping of the MILP."""

    costs: list[float]
    upper: list[float]
    slice_columns: dict[tuple[Role, int, int], int]
    replica_columns: dict[tuple[Role, int], int]

    def add(self, cost: float, upper: float) -> int:
        self.costs.append(cost)
        self.upper.append(upper)
        return len(self.costs) - 1


def _entry(
    rows: list[int], cols: list[int], values: list[float], row: int, col: int, value: float
) -> None:
    rows.append(row)
    cols.append(col)
    values.append(value)


def _integrality(model: _Model, integer_slices: bool) -> NDArray[np.int64]:
    """1 for integer columns: replica counts always, slice counts when `integer_slices`."""
    integral = np.ones(len(model.costs), dtype=np.int64)
    if not integer_slices:
        integral[list(model.slice_columns.values())] = 0
    return integral


def solve_plan(
    request: PlanRequest,
    tables: CapacityTables,
    gpu_types: Sequence[str] | None = None,
    roles: Sequence[Role] = ROLES,
    formulation: str = "voltpack",
    integer_slices: bool = False,
) -> ServingPlan:
    """The least-cost plan over the options of `roles` (only those of `gpu_types` if given).
    Replica counts are integers; each (bucket, option) serves a number of the bucket's
    slices: an integer with `integer_slices` (Mélange's granularity, the same optimum as its
    binary form), else any fraction (a router can split a bucket's traffic in any
    proportion: never costlier, and solved several times faster)."""
    started = time.perf_counter()
    buckets = request.mix.buckets
    slices = request.slices
    slice_rate = np.array([b.share * request.rate_per_s / slices for b in buckets])
    model = _Model([], [], {}, {})
    for role in roles:
        for o, option in enumerate(tables.options.get(role, ())):
            if gpu_types is not None and option.profile.gpu_type not in gpu_types:
                continue
            model.replica_columns[(role, o)] = model.add(option.price_per_hour, np.inf)
            for b in range(len(buckets)):
                if tables.capacity[role][o, b] > 0:
                    model.slice_columns[(role, b, o)] = model.add(0.0, float(slices))
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    lower: list[float] = []
    upper: list[float] = []
    by_bucket: dict[int, list[tuple[Role, int]]] = {b: [] for b in range(len(buckets))}
    by_option: dict[tuple[Role, int], list[tuple[int, int]]] = {
        key: [] for key in model.replica_columns
    }
    for (role, b, o), column in model.slice_columns.items():
        by_bucket[b].append((role, column))
        by_option[(role, o)].append((b, column))
    row = 0
    for b in range(len(buckets)):
        # every slice served once: unified slices + prefill slices = slices
        for role, column in by_bucket[b]:
            if role != "decode":
                _entry(rows, cols, values, row, column, 1.0)
        lower.append(float(slices))
        upper.append(float(slices))
        row += 1
        if "prefill" in roles:
            for role, column in by_bucket[b]:
                if role != "unified":
                    _entry(rows, cols, values, row, column, 1.0 if role == "prefill" else -1.0)
            lower.append(0.0)
            upper.append(0.0)
            row += 1
    for (role, o), replica_column in model.replica_columns.items():
        for b, column in by_option[(role, o)]:
            load = float(slice_rate[b] / tables.capacity[role][o, b])
            _entry(rows, cols, values, row, column, load)
        _entry(rows, cols, values, row, replica_column, -1.0)
        lower.append(-np.inf)
        upper.append(0.0)
        row += 1
    # scipy.optimize takes 0.3 s to import: only a process that plans pays it
    from scipy.optimize import Bounds, LinearConstraint, milp  # noqa: PLC0415

    matrix = coo_array((values, (rows, cols)), shape=(row, len(model.costs))).tocsr()
    result = milp(
        c=np.array(model.costs),
        constraints=LinearConstraint(matrix, np.array(lower), np.array(upper)),
        integrality=_integrality(model, integer_slices),
        bounds=Bounds(np.zeros(len(model.costs)), np.array(model.upper)),
        options={"time_limit": request.time_limit_s, "mip_rel_gap": MIP_RELATIVE_GAP},
    )
    if result.x is None:
        raise InfeasiblePlanError(f"the {formulation} plan has no solution: {result.message}")
    solution = np.asarray(result.x, dtype=np.float64)
    if not integer_slices:  # Mélange's integer slices keep its own split
        solution = balanced_solution(
            matrix,
            np.array(lower),
            np.array(upper),
            np.array(model.upper),
            list(model.replica_columns.values()),
            solution,
        )
    groups = []
    for (role, o), replica_column in model.replica_columns.items():
        replicas = round(solution[replica_column])
        if replicas == 0:
            continue
        rates = {
            b: float(solution[column] * slice_rate[b])
            for (r, b, oo), column in model.slice_columns.items()
            if r == role and oo == o and solution[column] > 1e-9
        }
        capacity = {b: float(rate) for b, rate in enumerate(tables.capacity[role][o]) if rate > 0}
        groups.append(replica_group(tables.options[role][o], role, replicas, rates, capacity))
    return finished_plan(request, groups, formulation, started, result)


def replica_group(
    option: ReplicaOption,
    role: Role,
    replicas: int,
    rates: dict[int, float],
    capacity: dict[int, float],
) -> ReplicaGroup:
    """A plan's group of `replicas` replicas of `option` in `role`."""
    return ReplicaGroup(
        profile=option.profile,
        role=role,
        replicas=replicas,
        price_per_gpu_hour=option.price_per_hour / option.profile.gpus,
        bucket_rates_per_s=rates,
        capacity_per_s=capacity,
        max_batch=option.settings.max_batch,
        prefill_chunk_tokens=option.settings.prefill_chunk_tokens,
        context=option.context,
    )


def finished_plan(
    request: PlanRequest,
    groups: Sequence[ReplicaGroup],
    formulation: str,
    started_s: float,
    result: OptimizeResult,
) -> ServingPlan:
    """The plan a solve produced, with its solve time and how the solver ended."""
    return ServingPlan(
        model=request.model,
        slo=request.slo,
        rate_per_s=request.rate_per_s,
        mix=request.mix,
        groups=tuple(groups),
        formulation=formulation,
        solve_s=time.perf_counter() - started_s,
        notes=solver_notes(result),
        optimality_gap=float(getattr(result, "mip_gap", 0.0) or 0.0),
        kv_link_bytes_per_s_per_gpu=request.kv_link_bytes_per_s_per_gpu,
    )


def solver_notes(result: OptimizeResult) -> tuple[str, ...]:
    """What to tell the user about how the solve ended (nothing when proven optimal)."""
    if result.status == 0:
        return ()
    gap = float(getattr(result, "mip_gap", 0.0) or 0.0)
    return (f"HiGHS stopped at its time limit within {gap:.2%} of the best possible cost",)


def plan_service(request: PlanRequest, book: ProfileBook | None = None) -> ServingPlan:
    """voltpack's plan: the cheapest mix of GPU types, TP degrees and roles (unified, or split
    prefill/decode pools when `allow_split`) that serves the request mix within the SLO.

    Raises InfeasiblePlanError naming the bucket and bound when no allowed type can serve
    some requests, InvalidRequestError for an unknown model or unpriced type.
    """
    profiles = allowed_profiles(request, book or default_profile_book())
    roles: tuple[Role, ...] = ROLES if request.allow_split else ("unified",)
    tables = capacity_tables(request, profiles, roles)
    _check_servable(request, tables, roles, profiles)
    return solve_plan(request, tables, roles=roles)


def best_single_type_plan(
    request: PlanRequest, book: ProfileBook | None = None, split: bool = False
) -> ServingPlan:
    """The cheapest plan that uses one GPU type only (any TP degrees and context classes,
    unified replicas; with `split` and `request.allow_split` also prefill and decode pools,
    both on that type): the baseline Mélange compares against, and with `split` the one
    that has every right voltpack's planner has except mixing types. Raises
    InfeasiblePlanError when no type alone serves every bucket."""
    profiles = allowed_profiles(request, book or default_profile_book())
    roles: tuple[Role, ...] = ROLES if split and request.allow_split else ("unified",)
    tables = capacity_tables(request, profiles, roles)
    best: ServingPlan | None = None
    for gpu_type in dict.fromkeys(p.gpu_type for p in profiles):
        if not servable_by(tables, roles, len(request.mix.buckets), gpu_type).all():
            continue
        plan = solve_plan(request, tables, (gpu_type,), roles, f"single:{gpu_type}")
        if best is None or plan.cost_per_hour < best.cost_per_hour:
            best = plan
    if best is None:
        raise InfeasiblePlanError("no single allowed GPU type serves every bucket within the SLO")
    return best


def servable_by(
    tables: CapacityTables, roles: Sequence[Role], buckets: int, gpu_type: str | None = None
) -> NDArray[np.bool_]:
    """Per bucket, whether the options of `roles` (of `gpu_type` only, if given) serve it:
    a unified option, or a prefill and a decode option."""

    def best(role: Role) -> NDArray[np.float64]:
        table = tables.capacity.get(role)
        chosen = [
            i
            for i, option in enumerate(tables.options.get(role, ()))
            if gpu_type is None or option.profile.gpu_type == gpu_type
        ]
        if table is None or not chosen:
            return np.zeros(buckets)
        return np.asarray(table[chosen].max(axis=0), dtype=np.float64)

    servable = best("unified") > 0
    if "prefill" in roles and "decode" in roles:
        servable |= np.minimum(best("prefill"), best("decode")) > 0
    return np.asarray(servable, dtype=np.bool_)
