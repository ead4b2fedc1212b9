"""What every forecaster offers: fit on a history, take new samples, predict quantiles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from voltpack.forecast.series import FloatArray, QuantileForecast, TimeSeries


class Forecaster(Protocol):
    """One model for one series. Deterministic: same history (and seed), same forecast.

    `fit` may raise `ForecastError` for a history it cannot use; a model that falls back to a
    simpler method says so in the forecast's `notes`. No method returns NaN.
    """

    name: str

    def fit(self, history: TimeSeries) -> None:
        """Estimate the model on `history` (replaces any earlier fit)."""
        ...

    def update(self, new_values: FloatArray) -> None:
        """Append samples observed after the history without re-estimating parameters."""
        ...

    def predict(self, horizon: int, quantiles: Sequence[float]) -> QuantileForecast:
        """Quantiles of the next `horizon` samples after everything seen so far."""
        ...


class BatchForecaster(Forecaster, Protocol):
    """A forecaster that also fits and predicts many series in one call (vectorised)."""

    def fit_many(self, histories: Sequence[TimeSeries]) -> None:
        """Fit on every history at once (replaces any earlier fit)."""
        ...

    def update_many(self, new_values: Sequence[FloatArray]) -> None:
        """Append new samples to each fitted series, in the order they were fitted."""
        ...

    def predict_many(self, horizon: int, quantiles: Sequence[float]) -> list[QuantileForecast]:
        """Forecasts of every fitted series, in the order they were fitted."""
        ...
