"""What every row outcome reports: low-priority latency goals, the breaker's margin, the 60-s
peak, and energy per completed request and per training iteration (issue 35, item 4)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from voltpack.model.errors import InvalidRequestError
from voltpack.policies.schema import PowerSpec
from voltpack.sim.power_experiment import (
    Limits,
    RowOutcome,
    compare,
    energy_split,
    evaluate,
    window_peak_w,
)
from voltpack.sim.power_row import RowRun, RowScenario, RowWorkload, build_workload
from voltpack.sim.traces.azure_llm import azure_llm_dir, load_azure_llm_trace

# 4 servers: 1 training (share 0.25), 3 inference of which round(0.9) = 1 low priority.
SMALL = RowScenario(
    servers=4, budget_servers=5, training_share=0.25, duration_s=300, seed=3, mean_rate_per_s=0.8
)
BUDGET_W = 100.0


@pytest.fixture(scope="module")
def trace():  # type: ignore[no-untyped-def]
    return load_azure_llm_trace(azure_llm_dir() / "AzureLLMInferenceTrace_conv.csv")


@pytest.fixture(scope="module")
def workload(trace) -> RowWorkload:  # type: ignore[no-untyped-def]
    built = build_workload(SMALL, trace)
    assert (built.n_inference, built.n_high, built.n_training) == (3, 2, 1)
    return built


def _high_arrival_s(workload: RowWorkload) -> np.ndarray:
    return np.concatenate([s.arrival_s for s in workload.inference[: workload.n_high]])


def _run(
    workload: RowWorkload,
    *,
    power_w: np.ndarray | None = None,
    latency_s: np.ndarray | None = None,
    low_latency_s: np.ndarray | None = None,
    server_energy_j: np.ndarray | None = None,
    low_completed: int = 5,
    training_iterations: float = 4.0,
) -> RowRun:
    duration, servers = SMALL.duration_s, SMALL.servers
    return RowRun(
        row_power_w=np.full(duration, 0.9 * BUDGET_W) if power_w is None else power_w,
        budget_w=BUDGET_W,
        clock_mhz=np.full((servers, duration), 1410.0),
        power_limit_w=np.full((servers, duration), np.nan),
        actions=0,
        brakes=0,
        latency_s=np.ones(_high_arrival_s(workload).size) if latency_s is None else latency_s,
        low_latency_s=np.ones(100) if low_latency_s is None else low_latency_s,
        low_completed=low_completed,
        training_iterations=training_iterations,
        server_energy_j=np.array([3600.0, 7200.0, 10800.0, 36000.0])
        if server_energy_j is None
        else server_energy_j,
    )


def _compare(run: RowRun, baseline: RowRun, workload: RowWorkload, limits: Limits) -> RowOutcome:
    return compare(run, baseline, workload, "test", 3, limits)


def test_energy_split_by_role_per_request_completed_within_the_run(
    workload: RowWorkload,
) -> None:
    arrival_s = _high_arrival_s(workload)
    # Requests arriving in the first 100 s finish in 1 s; the others after the run.
    latency_s = np.where(arrival_s < 100.0, 1.0, 1e6)
    early = int((arrival_s < 100.0).sum())
    assert 0 < early < arrival_s.size
    split = energy_split(_run(workload, latency_s=latency_s), workload)
    assert split.inference_j == pytest.approx(21_600.0)  # 1 + 2 + 3 Wh on inference servers
    assert split.training_j == pytest.approx(36_000.0)  # 10 Wh on the training server
    assert split.requests_completed == early + 5  # high done in time + low_completed
    assert split.per_request_wh == pytest.approx(6.0 / (early + 5))
    assert split.per_iteration_wh == pytest.approx(10.0 / 4.0)
    none = energy_split(
        _run(workload, latency_s=np.full(arrival_s.size, 1e6), low_completed=0,
             training_iterations=0.0),
        workload,
    )  # fmt: skip
    assert none.per_request_wh is None and none.per_iteration_wh is None


def test_energy_split_refuses_a_run_without_per_server_energy(workload: RowWorkload) -> None:
    with pytest.raises(InvalidRequestError, match="server_energy_j"):
        energy_split(_run(workload, server_energy_j=np.zeros(0)), workload)
    with pytest.raises(InvalidRequestError, match="latency_s"):
        energy_split(_run(workload, latency_s=np.ones(3)), workload)


def test_low_priority_latency_goals_are_reported_and_required_only_when_set(
    workload: RowWorkload,
) -> None:
    baseline = _run(workload)
    polca = Limits()
    assert (polca.low_p50_increase_pct, polca.low_p99_increase_pct) == (None, None)
    limits = replace(polca, low_p50_increase_pct=25.0, low_p99_increase_pct=50.0)
    # The slowest 2% of low-priority requests take 3x: p50 unchanged, p99 +200%.
    tail = _run(workload, low_latency_s=np.where(np.arange(100) >= 98, 3.0, 1.0))
    outcome = _compare(tail, baseline, workload, limits)
    assert outcome.low_p50_increase_pct == pytest.approx(0.0)
    assert outcome.low_p99_increase_pct > 50.0
    assert not outcome.ok
    assert outcome.margins(limits)["low_p99_pct"] < 0
    assert _compare(tail, baseline, workload, polca).ok  # POLCA's constraints: reported only
    assert "low_p99_pct" not in _compare(tail, baseline, workload, polca).margins(polca)
    assert _compare(tail, baseline, workload, replace(limits, low_p99_increase_pct=1e9)).ok
    # Every low-priority request 30% slower: p50 breaks its 25% goal, p99 keeps its 50%.
    slower = _compare(_run(workload, low_latency_s=np.full(100, 1.3)), baseline, workload, limits)
    assert slower.low_p50_increase_pct == pytest.approx(30.0)
    assert slower.low_p99_increase_pct == pytest.approx(30.0)
    assert not slower.ok
    margins = slower.margins(limits)
    assert margins["low_p50_pct"] == pytest.approx(-5.0)
    assert margins["low_p99_pct"] == pytest.approx(20.0)
    assert _compare(baseline, baseline, workload, limits).ok


def test_breaker_margin_and_the_60s_peak(workload: RowWorkload) -> None:
    # 10 s at 1.5x the budget, then 0.9x: 12.5 overload-seconds of the 360 that trip.
    power_w = np.full(SMALL.duration_s, 0.9 * BUDGET_W)
    power_w[:10] = 1.5 * BUDGET_W
    outcome = _compare(_run(workload, power_w=power_w), _run(workload), workload, Limits())
    assert outcome.breaker_heat_peak_share == pytest.approx(12.5 / 360.0)
    assert outcome.breaker_margin_share == pytest.approx(1.0 - 12.5 / 360.0)
    assert not outcome.breaker_tripped
    assert outcome.peak_share_of_budget == pytest.approx(1.5)
    # The first 60-s window averages (10 x 150 + 50 x 90) / 60 = 100 W: the budget.
    assert outcome.peak_60s_share_of_budget == pytest.approx(1.0)
    assert outcome.seconds_over_budget == 10 and outcome.longest_excursion_s == 10
    assert outcome.margins(Limits())["breaker_margin_share"] == pytest.approx(1 - 12.5 / 360)
    # 2x the budget for 200 s trips the breaker (after 120 s): no margin left.
    power_w[:200] = 2.0 * BUDGET_W
    tripped = _compare(_run(workload, power_w=power_w), _run(workload), workload, Limits())
    assert tripped.breaker_tripped and tripped.breaker_heat_peak_share == 1.0
    assert tripped.breaker_margin_share == 0.0 and not tripped.ok


def test_window_peak() -> None:
    series = np.concatenate([np.full(60, 1.0), np.full(60, 3.0), np.full(30, 100.0)])
    assert window_peak_w(series, 60) == pytest.approx(3.0)  # the partial last window is left out
    assert window_peak_w(series, 1) == pytest.approx(100.0)
    assert window_peak_w(np.array([2.0, 4.0]), 60) == pytest.approx(3.0)
    with pytest.raises(InvalidRequestError, match="window_s"):
        window_peak_w(series, 0)


def test_evaluate_reports_safety_and_energy(trace) -> None:  # type: ignore[no-untyped-def]
    scenario = RowScenario(
        servers=8, budget_servers=5, training_share=0.25, duration_s=600, seed=3,
        mean_rate_per_s=0.8,
    )  # fmt: skip
    (outcome,) = evaluate(scenario, trace, {"headroom": PowerSpec()}, Limits())
    assert outcome.inference_energy_kwh + outcome.training_energy_kwh == pytest.approx(
        outcome.energy_kwh
    )
    assert outcome.training_energy_kwh > 0 and outcome.requests_completed > 0
    assert outcome.energy_per_request_wh is not None and outcome.energy_per_request_wh > 0
    assert outcome.energy_per_iteration_wh is not None and outcome.energy_per_iteration_wh > 0
    assert 0.0 <= outcome.breaker_heat_peak_share <= 1.0
    assert outcome.peak_60s_share_of_budget <= outcome.peak_share_of_budget
    as_dict = outcome.as_dict()
    assert {"low_p99_increase_pct", "breaker_margin_share", "energy_per_request_wh"} <= set(as_dict)
