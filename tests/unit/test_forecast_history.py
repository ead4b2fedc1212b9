"""Bad histories: gaps, negatives, constant, too short, all-NaN, inf (issue 9's acceptance)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voltpack.forecast.history import clean_history, finalize_quantiles
from voltpack.forecast.registry import make_forecaster
from voltpack.forecast.series import TimeSeries
from voltpack.model.errors import ForecastError

QUANTILES = (0.01, 0.1, 0.5, 0.9, 0.99)
# small, fast settings so the global model trains in a fraction of a second
FAST = {
    "seasonal_naive": {},
    "ets": {},
    "global_gbm": {"rows": 3000, "calibration_rows": 2000, "n_estimators": 15, "min_samples": 60},
}


def make_series(values: list[float] | np.ndarray, seasons: tuple[int, ...] = (24,)) -> TimeSeries:
    return TimeSeries("test/s", "power", 60.0, 0.0, np.asarray(values, float), "watts", seasons)


def seasonal(length: int, season: int = 24) -> np.ndarray:
    return 10.0 + 5.0 * np.sin(2 * np.pi * np.arange(length) / season)


def test_interior_gap_filled_seasonally() -> None:
    values = seasonal(24 * 5)
    holed = values.copy()
    holed[60:66] = np.nan
    clean = clean_history(make_series(holed))
    np.testing.assert_allclose(clean.values[60:66], values[60:66], atol=1e-9)
    assert any("6 missing samples filled" in n for n in clean.notes)


def test_gap_without_a_season_before_it_is_interpolated_linearly() -> None:
    clean = clean_history(make_series([1.0, np.nan, np.nan, 4.0], seasons=()))
    np.testing.assert_allclose(clean.values, [1.0, 2.0, 3.0, 4.0])


def test_trailing_gap_repeats_the_last_value_without_a_season() -> None:
    clean = clean_history(make_series([1.0, 2.0, np.nan], seasons=()))
    np.testing.assert_allclose(clean.values, [1.0, 2.0, 2.0])


def test_gap_longer_than_the_limit_names_its_start() -> None:
    values = seasonal(200)
    values[100:130] = np.nan
    with pytest.raises(ForecastError, match=r"30 missing samples in a row from index 100"):
        clean_history(make_series(values))


def test_leading_missing_samples_are_dropped_and_start_moves() -> None:
    clean = clean_history(make_series([np.nan, np.nan, 3.0, 4.0, 5.0], seasons=()))
    assert clean.series.start_s == 120.0
    np.testing.assert_allclose(clean.values, [3.0, 4.0, 5.0])


def test_negative_value_names_series_and_first_bad_index() -> None:
    values = seasonal(50)
    values[[17, 30]] = -2.0
    with pytest.raises(ForecastError, match=r"series test/s: negative value -2 at index 17"):
        clean_history(make_series(values))


def test_negative_values_allowed_when_series_is_not_nonnegative() -> None:
    series = TimeSeries("t", "power", 60.0, 0.0, np.array([-1.0, 2.0, -3.0]), "w", (), False)
    assert clean_history(series).values.min() == -3.0


@pytest.mark.parametrize("values", [[], [1.0], [np.nan] * 50, [np.inf, 1.0, np.nan]])
def test_fewer_than_two_finite_samples_is_an_error(values: list[float]) -> None:
    with pytest.raises(ForecastError, match="a forecast needs at least 2"):
        clean_history(make_series(values, seasons=()))


def test_infinite_values_are_treated_as_missing() -> None:
    clean = clean_history(make_series([1.0, np.inf, 3.0], seasons=()))
    np.testing.assert_allclose(clean.values, [1.0, 2.0, 3.0])
    assert "1 infinite values treated as missing" in clean.notes


@pytest.mark.parametrize("name", sorted(FAST))
def test_constant_history_gives_that_value_with_zero_width(name: str) -> None:
    model = make_forecaster(name, **FAST[name])
    model.fit(make_series([7.0] * 300))
    forecast = model.predict(5, QUANTILES)
    np.testing.assert_array_equal(forecast.values, np.full((5, 5), 7.0))
    assert "constant history" in forecast.notes


@pytest.mark.parametrize("name", sorted(FAST))
def test_history_shorter_than_a_season_falls_back_to_naive(name: str) -> None:
    model = make_forecaster(name, **FAST[name])
    model.fit(make_series([3.0, 5.0, 4.0, 6.0, 5.0]))
    forecast = model.predict(3, QUANTILES)
    assert np.isfinite(forecast.values).all()
    assert any("fallback" in note for note in forecast.notes)
    # naive: last value 5 plus the median one-step change of the history (2, -1, 2, -1)
    assert forecast.quantile(0.5)[0] == pytest.approx(5.5)


def test_finalize_sorts_quantiles_and_clips_at_zero() -> None:
    table = np.array([[2.0, -1.0, 3.0]])
    np.testing.assert_array_equal(finalize_quantiles("s", table, True), [[0.0, 2.0, 3.0]])
    with pytest.raises(ForecastError, match="non-finite"):
        finalize_quantiles("s", np.array([[np.nan, 1.0]]), True)


bad_value = st.sampled_from([float("nan"), float("inf"), float("-inf"), -1.0])


@st.composite
def histories(draw: st.DrawFn) -> list[float]:
    """Mostly valid nonnegative samples, with a few missing, infinite or negative ones."""
    values = draw(st.lists(st.floats(min_value=0.0, max_value=1e4), min_size=0, max_size=150))
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        if values:
            index = draw(st.integers(min_value=0, max_value=len(values) - 1))
            values[index] = draw(bad_value)
    trailing = draw(st.integers(min_value=0, max_value=3))  # a gap at the end
    return values[: len(values) - trailing] + [float("nan")] * min(trailing, len(values))


@pytest.mark.parametrize("name", sorted(FAST))
@given(values=histories(), seasons=st.sampled_from([(), (4,), (24,)]))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_history_gives_a_clear_error_or_a_safe_forecast(
    name: str, values: list[float], seasons: tuple[int, ...]
) -> None:
    model = make_forecaster(name, **FAST[name])
    try:
        model.fit(make_series(values, seasons))
    except ForecastError as error:
        assert "series test/s" in str(error)
        return
    forecast = model.predict(6, QUANTILES)
    assert forecast.values.shape == (6, 5)
    assert np.isfinite(forecast.values).all()
    assert (forecast.values >= 0).all()
    assert (np.diff(forecast.values, axis=1) >= 0).all()
