"""The row simulation and the oversubscription experiment on a small, short scenario."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from voltpack.policies.schema import PowerSpec
from voltpack.sim.power_experiment import Limits, evaluate, longest_run
from voltpack.sim.power_row import RowScenario, build_workload, run_row
from voltpack.sim.traces.azure_llm import azure_llm_dir, load_azure_llm_trace

SCENARIO = RowScenario(
    servers=8, budget_servers=5, training_share=0.25, duration_s=1800, seed=3,
    mean_rate_per_s=0.8,
)  # fmt: skip


@pytest.fixture(scope="module")
def trace():  # type: ignore[no-untyped-def]
    return load_azure_llm_trace(azure_llm_dir() / "AzureLLMInferenceTrace_conv.csv")


def test_uncapped_row_overshoots_and_the_controller_keeps_it_under_budget(trace) -> None:  # type: ignore[no-untyped-def]
    workload = build_workload(SCENARIO, trace)
    uncapped = run_row(workload, None)
    assert uncapped.row_power_w.max() > uncapped.budget_w  # 8 servers on a budget for 5
    capped = run_row(workload, PowerSpec(policy="headroom"))
    over = capped.row_power_w > capped.budget_w
    assert longest_run(over) <= 3  # interval + actuation latency + telemetry delay
    assert capped.actions > 0
    assert capped.training_iterations < uncapped.training_iterations
    assert (capped.clock_mhz < 1410).any()


def test_runs_are_deterministic_in_the_seed(trace) -> None:  # type: ignore[no-untyped-def]
    short = replace(SCENARIO, duration_s=600)
    a = run_row(build_workload(short, trace), PowerSpec(policy="thresholds"))
    b = run_row(build_workload(short, trace), PowerSpec(policy="thresholds"))
    assert np.array_equal(a.row_power_w, b.row_power_w)
    assert np.array_equal(a.latency_s, b.latency_s)


def test_evaluate_reports_every_constraint(trace) -> None:  # type: ignore[no-untyped-def]
    roomy = replace(SCENARIO, servers=3, duration_s=600)  # at most 3 x 6.5 kW on 5 x 6.5 kW
    (outcome,) = evaluate(roomy, trace, {"headroom": PowerSpec()}, Limits())
    assert outcome.ok and outcome.actions == 0 and outcome.brakes == 0
    assert outcome.p50_increase_pct == pytest.approx(0.0)
    assert set(outcome.margins(Limits())) >= {"p50_pct", "p99_pct", "training_loss_pct"}


def test_longest_run() -> None:
    assert longest_run(np.array([False, True, True, False, True])) == 2
    assert longest_run(np.zeros(3, dtype=bool)) == 0
