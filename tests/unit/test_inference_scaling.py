"""Planning rates: forecast quantile, hysteresis, burst windows, and a short autoscaled day."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from voltpack.forecast.series import TimeSeries
from voltpack.model.errors import InvalidRequestError
from voltpack.perf.serving_capacity import ServingSlo
from voltpack.policies.inference.buckets import request_mix
from voltpack.policies.inference.prices import example_prices
from voltpack.policies.inference.scaling import (
    MIN_BACKTEST_REQUESTS,
    backlog_planning_rate_per_s,
    backtest_headroom,
    backtested_planning_rate_per_s,
    backtested_slot_planning_rate_per_s,
    forecast_planning_rate,
    peak_window_rate_per_s,
    should_replan,
    slot_backlog_planning_rate_per_s,
)
from voltpack.sim.inference_autoscale import AutoscaleSetup, interval_rates, simulate_day
from voltpack.sim.traces.azure_llm import (
    CODE_TRACE,
    LlmRequests,
    azure_llm_dir,
    load_azure_llm_trace,
)


def _series(values: np.ndarray) -> TimeSeries:
    return TimeSeries("rate", "request_rate", 900.0, 0.0, values, "requests_per_s", (96,))


def test_forecast_plans_above_the_mean_on_a_rising_edge() -> None:
    steps = np.arange(96 * 3)
    values = (
        5 + 3 * np.sin(2 * np.pi * steps / 96) + np.random.default_rng(0).normal(0, 0.3, steps.size)
    )
    rate = forecast_planning_rate(_series(values), 2, "seasonal_naive", 0.9)
    upcoming = 5 + 3 * np.sin(2 * np.pi * np.array([288, 289]) / 96)
    assert rate.rate_per_s >= upcoming.max() - 0.5
    assert "q0.9 of seasonal_naive" in rate.source


def test_forecaster_failure_falls_back_to_the_last_measured_rate() -> None:
    rate = forecast_planning_rate(_series(np.array([1.0, 2.0])), 1, "no-such-model")
    assert rate.rate_per_s == 2.0
    assert rate.source.startswith("fallback")


def test_hysteresis_keeps_a_plan_within_ten_percent() -> None:
    assert should_replan(None, 3.0)
    assert not should_replan(10.0, 10.9)
    assert should_replan(10.0, 11.5)
    assert should_replan(10.0, 8.5)


def test_peak_window_rate_sees_bursts_the_mean_hides() -> None:
    steady = np.arange(0, 600, 0.5)
    bursty = np.concatenate([steady, np.full(200, 300.0)])
    assert peak_window_rate_per_s(steady, 10) == pytest.approx(2.0)
    assert peak_window_rate_per_s(bursty, 10, 1.0) > 20
    with pytest.raises(InvalidRequestError):
        peak_window_rate_per_s(np.array([]), 10)


def test_interval_rates_count_per_interval() -> None:
    rates = interval_rates(np.array([0.0, 1.0, 900.0, 1799.0, 2000.0]), 0.0, 2, 900.0)
    assert rates.tolist() == [2 / 900, 2 / 900]


def test_a_short_day_runs_both_policies_and_counts_every_request() -> None:
    rng = np.random.default_rng(1)
    prompts = rng.integers(100, 1500, 400)
    outputs = rng.integers(20, 300, 400)
    day_s = 86_400.0
    history_arrivals = np.sort(rng.uniform(0, day_s, 300))
    day_arrivals = np.sort(rng.uniform(day_s, 2 * day_s, 300))
    history = LlmRequests(history_arrivals, prompts[:300], outputs[:300])
    day = LlmRequests(day_arrivals, prompts[100:], outputs[100:])
    setup = AutoscaleSetup(
        model="llama2-70b",
        mix=request_mix(prompts, outputs),
        slo=ServingSlo(4.0, 0.12),
        prices=example_prices(),
        interval_s=4 * 3600.0,
        startup_s=600.0,
        forecaster="seasonal_naive",
        gpu_types=("H100-SXM",),
    )
    outcomes = simulate_day(setup, history, day, day_s)
    for outcome in outcomes.values():
        assert outcome.requests == 300
        assert 0 <= outcome.slo_attainment_pct <= 100
        assert outcome.cost_usd > 0
        assert len(outcome.planning_rates_per_s) == 6


def test_backlog_rate_counts_a_burst_by_its_requests() -> None:
    rng = np.random.default_rng(0)
    steady = np.cumsum(rng.exponential(0.5, 2400))  # Poisson, 2 requests/s
    prompts = np.full(steady.size, 500)
    calm = backlog_planning_rate_per_s(steady, prompts, wait_s=4.0)
    assert 1.6 < calm < 2.6
    burst = np.concatenate([steady, np.full(100, steady[-1] / 2)])  # 100 at once: 4% of all
    window = peak_window_rate_per_s(burst, 10)
    rate = backlog_planning_rate_per_s(burst, np.full(burst.size, 500), wait_s=4.0)
    # 99% of requests start within 4 s only if most of the burst drains within 4 s
    assert rate > 15 > window
    longer = backlog_planning_rate_per_s(burst, np.full(burst.size, 500), wait_s=8.0)
    assert longer < rate
    with pytest.raises(InvalidRequestError):
        backlog_planning_rate_per_s(steady, prompts[:-1], wait_s=4.0)
    with pytest.raises(InvalidRequestError):
        backlog_planning_rate_per_s(steady, prompts, wait_s=0.0)


def _azure_code_trace() -> tuple[np.ndarray, np.ndarray]:
    trace = load_azure_llm_trace(azure_llm_dir() / CODE_TRACE)
    return trace.arrival_s - trace.arrival_s.min(), np.asarray(trace.prompt_tokens)


def _per_slot(arrival_s: np.ndarray, prompts: np.ndarray, slot_s: float) -> tuple[Any, Any]:
    slot = (arrival_s // slot_s).astype(np.int64)
    return np.bincount(slot), np.bincount(slot, weights=prompts)


def test_the_slot_rate_matches_the_per_request_rate_on_the_azure_code_trace() -> None:
    arrival_s, prompts = _azure_code_trace()
    for wait_s in (1.5, 4.0):
        exact = backlog_planning_rate_per_s(arrival_s, prompts, wait_s, 0.99)
        counts, tokens = _per_slot(arrival_s, prompts, 0.25)
        fine = slot_backlog_planning_rate_per_s(counts, 0.25, wait_s, 0.99, tokens)
        assert fine == pytest.approx(exact, rel=0.02)
        counts, tokens = _per_slot(arrival_s, prompts, 1.0)
        assert slot_backlog_planning_rate_per_s(counts, 1.0, wait_s, 0.99, tokens) == (
            pytest.approx(exact, rel=0.05)
        )
        # counts only (each request the mean prompt): the trace's large prompts come in bursts
        counts_only = slot_backlog_planning_rate_per_s(counts, 1.0, wait_s, 0.99)
        assert 0.85 * exact < counts_only < exact


def test_slots_much_longer_than_the_ttft_slo_smooth_the_bursts_away() -> None:
    arrival_s, prompts = _azure_code_trace()
    exact = backlog_planning_rate_per_s(arrival_s, prompts, 1.5, 0.99)
    counts, tokens = _per_slot(arrival_s, prompts, 60.0)
    coarse = slot_backlog_planning_rate_per_s(counts, 60.0, 1.5, 0.99, tokens)
    # a minute's slot sees the busiest minutes, not the seconds inside them: 4x less
    assert coarse < exact / 3
    busiest = counts.max() / 60.0
    assert counts.sum() / arrival_s.max() < coarse <= busiest * 1.001


def test_the_slot_rate_of_steady_counts_is_their_rate_and_of_nothing_zero() -> None:
    steady = np.full(100, 30.0)
    # a rate just under 3/s lets the last 1% wait a little longer than 2 s: allowed
    assert 2.98 < slot_backlog_planning_rate_per_s(steady, 10.0, 2.0) <= 3.0
    assert slot_backlog_planning_rate_per_s(np.zeros(5), 10.0, 2.0) == 0.0
    # one slot of 10 s holding 100 requests (evened out), the rest quiet: at rate R the one
    # arriving at t waits (10 - R) t / R, over 2 s after t = 2R / (10 - R); 1 of 100 may be
    # late: 10 (10 - 2R / (10 - R)) = 1, R = 99 / 11.9
    burst = np.zeros(60)
    burst[30] = 100.0
    assert slot_backlog_planning_rate_per_s(burst, 10.0, 2.0) == pytest.approx(99 / 11.9, rel=1e-3)
    with pytest.raises(InvalidRequestError, match="counts"):
        slot_backlog_planning_rate_per_s(np.array([1.0, -1.0]), 10.0, 2.0)
    with pytest.raises(InvalidRequestError, match="slot_s"):
        slot_backlog_planning_rate_per_s(steady, 0.0, 2.0)
    with pytest.raises(InvalidRequestError, match="prompt_tokens"):
        slot_backlog_planning_rate_per_s(steady, 10.0, 2.0, prompt_tokens=np.ones(3))


def test_the_backtest_raises_the_rate_by_what_the_later_half_needed_more() -> None:
    rng = np.random.default_rng(1)
    steady = np.cumsum(rng.exponential(0.5, 2400))  # Poisson, 2 requests/s
    prompts = np.full(steady.size, 500)
    calm = backtested_planning_rate_per_s(steady, prompts, wait_s=4.0)
    assert calm.window_rate_per_s == backlog_planning_rate_per_s(steady, prompts, 4.0)
    assert 1.0 <= calm.headroom < 1.15
    # 100 requests at once in the later half only: the earlier half never saw such a burst
    middle_s = steady[-1] * 0.75
    burst = np.sort(np.concatenate([steady, np.full(100, middle_s)]))
    tokens = np.full(burst.size, 500)
    raised = backtested_planning_rate_per_s(burst, tokens, wait_s=4.0)
    half_s = (burst[0] + burst[-1]) / 2
    early, late = burst < half_s, burst >= half_s
    expected = backlog_planning_rate_per_s(burst[late], tokens[late], 4.0) / (
        backlog_planning_rate_per_s(burst[early], tokens[early], 4.0)
    )
    assert raised.headroom == pytest.approx(expected) and raised.headroom > 2
    assert raised.rate_per_s == pytest.approx(raised.window_rate_per_s * raised.headroom)
    # the same burst in the earlier half: the later half needed less, no headroom
    early_burst = np.sort(np.concatenate([steady, np.full(100, steady[-1] * 0.25)]))
    assert backtested_planning_rate_per_s(early_burst, tokens, wait_s=4.0).headroom == 1.0
    # too few requests in a half to measure a 99% quantile: no headroom
    few = steady[: 2 * MIN_BACKTEST_REQUESTS - 2]
    assert backtested_planning_rate_per_s(few, prompts[: few.size], 4.0).headroom == 1.0
    assert backtest_headroom(0.0, 3.0) == 1.0
    assert backtest_headroom(2.0, 3.0) == 1.5


def test_the_operators_slot_backtest_matches_the_per_request_one_on_the_code_trace() -> None:
    arrival_s, prompts = _azure_code_trace()
    seen = arrival_s < arrival_s.max() / 2
    raised = backtested_planning_rate_per_s(arrival_s[seen], prompts[seen], 4.0)
    assert raised.window_rate_per_s == backlog_planning_rate_per_s(
        arrival_s[seen], prompts[seen], 4.0
    )
    assert raised.rate_per_s >= raised.window_rate_per_s
    counts, tokens = _per_slot(arrival_s[seen], prompts[seen], 0.25)
    slots = backtested_slot_planning_rate_per_s(counts, 0.25, 4.0, 0.99, tokens)
    assert slots.headroom == pytest.approx(raised.headroom, rel=0.05)
    assert slots.rate_per_s == pytest.approx(raised.rate_per_s, rel=0.05)
