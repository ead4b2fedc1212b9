"""Training model: iteration-boundary power drops, POLCA's 97 % anchor, clock-proportional loss."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voltpack.perf import (
    default_training_profile,
    power_model_for,
    training_power_w,
    training_progress,
)
from voltpack.perf.links import PerfModelError

PROFILE = default_training_profile()
A100 = power_model_for("A100-80GB")


def test_training_peaks_near_97_percent_of_provisioned() -> None:
    """POLCA: training peaks at ~97 % of provisioned power. Tolerance: 1 point."""
    power = training_power_w(600, 1410.0, 1.0, PROFILE, A100)
    assert power.max() / PROFILE.server.provisioned_w == pytest.approx(0.97, abs=0.01)


def test_iteration_boundaries_show_synchronised_drops_at_one_second() -> None:
    power = training_power_w(30, 1410.0, 1.0, PROFILE, A100)
    # 3 s iterations, 0.6 s of communication each: every third second dips by over 1 kW
    assert power.max() - power.min() > 1000.0
    low = power < power.max() - 500.0
    assert low.sum() == 10
    assert np.all(np.diff(np.flatnonzero(low)) == 3)


def test_mean_compute_time_share_matches_the_profile() -> None:
    power = training_power_w(3000, 1410.0, 1.0, PROFILE, A100)
    high = float(PROFILE.server.power_w(400.0, A100, PROFILE.non_gpu_load_coupling))
    communication_w = A100.power_w(PROFILE.communication_activity, 1410.0)
    low = float(PROFILE.server.power_w(communication_w, A100, PROFILE.non_gpu_load_coupling))
    compute_share = (power.mean() - low) / (high - low)
    assert compute_share == pytest.approx(PROFILE.compute_share, abs=0.01)


def test_progress_at_max_clock_is_one_iteration_per_iteration_time() -> None:
    progress = training_progress(np.full(300, 1410.0), 1.0, PROFILE, A100)
    assert progress.sum() == pytest.approx(300 / PROFILE.iteration_s)


@given(st.floats(A100.min_clock_mhz, A100.max_clock_mhz))
def test_fully_compute_bound_training_slows_in_proportion_to_clock(clock: float) -> None:
    bound = dataclasses.replace(PROFILE, compute_share=1.0, compute_bound_share=1.0)
    ratio = training_progress(clock, 1.0, bound, A100) / training_progress(1410.0, 1.0, bound, A100)
    assert ratio == pytest.approx(clock / 1410.0)


def test_default_training_loses_nearly_in_proportion_to_clock() -> None:
    ratio = float(
        training_progress(1100.0, 1.0, PROFILE, A100)
        / training_progress(1410.0, 1.0, PROFILE, A100)
    )
    clock_ratio = 1100.0 / 1410.0
    assert clock_ratio < ratio < 1.0
    assert 1.0 - ratio > 0.6 * (1.0 - clock_ratio)


@given(st.floats(A100.min_clock_mhz, A100.max_clock_mhz - 1.0))
def test_lower_clock_means_less_power_and_less_progress(clock: float) -> None:
    fast_w = training_power_w(300, 1410.0, 1.0, PROFILE, A100)
    slow_w = training_power_w(300, clock, 1.0, PROFILE, A100)
    assert slow_w.max() < fast_w.max()
    assert training_progress(clock, 1.0, PROFILE, A100) < training_progress(
        1410.0, 1.0, PROFILE, A100
    )


def test_power_cap_bounds_compute_phase_power_and_slows_progress() -> None:
    power = training_power_w(300, 1410.0, 1.0, PROFILE, A100, power_limit_w_per_bin=250.0)
    ceiling = float(PROFILE.server.power_w(250.0, A100, PROFILE.non_gpu_load_coupling))
    assert power.max() == pytest.approx(ceiling, rel=1e-6)
    capped = training_progress(1410.0, 1.0, PROFILE, A100, power_limit_w_per_bin=250.0)
    assert capped < training_progress(1410.0, 1.0, PROFILE, A100)


def test_servers_and_phases_as_arrays() -> None:
    clocks = np.stack([np.full(12, 1410.0), np.full(12, 1200.0)])
    power = training_power_w(12, clocks, 1.0, PROFILE, A100, start_phase=np.array([0.0, 0.5]))
    assert power.shape == (2, 12)
    single = training_power_w(12, clocks[1], 1.0, PROFILE, A100, start_phase=0.5)
    assert power[1] == pytest.approx(single)
    assert training_progress(clocks, 1.0, PROFILE, A100).shape == (2, 12)


def test_chunks_continue_where_the_previous_one_ended() -> None:
    clocks = np.where(np.arange(40) < 17, 1410.0, 1000.0)
    whole = training_power_w(40, clocks, 1.0, PROFILE, A100)
    done = float(training_progress(clocks[:17], 1.0, PROFILE, A100).sum())
    rest = training_power_w(23, clocks[17:], 1.0, PROFILE, A100, start_phase=done % 1.0)
    assert rest == pytest.approx(whole[17:])


def test_per_server_iteration_times_equal_to_the_profile_change_nothing() -> None:
    clocks = np.stack([np.full(50, 1410.0), np.full(50, 1100.0)])
    phases = np.array([0.1, 0.7])
    same = np.full(2, PROFILE.iteration_s)
    assert np.array_equal(
        training_power_w(50, clocks, 1.0, PROFILE, A100, start_phase=phases, iteration_s=same),
        training_power_w(50, clocks, 1.0, PROFILE, A100, start_phase=phases),
    )
    assert np.array_equal(
        training_progress(clocks, 1.0, PROFILE, A100, iteration_s=same),
        training_progress(clocks, 1.0, PROFILE, A100),
    )


def test_each_server_runs_its_own_iteration_time() -> None:
    clocks = np.full((2, 600), 1410.0)
    iteration_s = np.array([2.0, 5.0])
    progress = training_progress(clocks, 1.0, PROFILE, A100, iteration_s=iteration_s)
    assert progress.sum(axis=1) == pytest.approx([300.0, 120.0])
    power = training_power_w(600, clocks, 1.0, PROFILE, A100, iteration_s=iteration_s)
    for row, period_s in zip(power, (2.0, 5.0), strict=True):
        alone = training_power_w(
            600, 1410.0, 1.0, dataclasses.replace(PROFILE, iteration_s=period_s), A100
        )
        assert row == pytest.approx(alone)


@pytest.mark.parametrize("bad", [0.0, -3.0, float("nan"), float("inf")])
def test_a_non_positive_iteration_time_is_refused_by_name(bad: float) -> None:
    with pytest.raises(PerfModelError, match="iteration_s"):
        training_progress(1410.0, 1.0, PROFILE, A100, iteration_s=np.array([3.0, bad]))
