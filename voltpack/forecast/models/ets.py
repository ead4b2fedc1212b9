"""Exponential smoothing (statsmodels `ETSModel`) with its own Gaussian prediction intervals.

Additive errors, optional damped additive trend, additive seasonality at the shortest season
when the history holds at least two full seasons (initial states by statsmodels' heuristic,
so long seasons stay cheap). Quantile q is `mean + z_q * sqrt(forecast variance)` from the
model's exact forecast variance. `update` re-runs the smoother over the longer history with the
fitted parameters (no re-estimation).

Without a trend (the default), the forecast is computed here from the fitted parameters and the
smoothed states, with the same closed forms statsmodels uses (Hyndman & Athanasopoulos, class 1
variances): statsmodels' results object would also estimate the parameters' covariance (a
complex-step Hessian) and build a (samples x season) state matrix, ~120 ms at a daily season of
1-minute buckets that the forecast never reads. `tests/unit/test_forecast_ets_fast.py` checks
both give the same quantiles. A damped trend still goes through statsmodels' results.

Fallbacks (named in the forecast's notes): fewer than two seasons -> no seasonal component;
fewer than `MIN_SAMPLES` samples, or an estimation that fails or gives a non-finite forecast ->
`SeasonalNaive`; a constant history -> that value with a zero-width interval.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm
from statsmodels.tsa.exponential_smoothing.ets import ETSModel

from voltpack.forecast.history import CleanHistory, clean_history, finalize_quantiles
from voltpack.forecast.models.seasonal_naive import SeasonalNaive, seasonal_fit_samples
from voltpack.forecast.series import FloatArray, QuantileForecast, TimeSeries, check_quantiles
from voltpack.model.errors import ForecastError

MIN_SAMPLES = 10


@dataclass(frozen=True)
class SmoothedEts:
    """A fitted ETS without trend (A, N, A or N): what its forecast needs, and nothing more."""

    params: FloatArray
    """statsmodels' parameters: smoothing level, then smoothing seasonal when seasonal."""
    level: float
    """The level after the last observation."""
    season: FloatArray
    """The last `m` seasonal states, oldest first (empty without a season)."""
    mse: float
    """Mean squared one-step residual (statsmodels' concentrated scale)."""

    def quantiles(self, horizon: int, levels: Sequence[float]) -> FloatArray:
        """(horizon x levels) Gaussian quantiles of the 1..horizon-step forecasts."""
        steps = np.arange(1, horizon + 1)
        alpha = float(self.params[0])
        variance = 1.0 + alpha**2 * (steps - 1)
        mean = np.full(horizon, self.level)
        m = self.season.size
        if m:
            gamma = float(self.params[1])
            k = (steps - 1) // m
            variance = variance + gamma * k * (2 * alpha + gamma)
            mean = mean + self.season[(steps - 1) % m]
        std = np.sqrt(np.maximum(self.mse * variance, 0.0))
        z = np.asarray(norm.ppf(np.asarray(levels)), dtype=np.float64)
        return np.asarray(mean[:, None] + std[:, None] * z[None, :], dtype=np.float64)


def smooth_without_trend(model: Any, params: FloatArray) -> SmoothedEts:
    """Run statsmodels' smoother with `params` and keep the end states (a model with no trend)."""
    yhat, states = model.smooth(params, return_raw=True)
    states = np.asarray(states, dtype=np.float64)
    residuals = np.asarray(model.endog, dtype=np.float64) - np.asarray(yhat, dtype=np.float64)
    m = int(model.seasonal_periods) if model.has_seasonal else 0
    season = states[-m:, 1].copy() if m else np.empty(0)
    return SmoothedEts(
        np.asarray(params, dtype=np.float64), float(states[-1, 0]), season,
        float(np.mean(residuals**2)),
    )  # fmt: skip


