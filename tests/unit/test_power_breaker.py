"""The breaker trip curve the simulator reports against."""

from __future__ import annotations

import numpy as np
import pytest

from voltpack.model.errors import PowerConfigError
from voltpack.power.breaker import BreakerCurve


def test_inverse_time_curve() -> None:
    curve = BreakerCurve()
    assert curve.trip_time_s(1.0) == float("inf")
    assert curve.trip_time_s(2.0) == pytest.approx(120.0)
    assert curve.trip_time_s(1.35) == pytest.approx(437.7, rel=1e-3)
    assert curve.trip_time_s(5.0) == 0.0
    assert curve.trip_time_s(1.2) > curve.trip_time_s(1.5)


def test_a_series_trips_after_the_heat_it_accumulates() -> None:
    curve = BreakerCurve()
    steady = np.full(1000, 200.0)
    assert curve.first_trip_s(steady, 100.0, 1.0) == pytest.approx(119.0)
    brief = np.concatenate([np.full(10, 150.0), np.full(990, 90.0)])
    assert curve.first_trip_s(brief, 100.0, 1.0) == float("inf")
    assert curve.first_trip_s(np.array([600.0]), 100.0, 1.0) == 0.0


def test_bad_curves_are_refused() -> None:
    with pytest.raises(PowerConfigError, match="instantaneous_ratio"):
        BreakerCurve(instantaneous_ratio=0.5)


def test_heat_accumulates_above_the_rating_and_cools_below_it() -> None:
    curve = BreakerCurve()  # thermal constant 360 s, cooling time 600 s
    series = np.concatenate([np.full(10, 150.0), np.full(600, 90.0)])
    heat = curve.heat_s(series, 100.0, 1.0)
    assert heat[9] == pytest.approx(10 * (1.5**2 - 1.0))  # 12.5 overload-seconds
    assert heat[-1] == pytest.approx(12.5 * np.exp(-1.0))  # 600 s below rating: one e-fold
    assert curve.heat_peak_share(series, 100.0, 1.0) == pytest.approx(12.5 / 360.0)


def test_heat_peak_share_of_a_constant_overload() -> None:
    curve = BreakerCurve()
    steady = np.full(1000, 200.0)  # r = 2: 3 overload-seconds per second, trips after 120 s
    assert curve.heat_peak_share(steady[:60], 100.0, 1.0) == pytest.approx(0.5)
    assert curve.heat_peak_share(steady[:119], 100.0, 1.0) == pytest.approx(357.0 / 360.0)
    # The 120th second brings the heat to 360 overload-seconds: the breaker trips.
    assert curve.heat_peak_share(steady[:120], 100.0, 1.0) == 1.0
    assert curve.first_trip_s(steady[:120], 100.0, 1.0) == pytest.approx(119.0)
    assert curve.heat_peak_share(steady, 100.0, 1.0) == 1.0  # capped: no heat after a trip


def test_below_the_rating_nothing_accumulates() -> None:
    curve = BreakerCurve()
    below = np.concatenate([np.full(500, 99.0), np.full(500, 100.0)])  # at the rating: no heat
    assert not curve.heat_s(below, 100.0, 1.0).any()
    assert curve.heat_peak_share(below, 100.0, 1.0) == 0.0
    assert curve.heat_peak_share(np.zeros(0), 100.0, 1.0) == 0.0


def test_the_instantaneous_threshold_counts_as_a_trip() -> None:
    curve = BreakerCurve()
    spike = np.concatenate([np.full(5, 50.0), [500.0], np.full(5, 50.0)])
    assert curve.first_trip_s(spike, 100.0, 1.0) == pytest.approx(5.0)
    assert curve.heat_peak_share(spike, 100.0, 1.0) == 1.0


def test_a_budget_of_zero_is_refused() -> None:
    with pytest.raises(PowerConfigError, match="budget_w"):
        BreakerCurve().heat_peak_share(np.ones(3), 0.0, 1.0)
