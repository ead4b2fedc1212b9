"""Seasonal naive: repeat the last season; quantiles from its own past errors by horizon.

The forecast of the sample `h` steps ahead is the last observed sample at the same phase of the
season. Its quantiles add the conformal quantiles (see `conformal.py`) of the errors the same
rule made `h` steps ahead over the last `calibration_samples` samples of the history.

Fallbacks: without a season, or with less than a full season plus one sample, it is the naive
forecast (season 1: repeat the last value); a constant history gives a zero-width interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from voltpack.forecast.conformal import HorizonConformal, calibrated_quantiles
from voltpack.forecast.history import CleanHistory, clean_history, finalize_quantiles
from voltpack.forecast.series import FloatArray, QuantileForecast, TimeSeries, check_quantiles
from voltpack.model.errors import ForecastError


def seasonal_naive_point(values: FloatArray, season: int, horizon: int) -> FloatArray:
    """`point[h]`: the last sample at the phase of `h + 1` steps after the end of `values`."""
    steps = np.arange(1, horizon + 1)
    back = season * np.ceil(steps / season).astype(np.int64)
    return np.asarray(values[values.size - 1 + steps - back], dtype=np.float64)


def seasonal_naive_scores(
    values: FloatArray, season: int, max_horizon: int, samples: int
) -> HorizonConformal:
    """Errors of the seasonal naive rule at 1..`max_horizon` steps over the last `samples`."""
    steps_list: list[FloatArray] = []
    scores_list: list[FloatArray] = []
    for step in range(1, max_horizon + 1):
        lag = season * -(-step // season)
        if values.size <= lag:
            break
        errors = values[lag:] - values[:-lag]
        errors = errors[-samples:]
        scores_list.append(errors)
        steps_list.append(np.full(errors.size, step))
    if not scores_list:
        raise ForecastError("seasonal naive needs more than one season of history")
    steps = np.concatenate(steps_list).astype(np.int64)
    return HorizonConformal.from_scores(steps, np.concatenate(scores_list))


def seasonal_fit_samples(season: int) -> int:
    """Samples ETS needs to fit a season: two full seasons plus 10 for the heuristic start
    (here, not in `ets`, so that reading it does not import statsmodels)."""
    return 2 * season + 10


class SeasonalNaive:
    """The seasonal naive forecaster with empirical (conformal) error quantiles."""

    name = "seasonal_naive"

    def __init__(
        self,
        season: int | None = None,
        max_horizon: int = 48,
        calibration_samples: int = 2000,
        max_gap_steps: int | None = None,
    ) -> None:
        self.season = season
        self.name = "naive" if season == 1 else "seasonal_naive"
        self.max_horizon = max_horizon
        self.calibration_samples = calibration_samples
        self.max_gap_steps = max_gap_steps
        self._history: CleanHistory | None = None
        self._season_used = 1
        self._conformal: HorizonConformal | None = None
        self._notes: tuple[str, ...] = ()

    def fit(self, history: TimeSeries) -> None:
        clean = clean_history(history, self.max_gap_steps)
        wanted = self.season if self.season is not None else min(history.seasons, default=1)
        season = wanted if clean.values.size > wanted else 1
        notes = list(clean.notes)
        if season != wanted:
            notes.append(f"naive fallback: {clean.values.size} samples, season {wanted}")
        self._history, self._season_used, self._notes = clean, season, tuple(notes)
        self._conformal = seasonal_naive_scores(
            clean.values, season, self.max_horizon, self.calibration_samples
        )

    def update(self, new_values: FloatArray) -> None:
        history = self._fitted()
        extended = history.series.appended(new_values)
        self._history = clean_history(extended, self.max_gap_steps)

    def predict(self, horizon: int, quantiles: Sequence[float]) -> QuantileForecast:
        history = self._fitted()
        levels = check_quantiles(quantiles)
        if horizon < 1:
            raise ForecastError(f"horizon must be >= 1, got {horizon}")
        values = history.values
        notes = self._notes
        if history.constant:
            out = np.full((horizon, len(levels)), values[-1])
        else:
            point = seasonal_naive_point(values, self._season_used, horizon)
            assert self._conformal is not None
            out = calibrated_quantiles(point, 1.0, self._conformal, levels)
        series = history.series
        return QuantileForecast(
            series.name, self.name, series.time_s(values.size), series.step_s, levels,
            finalize_quantiles(series.name, out, series.nonnegative), notes,
        )  # fmt: skip

    def _fitted(self) -> CleanHistory:
        if self._history is None:
            raise ForecastError(f"{self.name}: predict or update called before fit")
        return self._history