class ExponentialSmoothing:
    """statsmodels ETS (A, N or Ad, A or N) on the last `max_train_samples` of the history."""

    name = "ets"

    def __init__(
        self,
        damped_trend: bool = False,
        max_train_samples: int = 4032,
        max_gap_steps: int | None = None,
    ) -> None:
        self.damped_trend = damped_trend
        self.max_train_samples = max_train_samples
        self.max_gap_steps = max_gap_steps
        self._history: CleanHistory | None = None
        self._results: Any = None
        self._config: dict[str, Any] = {}
        self._fallback: SeasonalNaive | None = None
        self._notes: tuple[str, ...] = ()

    def fit(self, history: TimeSeries) -> None:
        clean = clean_history(history, self.max_gap_steps)
        self._history, self._results, self._fallback = clean, None, None
        notes = list(clean.notes)
        values = clean.values[-self.max_train_samples :]
        if clean.constant:
            self._notes = tuple(notes)
            return
        if values.size < MIN_SAMPLES:
            notes.append(f"seasonal naive fallback: {values.size} < {MIN_SAMPLES} samples")
            self._use_fallback(history, notes)
            return
        season = min(history.seasons, default=0)
        self._config = {"error": "add", "initialization_method": "heuristic"}
        if self.damped_trend:
            self._config.update(trend="add", damped_trend=True)
        if season and values.size >= seasonal_fit_samples(season):
            self._config.update(seasonal="add", seasonal_periods=season)
        elif season:
            notes.append(f"no seasonal component: {values.size} samples < two seasons")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._results = self._estimate(values)
        except (ValueError, np.linalg.LinAlgError) as exc:
            notes.append(f"seasonal naive fallback: ETS estimation failed ({exc})")
            self._use_fallback(history, notes)
            return
        self._notes = tuple(notes)

    def _estimate(self, values: FloatArray) -> Any:
        if self.damped_trend:
            return ETSModel(pd.Series(values), **self._config).fit(disp=False)
        model = ETSModel(values, **self._config)
        return smooth_without_trend(model, model.fit(disp=False, return_params=True))

    def _use_fallback(self, history: TimeSeries, notes: list[str]) -> None:
        self._fallback = SeasonalNaive(max_gap_steps=self.max_gap_steps)
        self._fallback.fit(history)
        self._notes = tuple(notes)

    def update(self, new_values: FloatArray) -> None:
        history = self._fitted()
        extended = history.series.appended(new_values)
        self._history = clean_history(extended, self.max_gap_steps)
        if self._fallback is not None:
            self._fallback.update(new_values)
        elif self._results is not None:
            values = self._history.values[-self.max_train_samples :]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if isinstance(self._results, SmoothedEts):
                    model = ETSModel(values, **self._config)
                    self._results = smooth_without_trend(model, self._results.params)
                else:
                    model = ETSModel(pd.Series(values), **self._config)
                    self._results = model.smooth(self._results.params)

    def predict(self, horizon: int, quantiles: Sequence[float]) -> QuantileForecast:
        history = self._fitted()
        levels = check_quantiles(quantiles)
        if horizon < 1:
            raise ForecastError(f"horizon must be >= 1, got {horizon}")
        series = history.series
        notes = self._notes
        if self._fallback is not None:
            inner = self._fallback.predict(horizon, levels)
            out, notes = inner.values, notes + inner.notes
        elif self._results is None:
            out = np.full((horizon, len(levels)), history.values[-1])
        else:
            out = self._ets_quantiles(horizon, levels)
            if not np.isfinite(out).all():
                fallback = SeasonalNaive(max_gap_steps=self.max_gap_steps)
                fallback.fit(series)
                out = fallback.predict(horizon, levels).values
                notes = (*notes, "seasonal naive fallback: non-finite ETS forecast")
        return QuantileForecast(
            series.name, self.name, series.time_s(history.values.size), series.step_s, levels,
            finalize_quantiles(series.name, out, series.nonnegative), notes,
        )  # fmt: skip

    def _ets_quantiles(self, horizon: int, levels: Sequence[float]) -> FloatArray:
        if isinstance(self._results, SmoothedEts):
            return self._results.quantiles(horizon, levels)
        nobs = int(self._results.nobs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prediction = self._results.get_prediction(start=nobs, end=nobs + horizon - 1)
            mean = np.asarray(prediction.predicted_mean, dtype=np.float64)
            std = np.sqrt(np.maximum(np.asarray(prediction.forecast_variance), 0.0))
        z = np.asarray(norm.ppf(np.asarray(levels)), dtype=np.float64)
        return np.asarray(mean[:, None] + std[:, None] * z[None, :], dtype=np.float64)

    def _fitted(self) -> CleanHistory:
        if self._history is None:
            raise ForecastError(f"{self.name}: predict or update called before fit")
        return self._history
