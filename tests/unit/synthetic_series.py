"""Synthetic hourly series with a daily pattern, shared by the forecast model tests."""

from __future__ import annotations

import numpy as np

from voltpack.forecast.protocol import BatchForecaster
from voltpack.forecast.series import QuantileForecast, TimeSeries

SEASON = 24


def pattern(length: int, phase: int = 0) -> np.ndarray:
    steps = np.arange(length) + phase
    return 50.0 + 20.0 * np.sin(2 * np.pi * steps / SEASON) + 8.0 * (steps % SEASON < 3)


def noisy(seed: int, length: int = 24 * 40, noise: float = 2.0) -> TimeSeries:
    rng = np.random.default_rng(seed)
    values = pattern(length, phase=seed) + rng.normal(0.0, noise, length)
    return TimeSeries(f"synthetic/{seed}", "power", 3600.0, 0.0, values, "watts", (SEASON,))


def bad_histories(short_length: int) -> list[TimeSeries]:
    """Gappy (leading gap, inner gap, an inf), short, flat (3.0) and tiny histories, in order."""
    gappy = noisy(5).values.copy()
    gappy[:7] = np.nan  # leading gap: dropped
    gappy[300:310] = np.nan  # inner gap: filled
    gappy[500] = np.inf
    short = noisy(6).values[:short_length]
    return [
        TimeSeries("gappy", "power", 3600.0, 0.0, gappy, "watts", (SEASON,)),
        TimeSeries("short", "power", 3600.0, 0.0, short, "watts", (SEASON,)),
        TimeSeries("flat", "power", 3600.0, 0.0, np.full(600, 3.0), "watts", (SEASON,)),
        TimeSeries("tiny", "power", 3600.0, 0.0, np.array([1.0, 2.0, 1.5]), "watts", ()),
    ]


def assert_safe(forecasts: list[QuantileForecast]) -> None:
    """Finite, non-crossing, non-negative quantiles."""
    for forecast in forecasts:
        assert np.isfinite(forecast.values).all()
        assert (np.diff(forecast.values, axis=1) >= 0).all()
        assert forecast.values.min() >= 0.0


def safe_forecasts_of_bad_histories(
    model: BatchForecaster, short_length: int, quantiles: tuple[float, ...]
) -> list[QuantileForecast]:
    """`model` fitted on `bad_histories(short_length)`: its 30-step forecasts, checked safe."""
    model.fit_many(bad_histories(short_length))
    forecasts = model.predict_many(30, quantiles)
    assert_safe(forecasts)
    return forecasts
