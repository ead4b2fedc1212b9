"""Quantile levels that were not predicted, read off the predicted ones by interpolation."""

from __future__ import annotations

import math

import numpy as np

from voltpack.forecast.series import FloatArray, QuantileForecast
from voltpack.model.errors import ForecastError


def interpolate_quantile(forecast: QuantileForecast, level: float, field: str) -> FloatArray:
    """Quantile `level` of every step of `forecast`, linear in the level between the two
    nearest predicted levels (exact when `level` was predicted).

    Raises ForecastError naming `field` (the caller's input that chose the level) when the
    level lies outside the predicted levels (no extrapolation into the tails) or the forecast
    holds a non-finite value.
    """
    if not 0.0 < level < 1.0 or not math.isfinite(level):
        raise ForecastError(f"{field}: quantile level {level} must lie strictly between 0 and 1")
    levels = np.asarray(forecast.quantiles, dtype=np.float64)
    values = np.asarray(forecast.values, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] != levels.size or values.shape[0] == 0:
        raise ForecastError(
            f"forecast of {forecast.series}: values must be [horizon, {levels.size}] "
            f"with horizon >= 1, got shape {values.shape}"
        )
    if not np.all(np.isfinite(values)):
        raise ForecastError(f"forecast of {forecast.series}: values hold NaN or infinity")
    order = np.argsort(levels)
    levels, values = levels[order], values[:, order]
    tolerance = 1e-9
    if level < levels[0] - tolerance or level > levels[-1] + tolerance:
        raise ForecastError(
            f"{field}: needs quantile {level:g} of {forecast.series}, outside the predicted "
            f"levels {[float(q) for q in levels]}; predict quantiles that bracket it"
        )
    # non-decreasing in the level, as the forecast's contract says (guards rounding noise)
    values = np.maximum.accumulate(values, axis=1)
    level = min(max(level, float(levels[0])), float(levels[-1]))
    upper = int(np.searchsorted(levels, level - tolerance, side="left"))
    if abs(levels[upper] - level) <= tolerance:
        return np.asarray(values[:, upper], dtype=np.float64)
    lower = upper - 1
    weight = (level - levels[lower]) / (levels[upper] - levels[lower])
    return np.asarray(
        values[:, lower] + weight * (values[:, upper] - values[:, lower]), dtype=np.float64
    )
