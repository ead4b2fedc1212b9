"""Heterogeneity-aware allocation policies: base constraints on random problems, and semantics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy.optimize import linprog

from voltpack.model.errors import InvalidRequestError, PolicyError
from voltpack.policies.hetero.allocation import AllocationInput, spread_over_models
from voltpack.policies.hetero.registry import (
    allocation_policy_names,
    allocation_policy_summaries,
    make_allocation_policy,
)

TOL = 1e-6
AWARE = [n for n in allocation_policy_names() if make_allocation_policy(n).heterogeneity_aware]
AGNOSTIC = [n for n in allocation_policy_names() if n not in AWARE]


def problem(
    throughputs: list[list[float]] | NDArray[np.float64],
    capacity: list[int] | tuple[int, ...],
    *,
    scale_factors: list[int] | None = None,
    weights: list[float] | None = None,
    remaining: list[float] | None = None,
    elapsed: list[float] | None = None,
    job_ids: tuple[int, ...] | None = None,
) -> AllocationInput:
    rates = np.asarray(throughputs, dtype=np.float64).reshape(-1, len(capacity))
    jobs = rates.shape[0]
    return AllocationInput(
        gpu_models=tuple(f"m{j}" for j in range(len(capacity))),
        capacity_gpus=np.asarray(capacity, dtype=np.int64),
        throughputs_steps_per_s=rates,
        scale_factors=np.asarray(scale_factors or [1] * jobs, dtype=np.int64),
        priority_weights=np.asarray(weights or [1.0] * jobs, dtype=np.float64),
        steps_remaining=np.asarray(remaining or [1000.0] * jobs, dtype=np.float64),
        time_since_arrival_s=np.asarray(elapsed or [0.0] * jobs, dtype=np.float64),
        job_ids=job_ids if job_ids is not None else tuple(range(jobs)),
    )


@st.composite
def problems(draw: st.DrawFn, *, all_runnable: bool = False) -> AllocationInput:
    """1-40 jobs on 1-3 models, capacities 0-16, scale factors 1-8, some zero throughputs."""
    models = draw(st.integers(1, 3))
    jobs = draw(st.integers(1, 40))
    low = 1 if all_runnable else 0
    capacity = draw(st.lists(st.integers(low, 16), min_size=models, max_size=models))
    max_sf = max(capacity) if all_runnable else 8
    sfs = draw(st.lists(st.integers(1, min(8, max_sf)), min_size=jobs, max_size=jobs))
    rate = st.floats(0.01, 100.0, allow_nan=False)
    if not all_runnable:
        rate = st.one_of(st.just(0.0), rate)
    rates = np.array(
        draw(
            st.lists(st.lists(rate, min_size=models, max_size=models), min_size=jobs, max_size=jobs)
        )
    )
    if all_runnable:
        # Every job must be runnable on at least one model: its largest-capacity one.
        best = int(np.argmax(capacity))
        rates[:, best] = np.maximum(rates[:, best], 0.5)
    weights = draw(st.lists(st.sampled_from([1.0, 1.0, 2.0, 0.5]), min_size=jobs, max_size=jobs))
    remaining = draw(st.lists(st.floats(1.0, 1e6), min_size=jobs, max_size=jobs))
    elapsed = draw(st.lists(st.floats(0.0, 1e5), min_size=jobs, max_size=jobs))
    return problem(
        rates, capacity, scale_factors=sfs, weights=weights, remaining=remaining, elapsed=elapsed
    )


def assert_feasible(p: AllocationInput, x: NDArray[np.float64]) -> None:
    assert x.shape == (p.job_count, len(p.gpu_models))
    assert np.isfinite(x).all()
    assert (x >= -TOL).all()
    assert (x.sum(axis=1) <= 1 + TOL).all()
    used = (p.scale_factors[:, None] * x).sum(axis=0)
    assert (used <= p.capacity_gpus + TOL).all(), (used, p.capacity_gpus)
    assert (x[~p.runnable] <= TOL).all()


def normalized_to_fair_share(p: AllocationInput, x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each job's throughput over its agnostic max-min throughput, scaled by sf / weight."""
    fair = make_allocation_policy("max_min_fairness").allocate(p)
    isolated = (p.throughputs_steps_per_s * fair).sum(axis=1)
    rate = (p.throughputs_steps_per_s * x).sum(axis=1)
    return np.asarray(rate / isolated * p.scale_factors / p.priority_weights)


