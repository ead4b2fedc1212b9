"""Training jobs in the row: per-job iteration times that drift in phase, several jobs per row."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from voltpack.model import InvalidRequestError
from voltpack.policies.schema import PowerSpec
from voltpack.sim.power_calibration import TRAINING_ROW_PEAK_SHARE, row_peak_share
from voltpack.sim.power_row import RowScenario, build_workload, run_row, run_stepped, run_uncapped
from voltpack.sim.traces.azure_llm import LlmRequests, azure_llm_dir, load_azure_llm_trace

TRAINING_ROW = RowScenario(
    servers=16, budget_servers=16, training_share=1.0, servers_per_training_job=8,
    duration_s=86_400, seed=0,
)  # fmt: skip


@pytest.fixture(scope="module")
def trace() -> LlmRequests:
    return load_azure_llm_trace(azure_llm_dir() / "AzureLLMInferenceTrace_conv.csv")


def _peak_share(
    scenario: RowScenario, trace: LlmRequests, phase: float, iteration_s: float
) -> float:
    """Peak second / provisioned power of two 8-server jobs: the first at phase 0 and 3 s,
    the second at `phase` and `iteration_s`."""
    workload = build_workload(scenario, trace)
    workload = replace(
        workload,
        training_phase=np.repeat([0.0, phase], 8),
        training_iteration_s=np.repeat([3.0, iteration_s], 8),
    )
    power_w = run_uncapped(workload).row_power_w
    return float(power_w.max() / (16 * workload.training_profile.server.provisioned_w))


def test_jobs_with_different_iteration_times_drift_into_a_common_compute_second(
    trace: LlmRequests,
) -> None:
    """Half an iteration apart with equal 3 s iterations, the two jobs' compute phases never
    cover the same whole second, all day; a second job at 3.7 s drifts through every
    offset, so some second has both computing: the row peaks as if it were one job."""
    one_job = _peak_share(TRAINING_ROW, trace, 0.0, 3.0)
    assert one_job == pytest.approx(0.97, abs=0.005)
    locked = _peak_share(TRAINING_ROW, trace, 0.5, 3.0)
    drifting = _peak_share(TRAINING_ROW, trace, 0.5, 3.7)
    assert locked < one_job - 0.015  # 0.949 vs 0.970
    assert drifting == pytest.approx(one_job, abs=0.002)


def test_each_job_draws_its_own_iteration_time_from_the_range(trace: LlmRequests) -> None:
    row = replace(TRAINING_ROW, servers=40, budget_servers=40, duration_s=60)
    workload = build_workload(row, trace)
    per_job = workload.training_iteration_s.reshape(5, 8)
    assert np.all(per_job == per_job[:, :1])  # the servers of a job move in lockstep
    assert np.unique(per_job[:, 0]).size == 5
    assert np.all((per_job >= 2.0) & (per_job <= 5.0))
    again = build_workload(row, trace)
    assert np.array_equal(again.training_iteration_s, workload.training_iteration_s)
    other_seed = build_workload(replace(row, seed=1), trace)
    assert not np.array_equal(other_seed.training_iteration_s, workload.training_iteration_s)


def test_iteration_times_are_drawn_last_so_streams_and_phases_stay(trace: LlmRequests) -> None:
    mixed = RowScenario(servers=12, training_share=0.5, servers_per_training_job=3, duration_s=600)
    drifting = build_workload(mixed, trace)
    locked = build_workload(replace(mixed, training_iteration_s_range=(3.0, 3.0)), trace)
    assert np.all(locked.training_iteration_s == 3.0)
    assert np.array_equal(locked.training_phase, drifting.training_phase)
    for a, b in zip(locked.inference, drifting.inference, strict=True):
        assert np.array_equal(a.arrival_s, b.arrival_s)


@pytest.mark.parametrize("bad", [(0.0, 3.0), (5.0, 2.0), (-1.0, 2.0), (2.0, float("inf"))])
def test_a_bad_iteration_range_is_refused_by_name(
    trace: LlmRequests, bad: tuple[float, float]
) -> None:
    with pytest.raises(InvalidRequestError, match="training_iteration_s_range"):
        build_workload(replace(TRAINING_ROW, training_iteration_s_range=bad), trace)


def test_a_row_with_several_jobs_runs_stepped_as_in_one_pass_and_under_a_policy(
    trace: LlmRequests,
) -> None:
    """Ten training servers in jobs of 4 (4, 4 and 2) beside ten inference servers."""
    row = RowScenario(
        servers=20, budget_servers=14, training_share=0.5, servers_per_training_job=4,
        duration_s=900, seed=2, mean_rate_per_s=0.8,
    )  # fmt: skip
    workload = build_workload(row, trace)
    assert workload.n_training == 10
    assert np.unique(workload.training_iteration_s).size == 3
    stepped, vectorised = run_stepped(workload, None), run_uncapped(workload)
    assert vectorised.row_power_w == pytest.approx(stepped.row_power_w, rel=1e-9)
    assert vectorised.training_iterations == pytest.approx(stepped.training_iterations)
    expected = float(np.sum(900.0 / workload.training_iteration_s))
    assert vectorised.training_iterations == pytest.approx(expected)
    capped = run_row(workload, PowerSpec(policy="headroom"))
    assert 0 < capped.training_iterations < vectorised.training_iterations


def test_five_drifting_jobs_reach_polca_training_anchor_within_a_day(trace: LlmRequests) -> None:
    """A training row of 40 in five 8-server jobs: with iteration times from the default range
    some second has all five computing, as one job over the row does (0.970); with identical
    3 s iterations the same seed's phases never line up (0.928, the model before)."""
    row = replace(TRAINING_ROW, servers=40, budget_servers=40)
    drifting = row_peak_share(row, trace)
    one_job = row_peak_share(replace(row, servers_per_training_job=40), trace)
    locked = row_peak_share(replace(row, training_iteration_s_range=(3.0, 3.0)), trace)
    assert drifting == pytest.approx(TRAINING_ROW_PEAK_SHARE, abs=0.005)
    assert drifting == pytest.approx(one_job, abs=0.002)
    assert locked < one_job - 0.03
