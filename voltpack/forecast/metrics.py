"""Forecast error metrics: MASE, sMAPE, pinball loss and interval coverage.

Arrays are aligned: `actual[h]` against `forecast[h]` (or `forecast[h, j]` for quantile j).
NaN actuals (missing samples) are left out of every mean.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from voltpack.forecast.series import FloatArray


def pinball_loss(actual: FloatArray, predicted: FloatArray, level: float) -> float:
    """Mean quantile (pinball) loss of `predicted` as the `level` quantile of `actual`."""
    diff = actual - predicted
    loss = np.maximum(level * diff, (level - 1.0) * diff)
    return float(np.nanmean(loss))


def mean_pinball_loss(actual: FloatArray, predicted: FloatArray, levels: Sequence[float]) -> float:
    """Pinball loss averaged over quantile levels; `predicted[:, j]` is level `levels[j]`."""
    return float(np.mean([pinball_loss(actual, predicted[:, j], q) for j, q in enumerate(levels)]))


def smape(actual: FloatArray, predicted: FloatArray) -> float:
    """Symmetric MAPE in percent (0..200); a sample where both are 0 counts as 0 error."""
    denominator = np.abs(actual) + np.abs(predicted)
    ratio = np.where(denominator > 0, 2.0 * np.abs(actual - predicted) / np.where(
        denominator > 0, denominator, 1.0), 0.0)  # fmt: skip
    return float(100.0 * np.nanmean(np.where(np.isnan(actual), np.nan, ratio)))


def seasonal_naive_scale(history: FloatArray, season: int) -> float:
    """MASE's denominator: the in-sample mean absolute error of the seasonal naive forecast
    (season 1 = naive); at least a tiny positive number so a constant history stays finite."""
    lag = max(1, season) if history.size > max(1, season) else 1
    errors = np.abs(history[lag:] - history[:-lag])
    scale = float(np.nanmean(errors)) if errors.size and np.isfinite(errors).any() else 0.0
    return max(scale, 1e-9)


def mase(actual: FloatArray, predicted: FloatArray, scale: float) -> float:
    """Mean absolute error scaled by `seasonal_naive_scale` of the training history."""
    return float(np.nanmean(np.abs(actual - predicted)) / scale)


def coverage(actual: FloatArray, lower: FloatArray, upper: FloatArray) -> float:
    """Share of (non-missing) actuals inside [lower, upper]."""
    present = ~np.isnan(actual)
    if not present.any():
        return float("nan")
    inside = (actual[present] >= lower[present]) & (actual[present] <= upper[present])
    return float(np.mean(inside))
