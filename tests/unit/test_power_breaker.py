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