def best_completion_level(p: AllocationInput) -> float:
    """max z s.t. rate_i(X) >= R_i z for every job, solved independently of voltpack.

    Rows are divided by R_i and z is solved in units of the slowest job's whole-allocation
    rate over its remaining steps (an upper bound of z), so a level near the solver's
    tolerance (1e-7) is not noise."""
    jobs, models = p.throughputs_steps_per_s.shape
    best = p.throughputs_steps_per_s.max(axis=1) / p.steps_remaining
    unit = float(best[best > 0].min()) if (best > 0).any() else 1.0
    n = jobs * models
    c = np.zeros(n + 1)
    c[-1] = -1.0
    rows = []
    bounds_b = []
    for j in range(models):  # capacity
        row = np.zeros(n + 1)
        row[j:n:models] = p.scale_factors
        rows.append(row)
        bounds_b.append(p.capacity_gpus[j])
    for i in range(jobs):  # time share and completion level
        share = np.zeros(n + 1)
        share[i * models : (i + 1) * models] = 1.0
        rows.append(share)
        bounds_b.append(1.0)
        level = np.zeros(n + 1)
        level[i * models : (i + 1) * models] = -p.throughputs_steps_per_s[i] / (
            p.steps_remaining[i] * unit
        )
        level[-1] = 1.0
        rows.append(level)
        bounds_b.append(0.0)
    upper = np.where(p.runnable, 1.0, 0.0).ravel()
    result = linprog(
        c,
        A_ub=np.array(rows),
        b_ub=np.array(bounds_b),
        bounds=[(0, u) for u in upper] + [(0, None)],
        method="highs",
    )
    assert result.status == 0
    return float(result.x[-1]) * unit


# --- registry and input validation ----------------------------------------------------------


def test_registry_names_and_summaries() -> None:
    names = allocation_policy_names()
    assert len(names) == len(set(names)) == 12
    assert set(allocation_policy_summaries()) == set(names)
    for name in names:
        policy = make_allocation_policy(name)
        assert policy.name == name
        assert policy.heterogeneity_aware == name.endswith("_perf")
        assert policy.whole_gpus_in_order == name.startswith("fifo")


def test_unknown_policy_name_raises_policy_error_listing_the_names() -> None:
    with pytest.raises(PolicyError, match=r"'gandiva'.*max_min_fairness"):
        make_allocation_policy("gandiva")


def _valid_arrays() -> dict[str, object]:
    return {
        "gpu_models": ("a", "b"),
        "capacity_gpus": np.array([2, 2], dtype=np.int64),
        "throughputs_steps_per_s": np.ones((3, 2)),
        "scale_factors": np.ones(3, dtype=np.int64),
        "priority_weights": np.ones(3),
        "steps_remaining": np.ones(3),
        "time_since_arrival_s": np.zeros(3),
        "job_ids": (0, 1, 2),
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gpu_models": ("a",)}, "must agree"),
        ({"capacity_gpus": np.array([2, 2, 2], dtype=np.int64)}, "must agree"),
        ({"throughputs_steps_per_s": np.ones((3, 3))}, "must agree"),
        ({"scale_factors": np.ones(2, dtype=np.int64)}, "scale_factors"),
        ({"priority_weights": np.ones(4)}, "priority_weights"),
        ({"steps_remaining": np.ones(1)}, "steps_remaining"),
        ({"time_since_arrival_s": np.ones(2)}, "time_since_arrival_s"),
        ({"job_ids": (0, 1)}, "job_ids"),
        ({"scale_factors": np.array([1, 0, 1], dtype=np.int64)}, "scale factor"),
        ({"priority_weights": np.array([1.0, 0.0, 1.0])}, "priority weight"),
        ({"priority_weights": np.array([1.0, -2.0, 1.0])}, "priority weight"),
        ({"capacity_gpus": np.array([2, -1], dtype=np.int64)}, "capacities"),
        ({"throughputs_steps_per_s": np.array([[1.0, np.nan]] * 3)}, "finite"),
        ({"throughputs_steps_per_s": np.array([[1.0, np.inf]] * 3)}, "finite"),
    ],
)
def test_bad_allocation_input_raises_invalid_request(
    change: dict[str, object], message: str
) -> None:
    arrays = _valid_arrays() | change
    with pytest.raises(InvalidRequestError, match=message):
        AllocationInput(**arrays)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", allocation_policy_names())
@pytest.mark.parametrize("models", [1, 3])
def test_empty_problem_gives_an_empty_allocation(name: str, models: int) -> None:
    empty = problem(np.zeros((0, models)), [4] * models)
    x = make_allocation_policy(name).allocate(empty)
    assert x.shape == (0, models)


