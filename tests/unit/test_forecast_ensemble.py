"""The `ensemble` model on synthetic seasonal series: it recovers the pattern, its re-calibrated
intervals cover about their nominal share, and bad histories never give NaN."""

from __future__ import annotations

import numpy as np
import pytest

from voltpack.forecast.backtest import backtest, summarise
from voltpack.forecast.registry import make_forecaster
from voltpack.forecast.series import TimeSeries
from voltpack.model.errors import ForecastError

from .synthetic_series import (
    SEASON,
    noisy,
    pattern,
    safe_forecasts_of_bad_histories,
)

QUANTILES = (0.01, 0.1, 0.5, 0.9, 0.99)
SMALL = {
    "max_horizon": SEASON,
    "gbm": {"rows": 20_000, "calibration_rows": 20_000, "n_estimators": 60},
}


def test_ensemble_recovers_the_seasonal_pattern() -> None:
    series = noisy(1)
    model = make_forecaster("ensemble", **SMALL)
    model.fit(series)
    forecast = model.predict(SEASON, QUANTILES)
    truth = pattern(len(series) + SEASON, phase=1)[len(series) :]
    assert np.abs(forecast.quantile(0.5) - truth).mean() < 2.0
    assert forecast.start_s == series.time_s(len(series))
    assert forecast.model == "ensemble"
    # noise sd 2: the 80% interval is about 2 x 1.28 x 2 wide, not degenerate or huge
    width = forecast.quantile(0.9) - forecast.quantile(0.1)
    assert 3.0 < width.mean() < 9.0


def test_ensemble_intervals_cover_near_nominal_on_synthetic_noise() -> None:
    histories = [noisy(seed, length=24 * 30) for seed in range(8)]
    metrics = backtest(
        lambda: make_forecaster("ensemble", **SMALL), histories, [12], windows=4, min_train=480
    )
    summary = summarise(metrics)
    # 8 series x 4 windows x 12 steps = 384 checks per level
    assert abs(summary["coverage_80"] - 0.80) < 0.08
    assert abs(summary["coverage_98"] - 0.98) < 0.03


@pytest.mark.parametrize("length", [60, 72, 100])
def test_a_short_seasonal_history_keeps_its_season_when_re_calibrated(length: int) -> None:
    """The walk's head keeps two seasons, so ETS still fits the season on a short history
    (with half of 72 samples it lost it and the median missed the pattern by ~9)."""
    series = noisy(3, length=length)
    model = make_forecaster("ensemble", **SMALL)
    model.fit(series)
    forecast = model.predict(SEASON, QUANTILES)
    truth = pattern(length + SEASON, phase=3)[length:]
    assert np.abs(forecast.quantile(0.5) - truth).mean() < 4.0


def test_ensemble_never_nan_on_bad_histories() -> None:
    model = make_forecaster("ensemble", **SMALL)
    forecasts = safe_forecasts_of_bad_histories(model, 20, QUANTILES)
    gappy_notes, short_notes, flat_notes, _ = (f.notes for f in forecasts)
    assert any("filled" in note for note in gappy_notes)
    assert any("not re-calibrated" in note for note in short_notes)
    assert "constant history" in flat_notes
    np.testing.assert_array_equal(forecasts[2].values, 3.0)


def test_ensemble_rejects_negative_values_and_predict_before_fit() -> None:
    model = make_forecaster("ensemble", **SMALL)
    with pytest.raises(ForecastError, match="before fit"):
        model.predict(3, QUANTILES)
    values = noisy(7).values.copy()
    values[100] = -5.0
    with pytest.raises(ForecastError, match="negative value"):
        model.fit(TimeSeries("neg", "power", 3600.0, 0.0, values, "watts", (SEASON,)))
