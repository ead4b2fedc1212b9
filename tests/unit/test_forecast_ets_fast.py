"""The ETS forecast computed from the fitted states equals statsmodels' own prediction."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm
from statsmodels.tsa.exponential_smoothing.ets import ETSModel

from voltpack.forecast.models.ets import ExponentialSmoothing
from voltpack.forecast.series import TimeSeries

LEVELS = (0.1, 0.5, 0.9, 0.99)


def _statsmodels_quantiles(values: np.ndarray, season: int, horizon: int) -> np.ndarray:
    """The forecast as ets.py made it before: statsmodels' results and get_prediction."""
    config: dict[str, object] = {"error": "add", "initialization_method": "heuristic"}
    if season:
        config.update(seasonal="add", seasonal_periods=season)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = ETSModel(pd.Series(values), **config).fit(disp=False)
        nobs = int(results.nobs)
        prediction = results.get_prediction(start=nobs, end=nobs + horizon - 1)
        mean = np.asarray(prediction.predicted_mean)
        std = np.sqrt(np.maximum(np.asarray(prediction.forecast_variance), 0.0))

    return mean[:, None] + std[:, None] * norm.ppf(np.asarray(LEVELS))[None, :]


def _series(seed: int, season: int, size: int) -> TimeSeries:
    rng = np.random.default_rng(seed)
    t = np.arange(size)
    values = 250_000 + rng.normal(0, 5_000, size).cumsum() / 10 + rng.normal(0, 3_000, size)
    if season:
        values += 50_000 * np.sin(2 * np.pi * t / season)
    return TimeSeries(
        name="power/r", family="power", step_s=60.0, start_s=0.0, values=values,
        unit="watts", seasons=(season,) if season else (),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("seed", "season", "size", "horizon"),
    [(0, 24, 500, 60), (1, 144, 400, 300), (2, 0, 300, 30), (3, 1440, 4032, 60)],
)
def test_fast_ets_quantiles_equal_statsmodels_prediction(
    seed: int, season: int, size: int, horizon: int
) -> None:
    series = _series(seed, season, size)
    model = ExponentialSmoothing()
    model.fit(series)
    fast = model.predict(horizon, LEVELS).values
    expected = _statsmodels_quantiles(series.values, season, horizon)
    np.testing.assert_allclose(fast, np.maximum(expected, 0.0), rtol=1e-9, atol=1e-6)


def test_fast_ets_update_equals_a_smoother_run_over_the_longer_history() -> None:
    series = _series(4, 24, 500)
    model = ExponentialSmoothing()
    model.fit(series)
    extra = _series(5, 24, 524).values[500:]
    model.update(extra)
    updated = model.predict(48, LEVELS).values
    config = {"error": "add", "initialization_method": "heuristic", "seasonal": "add",
              "seasonal_periods": 24}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = ETSModel(pd.Series(series.values), **config).fit(disp=False)
        longer = np.concatenate([series.values, extra])
        results = ETSModel(pd.Series(longer), **config).smooth(first.params)
        prediction = results.get_prediction(start=longer.size, end=longer.size + 47)

        expected = (
            np.asarray(prediction.predicted_mean)[:, None]
            + np.sqrt(np.asarray(prediction.forecast_variance))[:, None]
            * norm.ppf(np.asarray(LEVELS))[None, :]
        )
    np.testing.assert_allclose(updated, np.maximum(expected, 0.0), rtol=1e-9, atol=1e-6)