@pytest.mark.parametrize("name", allocation_policy_names())
def test_cluster_without_gpus_allocates_nothing(name: str) -> None:
    p = problem([[1.0, 2.0], [3.0, 0.0]], [0, 0])
    x = make_allocation_policy(name).allocate(p)
    assert x.shape == (2, 2)
    assert (x == 0).all()


# --- base constraints on random problems ----------------------------------------------------


@pytest.mark.parametrize("name", allocation_policy_names())
@settings(max_examples=25, deadline=None)
@given(p=problems())
def test_every_policy_respects_the_base_constraints(name: str, p: AllocationInput) -> None:
    x = make_allocation_policy(name).allocate(p)
    assert_feasible(p, x)


@pytest.mark.parametrize("name", ["fifo", "fifo_perf"])
@settings(max_examples=25, deadline=None)
@given(p=problems())
def test_fifo_gives_whole_gpus_on_one_model(name: str, p: AllocationInput) -> None:
    x = make_allocation_policy(name).allocate(p)
    assert set(np.unique(x)) <= {0.0, 1.0}
    assert (x.sum(axis=1) <= 1).all()


# --- fairness -------------------------------------------------------------------------------


def test_agnostic_max_min_gives_equal_time_shares_when_overloaded() -> None:
    rng = np.random.default_rng(0)
    p = problem(rng.uniform(0.5, 20.0, size=(20, 2)), [4, 4])
    x = make_allocation_policy("max_min_fairness").allocate(p)
    assert_feasible(p, x)
    np.testing.assert_allclose(x.sum(axis=1), 0.4, rtol=1e-4)
    # Every GPU alike: each job's share is spread over the models by GPU count.
    np.testing.assert_allclose(x, 0.2, rtol=1e-4)


def test_agnostic_max_min_weights_shares_by_scale_factor() -> None:
    # 4 one-GPU jobs and 2 two-GPU jobs on 4 GPUs: equal GPU time, sf_i * share_i equal.
    p = problem(np.ones((6, 1)), [4], scale_factors=[1, 1, 1, 1, 2, 2])
    x = make_allocation_policy("max_min_fairness").allocate(p)
    assert_feasible(p, x)
    gpu_time = x.sum(axis=1) * p.scale_factors
    np.testing.assert_allclose(gpu_time, 4 / 6, rtol=1e-4)


def test_priority_weight_two_gets_twice_the_share_under_max_min_fairness() -> None:
    weights = [1.0] * 9 + [2.0]
    p = problem(np.ones((10, 1)), [4], weights=weights)
    x = make_allocation_policy("max_min_fairness").allocate(p)
    share = x.sum(axis=1)
    np.testing.assert_allclose(share[:9], 4 / 11, rtol=1e-4)
    assert share[9] == pytest.approx(2 * share[0], rel=1e-4)


