"""Calibrating the row to POLCA's row-level peaks, and the vectorised uncapped run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from voltpack.model import InvalidRequestError
from voltpack.sim.power_calibration import (
    INFERENCE_ROW_PEAK_SHARE,
    PEAK_SHARE_TOLERANCE,
    RATE_RESOLUTION,
    TRAINING_ROW_PEAK_SHARE,
    calibrate_rate_per_s,
    row_peak_share,
)
from voltpack.sim.power_row import RowScenario, build_workload, run_stepped, run_uncapped
from voltpack.sim.traces.azure_llm import LlmRequests, azure_llm_dir, load_azure_llm_trace

SMALL_ROW = RowScenario(servers=10, budget_servers=10, duration_s=7200, seed=4)


@pytest.fixture(scope="module")
def trace() -> LlmRequests:
    return load_azure_llm_trace(azure_llm_dir() / "AzureLLMInferenceTrace_conv.csv")


def test_calibrated_rate_puts_the_inference_row_peak_on_polca_anchor(trace: LlmRequests) -> None:
    calibration = calibrate_rate_per_s(SMALL_ROW, trace)
    # in a row of 10 the peak moves in steps of up to ~3 points (one server's prefill second);
    # either the anchor is met or the bisection has closed in on the step that straddles it
    share = calibration.peak_share
    if abs(share - INFERENCE_ROW_PEAK_SHARE) > PEAK_SHARE_TOLERANCE:
        assert abs(share - INFERENCE_ROW_PEAK_SHARE) <= 0.03
        other_side = [
            rate
            for rate, s in calibration.evaluations
            if (s - INFERENCE_ROW_PEAK_SHARE) * (share - INFERENCE_ROW_PEAK_SHARE) < 0
        ]
        gap = min(abs(rate - calibration.rate_per_s) for rate in other_side)
        assert gap <= 2 * RATE_RESOLUTION * calibration.rate_per_s
    check = replace(SMALL_ROW, training_share=0.0, mean_rate_per_s=calibration.rate_per_s)
    assert row_peak_share(check, trace) == pytest.approx(calibration.peak_share)
    # the row's peak grows with the load: every rate tried below lies below the anchor
    for rate, share in calibration.evaluations:
        if rate < calibration.rate_per_s * 0.5:
            assert share < INFERENCE_ROW_PEAK_SHARE


def test_an_unreachable_anchor_fails_loudly(trace: LlmRequests) -> None:
    with pytest.raises(InvalidRequestError, match="target_share"):
        calibrate_rate_per_s(replace(SMALL_ROW, duration_s=600), trace, target_share=1.2)


def test_a_training_row_peaks_at_polca_training_anchor(trace: LlmRequests) -> None:
    """One synchronous job over the row: the compute phase holds the GPUs at TDP."""
    row = replace(SMALL_ROW, training_share=1.0, servers_per_training_job=10, duration_s=600)
    assert row_peak_share(row, trace) == pytest.approx(TRAINING_ROW_PEAK_SHARE, abs=0.005)


def test_uncapped_run_in_one_pass_equals_the_stepped_run(trace: LlmRequests) -> None:
    workload = build_workload(
        replace(SMALL_ROW, servers=12, training_share=0.25, duration_s=900), trace
    )
    stepped, vectorised = run_stepped(workload, None), run_uncapped(workload)
    assert vectorised.row_power_w == pytest.approx(stepped.row_power_w, rel=1e-9)
    assert np.array_equal(vectorised.latency_s, stepped.latency_s)
    assert np.array_equal(vectorised.low_latency_s, stepped.low_latency_s)
    assert vectorised.low_completed == stepped.low_completed
    assert vectorised.training_iterations == pytest.approx(stepped.training_iterations)


def test_a_coarser_resolution_averages_the_peak_down(trace: LlmRequests) -> None:
    row = replace(SMALL_ROW, training_share=0.0, duration_s=1800, mean_rate_per_s=0.4)
    second, minute = row_peak_share(row, trace), row_peak_share(row, trace, resolution_s=60)
    assert minute < second
    with pytest.raises(InvalidRequestError, match="resolution_s"):
        row_peak_share(row, trace, resolution_s=0)
