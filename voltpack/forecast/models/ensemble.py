"""A combination of `ets` and `global_gbm`, re-calibrated by split conformal on recent history.

Point forecast: the mean of the two models' medians (the median of two forecasts). Its spread
at step h, `width[h]`, is the mean of the two models' 80% interval widths divided by
2 z(0.9) (a standard deviation if the intervals were Gaussian), so it grows with the horizon as
the models say. Quantile q is `point + width * offset(q)`, where `offset` is the finite-sample
conformal quantile (`conformal.conformal_quantile`) of the series' own scores
`(actual - point) / width`, pooled over horizons.

The scores come from the end of the history, walked as `auto` walks it
(`tail_walk.plan_tail`): both models are fitted on the history without its last `tail`
samples, then walked through the tail with `update` (no re-estimation) and scored on
`max_horizon` steps (an eighth of a shorter history) from up to `calibration_origins` origins
`stride` samples apart; the head keeps `min_fit_samples`, or half of a shorter history, and
at least two seasons (ETS needs them to fit its season). After
the walk both have seen the whole history and forecast from its end. A series too short for
`tail_walk.MIN_ORIGINS` origins is not re-calibrated: its quantiles are the mean of the two
models' quantiles (note "not re-calibrated").

Bad histories go through `history.clean_history` and each model's own fallbacks (their notes
are kept); a constant history forecasts its value with a zero-width interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm

from voltpack.forecast.conformal import conformal_quantile
from voltpack.forecast.history import CleanHistory, clean_history, finalize_quantiles
from voltpack.forecast.models.ets import ExponentialSmoothing
from voltpack.forecast.models.global_gbm import GlobalBoost
from voltpack.forecast.models.tail_walk import heads, plan_tail, tail_steps, two_seasons
from voltpack.forecast.series import FloatArray, QuantileForecast, TimeSeries, check_quantiles
from voltpack.forecast.single_from_batch import SingleFromBatch
from voltpack.model.errors import ForecastError

WIDTH_LEVELS = (0.1, 0.5, 0.9)
Z_80 = 2.0 * float(norm.ppf(0.9))


@dataclass
class _Member:
    history: CleanHistory
    ets: ExponentialSmoothing
    scores: FloatArray | None = None  # sorted conformal scores; None: not re-calibrated
    notes: tuple[str, ...] = field(default_factory=tuple)


class Ensemble(SingleFromBatch):
    """Mean of the `ets` and `global_gbm` medians with split-conformal quantiles per series."""

    name = "ensemble"

    def __init__(
        self,
        max_horizon: int = 48,
        calibration_origins: int = 24,
        stride: int | None = None,
        min_fit_samples: int = 200,
        gbm: dict[str, Any] | None = None,
        ets: dict[str, Any] | None = None,
        max_gap_steps: int | None = None,
    ) -> None:
        if max_horizon < 1 or calibration_origins < 0:
            raise ForecastError("max_horizon must be >= 1 and calibration_origins >= 0")
        self.max_horizon = max_horizon
        self.calibration_origins = calibration_origins
        self.stride = stride if stride is not None else max(1, max_horizon // 4)
        self.min_fit_samples = min_fit_samples
        self.gbm_params = {"max_horizon": max_horizon, **(gbm or {})}
        self.ets_params = dict(ets or {})
        self.max_gap_steps = max_gap_steps
        self._members: list[_Member] = []
        self._gbm: GlobalBoost | None = None

    # --- many series at once ---------------------------------------------------------------
    def fit_many(self, histories: Sequence[TimeSeries]) -> None:
        """Fit both models on every history minus its tail, then score them on the tail."""
        if not histories:
            raise ForecastError(f"{self.name}: fit_many needs at least one series")
        cleaned = [clean_history(s, self.max_gap_steps) for s in histories]
        plans = [plan_tail(len(c.values), self.max_horizon, self.calibration_origins,
                           self.min_fit_samples, self.stride, two_seasons(c))
                 for c in cleaned]  # fmt: skip
        fitted_on = heads(cleaned, plans)
        members = []
        for clean, head in zip(cleaned, fitted_on, strict=True):
            model = ExponentialSmoothing(max_gap_steps=self.max_gap_steps, **self.ets_params)
            model.fit(head)
            members.append(_Member(clean, model))
        gbm = GlobalBoost(max_gap_steps=self.max_gap_steps, **self.gbm_params)
        gbm.fit_many(fitted_on)
        self._members, self._gbm = members, gbm
        scores: list[list[FloatArray]] = [[] for _ in members]
        for step in tail_steps(cleaned, plans):
            boosted = gbm.predict_many(self.max_horizon, WIDTH_LEVELS)
            for i, ahead in step.ahead.items():
                member = members[i]
                smoothed = member.ets.predict(self.max_horizon, WIDTH_LEVELS).values
                point, width = _combine(smoothed, boosted[i].values, _floor(member.history.values))
                scores[i].append((ahead - point[: ahead.size]) / width[: ahead.size])
                member.ets.update(step.updates[i])
            gbm.update_many(step.updates)
        for member, own in zip(members, scores, strict=True):
            if own:
                member.scores = np.sort(np.concatenate(own))
            elif not member.history.constant:
                member.notes = ("not re-calibrated: history too short",)

    def update_many(self, new_values: Sequence[FloatArray]) -> None:
        """Append new samples to each series (same order as fitted); no re-estimation."""
        gbm = self._fitted()
        self.check_update_count(len(new_values), len(self._members))
        for member, values in zip(self._members, new_values, strict=True):
            extended = member.history.series.appended(values)
            member.history = clean_history(extended, self.max_gap_steps)
            member.ets.update(values)
        gbm.update_many(new_values)

    def predict_many(self, horizon: int, quantiles: Sequence[float]) -> list[QuantileForecast]:
        """Forecasts of every fitted series, in the order they were fitted."""
        gbm = self._fitted()
        if horizon < 1:
            raise ForecastError(f"horizon must be >= 1, got {horizon}")
        levels = check_quantiles(quantiles)
        asked = tuple(sorted(set(levels) | set(WIDTH_LEVELS)))
        columns = [asked.index(q) for q in levels]
        width_columns = [asked.index(q) for q in WIDTH_LEVELS]
        boosted = gbm.predict_many(horizon, asked)
        out: list[QuantileForecast] = []
        for member, boost in zip(self._members, boosted, strict=True):
            series = member.history.series
            smoothed = member.ets.predict(horizon, asked)
            notes = _merge(member.history.notes, smoothed.notes, boost.notes, member.notes)
            if member.history.constant:
                table = np.full((horizon, len(levels)), series.values[-1])
            elif member.scores is None:
                table = 0.5 * (smoothed.values[:, columns] + boost.values[:, columns])
            else:
                point, width = _combine(
                    smoothed.values[:, width_columns],
                    boost.values[:, width_columns],
                    _floor(series.values),
                )
                offsets = np.array([conformal_quantile(member.scores, q) for q in levels])
                table = point[:, None] + width[:, None] * offsets[None, :]
            final = finalize_quantiles(series.name, table, series.nonnegative)
            start = series.time_s(len(series))
            out.append(
                QuantileForecast(series.name, self.name, start, series.step_s, levels, final, notes)
            )
        return out

    # --- internals ---------------------------------------------------------------------------
    def _fitted(self) -> GlobalBoost:
        if self._gbm is None:
            raise ForecastError(f"{self.name}: predict or update called before fit")
        return self._gbm


def _combine(
    smoothed: FloatArray, boosted: FloatArray, floor: float
) -> tuple[FloatArray, FloatArray]:
    """Point (mean of the medians) and width from two [h, (0.1, 0.5, 0.9)] tables."""
    point = 0.5 * (smoothed[:, 1] + boosted[:, 1])
    spread = 0.5 * ((smoothed[:, 2] - smoothed[:, 0]) + (boosted[:, 2] - boosted[:, 0]))
    return point, np.maximum(spread / Z_80, floor)


def _floor(values: FloatArray) -> float:
    """Smallest width: a tenth of the mean absolute one-step change (tiny when constant)."""
    change = float(np.mean(np.abs(np.diff(values)))) if values.size > 1 else 0.0
    return max(0.1 * change, 1e-9 * max(1.0, float(np.abs(values).max())))


def _merge(*groups: tuple[str, ...]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for group in groups:
        seen.update(dict.fromkeys(group))
    return tuple(seen)