def test_max_min_fairness_is_not_needed_when_underloaded() -> None:
    p = problem([[1.0, 2.0], [3.0, 1.0]], [2, 2])
    for name in ("max_min_fairness", "max_min_fairness_perf"):
        x = make_allocation_policy(name).allocate(p)
        np.testing.assert_allclose(x.sum(axis=1), 1.0, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(p=problems(all_runnable=True))
def test_aware_max_min_minimum_is_at_least_the_agnostic_one(p: AllocationInput) -> None:
    agnostic = make_allocation_policy("max_min_fairness").allocate(p)
    aware = make_allocation_policy("max_min_fairness_perf").allocate(p)
    assert_feasible(p, aware)
    low_agnostic = normalized_to_fair_share(p, agnostic).min()
    low_aware = normalized_to_fair_share(p, aware).min()
    assert low_aware >= low_agnostic * (1 - 1e-5) - 1e-9


@pytest.mark.parametrize("name", ["finish_time_fairness", "finish_time_fairness_perf"])
@settings(max_examples=30, deadline=None)
@given(p=problems(all_runnable=True))
def test_finish_time_fairness_never_worse_than_the_isolated_share(
    name: str, p: AllocationInput
) -> None:
    x = make_allocation_policy(name).allocate(p)
    assert_feasible(p, x)
    rates = (
        p.throughputs_steps_per_s
        if name.endswith("_perf")
        else p.agnostic().throughputs_steps_per_s
    )
    fair = make_allocation_policy("max_min_fairness").allocate(p)
    isolated = (rates * fair).sum(axis=1)
    achieved = (rates * x).sum(axis=1)
    assert (isolated > 0).all()
    assert (achieved > 0).all()
    elapsed, remaining = p.time_since_arrival_s, p.steps_remaining
    rho = (elapsed + remaining / achieved) / (elapsed + remaining / isolated)
    assert rho.max() <= 1 + 1e-3


@pytest.mark.parametrize(
    "name",
    [
        "max_min_fairness",
        "max_min_fairness_perf",
        "finish_time_fairness",
        "finish_time_fairness_perf",
    ],
)
def test_a_job_that_cannot_run_does_not_starve_the_others(name: str) -> None:
    # Three runnable jobs share 2 GPUs (2/3 each); the fourth has zero throughput everywhere.
    with_blocked = problem([[1.0], [2.0], [3.0], [0.0]], [2])
    x = make_allocation_policy(name).allocate(with_blocked)
    np.testing.assert_allclose(x[:3, 0], 2 / 3, atol=1e-4)


# --- heterogeneity --------------------------------------------------------------------------


SENSITIVE = AWARE


@pytest.mark.parametrize("name", SENSITIVE)
def test_aware_policies_put_the_sensitive_job_on_the_fast_model(name: str) -> None:
    # Job 0 is 10x faster on model A; job 1 runs equally on both; one GPU of each.
    p = problem([[10.0, 1.0], [1.0, 1.0]], [1, 1])
    x = make_allocation_policy(name).allocate(p)
    assert_feasible(p, x)
    assert x[0, 0] >= 0.99, x
    assert x[1, 1] >= 0.99, x


def test_aware_finish_time_fairness_gives_the_sensitive_job_at_least_its_fair_rate() -> None:
    p = problem([[10.0, 1.0], [1.0, 1.0]], [1, 1])
    x = make_allocation_policy("finish_time_fairness_perf").allocate(p)
    assert_feasible(p, x)
    rates = (p.throughputs_steps_per_s * x).sum(axis=1)
    assert rates[0] >= 5.5 * (1 - 1e-3)  # half of each model: 0.5 x 10 + 0.5 x 1
    assert rates[1] >= 1.0 * (1 - 1e-3)


@pytest.mark.parametrize("name", [n for n in AGNOSTIC if n != "fifo"])
def test_agnostic_policies_ignore_the_speed_up(name: str) -> None:
    p = problem([[10.0, 1.0], [1.0, 1.0]], [1, 1])
    x = make_allocation_policy(name).allocate(p)
    assert_feasible(p, x)
    np.testing.assert_allclose(x.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(x, 0.5, atol=1e-6)


# --- efficiency -----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(p=problems())
def test_min_makespan_reaches_the_optimal_completion_level(p: AllocationInput) -> None:
    x = make_allocation_policy("min_total_duration_perf").allocate(p)
    assert_feasible(p, x)
    level = best_completion_level(p)
    completion = (p.throughputs_steps_per_s * x).sum(axis=1) / p.steps_remaining
    assert (completion >= level * (1 - 1e-5) - 1e-12).all()


@settings(max_examples=30, deadline=None)
@given(p=problems())
def test_max_total_throughput_beats_every_other_policy_on_its_objective(p: AllocationInput) -> None:
    best = p.throughputs_steps_per_s.max(axis=1, keepdims=True)
    normalized = np.divide(
        p.throughputs_steps_per_s,
        best,
        out=np.zeros_like(best * p.throughputs_steps_per_s),
        where=best > 0,
    )
    ours = (normalized * make_allocation_policy("max_sum_throughput_perf").allocate(p)).sum()
    for name in ("max_min_fairness", "max_sum_throughput", "shortest_remaining_perf", "fifo_perf"):
        other = (normalized * make_allocation_policy(name).allocate(p)).sum()
        assert ours >= other - 1e-6


# --- completion time ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["shortest_remaining", "shortest_remaining_perf"])
def test_shortest_remaining_serves_the_job_with_less_work_on_one_gpu(name: str) -> None:
    p = problem([[5.0], [5.0], [5.0]], [1], remaining=[5000.0, 100.0, 900.0])
    x = make_allocation_policy(name).allocate(p)
    np.testing.assert_allclose(x[:, 0], [0.0, 1.0, 0.0], atol=1e-6)


def test_shortest_remaining_perf_compares_time_not_steps() -> None:
    # Job 0 has fewer steps but runs 20x slower: job 1 finishes first, so it is served.
    p = problem([[1.0], [20.0]], [1], remaining=[100.0, 1000.0])
    x = make_allocation_policy("shortest_remaining_perf").allocate(p)
    np.testing.assert_allclose(x[:, 0], [0.0, 1.0], atol=1e-6)


# --- FIFO -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fifo", "fifo_perf"])
def test_fifo_serves_in_job_id_order_whatever_the_row_order(name: str) -> None:
    p = problem(np.ones((4, 1)), [2], job_ids=(7, 3, 9, 5))
    x = make_allocation_policy(name).allocate(p)
    assert x[:, 0].tolist() == [0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("name", ["fifo", "fifo_perf"])
def test_fifo_blocks_behind_a_head_that_does_not_fit(name: str) -> None:
    p = problem(np.ones((3, 1)), [2], scale_factors=[1, 2, 1])
    x = make_allocation_policy(name).allocate(p)
    assert x[:, 0].tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("name", ["fifo", "fifo_perf"])
def test_fifo_keeps_a_jobs_model_across_calls(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    policy = make_allocation_policy(name, seed=seed)
    rates = rng.uniform(1.0, 10.0, size=(12, 3))
    first = policy.allocate(problem(rates[:6], [2, 2, 2]))
    assert first.sum() == 6
    # Later arrivals (higher ids) never move the jobs that hold GPUs.
    second = policy.allocate(problem(rates, [2, 2, 2]))
    np.testing.assert_array_equal(second[:6], first)
    assert second[6:].sum() == 0


def test_fifo_gives_a_finished_jobs_gpus_to_the_head_of_the_queue() -> None:
    policy = make_allocation_policy("fifo")
    rates = np.ones((4, 2))
    first = policy.allocate(problem(rates, [1, 1]))
    assert first[:2].sum() == 2 and first[2:].sum() == 0
    freed = int(np.argmax(first[0]))
    second = policy.allocate(problem(rates[1:], [1, 1], job_ids=(1, 2, 3)))
    np.testing.assert_array_equal(second[0], first[1])
    assert second[1, freed] == 1.0 and second[2].sum() == 0


def test_fifo_agnostic_is_seeded() -> None:
    rates = np.ones((6, 3))
    runs = [
        make_allocation_policy("fifo", seed=s).allocate(problem(rates, [2, 2, 2])) for s in (1, 1)
    ]
    np.testing.assert_array_equal(runs[0], runs[1])


def test_fifo_respects_capacity_after_a_job_finishes() -> None:
    policy = make_allocation_policy("fifo")
    policy.allocate(problem(np.ones((3, 1)), [2], scale_factors=[1, 1, 2]))
    # Job 0 finished: job 1 (1 GPU) keeps running; job 2 needs 2 GPUs and must wait.
    p = problem(np.ones((2, 1)), [2], scale_factors=[1, 2], job_ids=(1, 2))
    assert_feasible(p, policy.allocate(p))


@settings(max_examples=40, deadline=None)
@given(p=problems(), name=st.sampled_from(["fifo", "fifo_perf"]))
def test_fifo_respects_capacity_across_calls_when_jobs_only_arrive(
    p: AllocationInput, name: str
) -> None:
    policy = make_allocation_policy(name)
    half = max(1, p.job_count // 2)
    first = _rows(p, list(range(half)))
    assert_feasible(first, policy.allocate(first))
    assert_feasible(p, policy.allocate(p))


def _rows(p: AllocationInput, rows: list[int]) -> AllocationInput:
    return AllocationInput(
        gpu_models=p.gpu_models,
        capacity_gpus=p.capacity_gpus,
        throughputs_steps_per_s=p.throughputs_steps_per_s[rows],
        scale_factors=p.scale_factors[rows],
        priority_weights=p.priority_weights[rows],
        steps_remaining=p.steps_remaining[rows],
        time_since_arrival_s=p.time_since_arrival_s[rows],
        job_ids=tuple(p.job_ids[r] for r in rows),
    )


# --- spread_over_models ---------------------------------------------------------------------


def test_spread_over_models_splits_by_gpu_count() -> None:
    p = problem([[1.0, 1.0], [1.0, 1.0]], [3, 1])
    spread = spread_over_models(p, np.array([[0.8, 0.0], [0.0, 0.4]]))
    np.testing.assert_allclose(spread, [[0.6, 0.2], [0.3, 0.1]])


def test_spread_over_models_keeps_the_allocation_when_spreading_would_overfill() -> None:
    # Job 1 can only run on model 0; spreading job 0 half onto model 0 would overfill it.
    p = problem([[1.0, 1.0], [1.0, 0.0]], [1, 1])
    given_x = np.array([[0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_array_equal(spread_over_models(p, given_x), given_x)
