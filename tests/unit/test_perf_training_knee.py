"""Training under a per-GPU power cap: slowdown, energy per iteration, the efficiency knee."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voltpack.perf import default_training_profile, power_model_for, training_progress
from voltpack.perf.links import PerfModelError
from voltpack.perf.training import (
    KNEE_SEARCH_RESOLUTION_W,
    energy_per_iteration_j,
    iteration_slowdown,
    knee_power_limit_w,
)

PROFILE = default_training_profile()
A100 = power_model_for("A100-80GB")


def test_uncapped_and_a_cap_at_tdp_neither_slow_nor_save() -> None:
    assert iteration_slowdown(PROFILE, A100, None) == 0.0
    assert iteration_slowdown(PROFILE, A100, A100.tdp_w) == pytest.approx(0.0, abs=1e-12)
    assert energy_per_iteration_j(PROFILE, A100, A100.tdp_w) == pytest.approx(
        energy_per_iteration_j(PROFILE, A100, None)
    )


def test_uncapped_energy_is_phase_power_times_phase_time() -> None:
    coupling = PROFILE.non_gpu_load_coupling
    compute_w = float(PROFILE.server.power_w(A100.tdp_w, A100, coupling))
    communication_gpu_w = A100.power_w(PROFILE.communication_activity, A100.max_clock_mhz)
    communication_w = float(PROFILE.server.power_w(communication_gpu_w, A100, coupling))
    compute_s = PROFILE.iteration_s * PROFILE.compute_share
    expected = compute_w * compute_s + communication_w * (PROFILE.iteration_s - compute_s)
    assert energy_per_iteration_j(PROFILE, A100, None) == pytest.approx(expected)
    gpus = 8 * (A100.tdp_w * compute_s + float(communication_gpu_w) * (3.0 - compute_s))
    assert energy_per_iteration_j(PROFILE, A100, None, whole_server=False) == pytest.approx(gpus)


def test_slowdown_agrees_with_the_progress_the_row_simulator_uses() -> None:
    capped = training_progress(A100.max_clock_mhz, 1.0, PROFILE, A100, 300.0)
    free = training_progress(A100.max_clock_mhz, 1.0, PROFILE, A100)
    assert float(free / capped) - 1.0 == pytest.approx(iteration_slowdown(PROFILE, A100, 300.0))


@given(st.floats(150.0, 399.0))
def test_a_lower_cap_slows_the_iteration_and_spends_less_gpu_energy(limit_w: float) -> None:
    assert iteration_slowdown(PROFILE, A100, limit_w) > iteration_slowdown(
        PROFILE, A100, limit_w + 1.0
    )
    assert energy_per_iteration_j(PROFILE, A100, limit_w, whole_server=False) < (
        energy_per_iteration_j(PROFILE, A100, limit_w + 1.0, whole_server=False)
    )


@pytest.mark.parametrize("max_slowdown", [0.005, 0.02, 0.05, 0.2])
def test_the_knee_is_the_lowest_cap_within_the_allowed_slowdown(max_slowdown: float) -> None:
    knee_w = knee_power_limit_w(PROFILE, A100, max_slowdown)
    assert A100.idle_w < knee_w < A100.tdp_w
    assert iteration_slowdown(PROFILE, A100, knee_w) <= max_slowdown
    below_w = knee_w - 2 * KNEE_SEARCH_RESOLUTION_W
    assert iteration_slowdown(PROFILE, A100, below_w) > max_slowdown


def test_no_slowdown_allowed_means_no_cap_below_tdp() -> None:
    assert knee_power_limit_w(PROFILE, A100, 0.0) == pytest.approx(
        A100.tdp_w, abs=KNEE_SEARCH_RESOLUTION_W
    )


def test_work_that_ignores_the_clock_is_capped_down_to_the_min_clock() -> None:
    clock_free = dataclasses.replace(PROFILE, compute_bound_share=0.0)
    assert knee_power_limit_w(clock_free, A100, 0.0) == pytest.approx(
        float(A100.power_w(A100.sustained_tdp_activity, A100.min_clock_mhz))
    )


@pytest.mark.parametrize("bad", [-0.01, float("nan"), float("inf")])
def test_a_bad_slowdown_is_refused_by_name(bad: float) -> None:
    with pytest.raises(PerfModelError, match="max_slowdown"):
        knee_power_limit_w(PROFILE, A100, bad)
