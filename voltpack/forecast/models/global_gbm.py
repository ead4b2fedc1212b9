"""voltpack's own model: one gradient-boosted direct multi-horizon model for many series.

One LightGBM regressor learns `(y[t + h] - level_t) / scale_t` from the features of
`features.py` (normalised lags, same-phase seasonal lags, calendar, steps ahead), on rows
sampled from every history at once: series share what they have in common (daily and weekly
shape, how demand relaxes after a burst), and the normaliser lets series of any size share one
model. Intervals come from split-conformal calibration (`conformal.py`): the model is trained
on targets before the last `calibration_fraction` of each history, and its normalised errors
on targets inside that tail give the quantile offsets per horizon bucket, pooled over series,
then multiplied by each series' scale at the forecast origin. With `retrain_on_all` the point
model is then re-trained on every row (the offsets stay those of the held-out tail).

Fallbacks per series (named in the forecast's notes): a constant history -> that value with a
zero-width interval; a history shorter than `min_samples` -> `SeasonalNaive` (which itself
falls back to naive when shorter than a season).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import lightgbm as lgb
import numpy as np

from voltpack.forecast.conformal import HorizonConformal
from voltpack.forecast.history import CleanHistory, clean_history, finalize_quantiles
from voltpack.forecast.models.features import IntArray, Panel, features
from voltpack.forecast.models.seasonal_naive import SeasonalNaive
from voltpack.forecast.series import FloatArray, QuantileForecast, TimeSeries, check_quantiles
from voltpack.forecast.single_from_batch import SingleFromBatch
from voltpack.model.errors import ForecastError

ROWS_PER_SAMPLE = 10


@dataclass
class _Member:
    """One series of the batch: its cleaned history and, if not modelled, why."""

    history: CleanHistory
    fallback: SeasonalNaive | None = None
    constant: bool = False  # constant when fitted: forecast its last value, zero width
    spread: float = 1.0  # this series' calibration error size relative to all series


class GlobalBoost(SingleFromBatch):
    """Global LightGBM direct multi-horizon point model with split-conformal quantiles."""

    name = "global_gbm"

    def __init__(
        self,
        max_horizon: int = 48,
        rows: int = 200_000,
        calibration_fraction: float = 0.1,
        calibration_rows: int = 100_000,
        min_samples: int = 200,
        n_estimators: int = 200,
        learning_rate: float = 0.05,
        num_leaves: int = 31,
        objective: str = "l1",
        retrain_on_all: bool = False,
        spread_prior: float = 50.0,
        target_base: str = "last",
        threads: int = 2,
        seed: int = 0,
        max_gap_steps: int | None = None,
    ) -> None:
        if max_horizon < 1 or not 0.0 < calibration_fraction < 1.0:
            raise ForecastError("max_horizon must be >= 1 and calibration_fraction in (0, 1)")
        self.max_horizon = max_horizon
        self.rows = rows
        self.calibration_fraction = calibration_fraction
        self.calibration_rows = calibration_rows
        self.min_samples = min_samples
        self.retrain_on_all = retrain_on_all
        self.spread_prior = spread_prior
        self.target_base = target_base
        self.seed = seed
        self.max_gap_steps = max_gap_steps
        self.params: dict[str, Any] = {
            "objective": objective, "learning_rate": learning_rate, "num_leaves": num_leaves,
            "min_data_in_leaf": 50, "feature_fraction": 0.9, "bagging_fraction": 0.8,
            "bagging_freq": 1, "num_threads": threads, "seed": seed, "deterministic": True,
            "force_row_wise": True, "verbose": -1,
        }  # fmt: skip
        self.n_estimators = n_estimators
        self._members: list[_Member] = []
        self._booster: Any = None
        self._conformal: HorizonConformal | None = None

    # --- many series at once ---------------------------------------------------------------
    def fit_many(self, histories: Sequence[TimeSeries]) -> None:
        """Fit one model on all `histories`; a bad history raises `ForecastError` naming it."""
        if not histories:
            raise ForecastError(f"{self.name}: fit_many needs at least one series")
        members = [_Member(clean_history(s, self.max_gap_steps)) for s in histories]
        for member in members:
            member.constant = member.history.constant
            if not member.history.constant and member.history.values.size < self.min_samples:
                member.fallback = SeasonalNaive(
                    max_horizon=self.max_horizon, max_gap_steps=self.max_gap_steps
                )
                member.fallback.fit(member.history.series)
        self._members = members
        modelled = [i for i, m in enumerate(members) if self._modelled(m)]
        self._booster, self._conformal = None, None
        if modelled:
            spreads = self._train([members[i].history.series for i in modelled])
            for i, spread in zip(modelled, spreads.tolist(), strict=True):
                members[i].spread = spread

    def update_many(self, new_values: Sequence[FloatArray]) -> None:
        """Append new samples to each series (same order as fitted); no re-estimation."""
        self.check_update_count(len(new_values), len(self._members))
        for member, values in zip(self._members, new_values, strict=True):
            extended = member.history.series.appended(values)
            member.history = clean_history(extended, self.max_gap_steps)
            if member.fallback is not None:
                member.fallback.update(values)

    def predict_many(self, horizon: int, quantiles: Sequence[float]) -> list[QuantileForecast]:
        """Forecasts of every fitted series, in the order they were fitted."""
        if not self._members:
            raise ForecastError(f"{self.name}: predict called before fit")
        if horizon < 1:
            raise ForecastError(f"horizon must be >= 1, got {horizon}")
        levels = check_quantiles(quantiles)
        modelled = [i for i, m in enumerate(self._members) if self._modelled(m)]
        values: dict[int, FloatArray] = {}
        if modelled:
            values = self._predict_modelled(modelled, horizon, levels)
        notes_extra: tuple[str, ...] = ()
        if horizon > self.max_horizon:
            notes_extra = (f"horizon {horizon} beyond the trained {self.max_horizon} steps",)
        out: list[QuantileForecast] = []
        for i, member in enumerate(self._members):
            series = member.history.series
            notes = member.history.notes
            if member.fallback is not None:
                inner = member.fallback.predict(horizon, levels)
                table, notes = inner.values, (*notes, "seasonal naive fallback: short history")
            elif member.constant:
                table = np.full((horizon, len(levels)), series.values[-1])
            else:
                table, notes = values[i], notes + notes_extra
            out.append(
                QuantileForecast(
                    series.name,
                    self.name,
                    series.time_s(len(series)),
                    series.step_s,
                    levels,
                    finalize_quantiles(series.name, table, series.nonnegative),
                    notes,
                )
            )
        return out

    # --- internals ---------------------------------------------------------------------------
    def _modelled(self, member: _Member) -> bool:
        return member.fallback is None and not member.constant

    def _train(self, histories: list[TimeSeries]) -> FloatArray:
        """Fit the booster and the pooled conformal scores; return each series' spread."""
        panel = Panel.build(histories)
        rng = np.random.default_rng(self.seed)
        tails = np.maximum(
            (panel.lengths * self.calibration_fraction).astype(np.int64), self.max_horizon
        )
        train = self._sample_rows(panel, panel.lengths - tails, self.rows, rng)
        x_train, y_train = self._design(panel, *train)
        booster = lgb.train(
            self.params, lgb.Dataset(x_train, y_train), num_boost_round=self.n_estimators
        )
        cal_series, cal_origin, cal_steps = self._calibration_rows(panel, tails, rng)
        x_cal, y_cal = self._design(panel, cal_series, cal_origin, cal_steps)
        scores = y_cal - booster.predict(x_cal)
        spreads = series_spread(cal_series, scores, len(histories), self.spread_prior)
        self._conformal = HorizonConformal.from_scores(cal_steps, scores / spreads[cal_series])
        if self.retrain_on_all:
            every = self._sample_rows(panel, panel.lengths, self.rows, rng)
            x_all, y_all = self._design(panel, *every)
            booster = lgb.train(
                self.params, lgb.Dataset(x_all, y_all), num_boost_round=self.n_estimators
            )
        self._booster = booster
        return spreads

    def _design(
        self, panel: Panel, series: IntArray, origin: IntArray, steps: IntArray
    ) -> tuple[FloatArray, FloatArray]:
        x, level, scale = features(panel, series, origin, steps)
        base = self._base(panel, series, origin, level)
        target = (panel.gather(series, origin + steps) - base) / scale
        return x, target

    def _base(
        self, panel: Panel, series: IntArray, origin: IntArray, level: FloatArray
    ) -> FloatArray:
        """What the model predicts a change from: the last sample, or the level."""
        return panel.gather(series, origin) if self.target_base == "last" else level

    def _sample_rows(
        self, panel: Panel, usable: IntArray, budget: int, rng: np.random.Generator
    ) -> tuple[IntArray, IntArray, IntArray]:
        """Random (series, origin, steps) whose target index lies below `usable`: `budget`
        rows shared by the series, at most `ROWS_PER_SAMPLE` per usable sample."""
        count = len(panel.lengths)
        per_series = max(min(budget // count, ROWS_PER_SAMPLE * int(usable.max())), 1)
        series = np.repeat(np.arange(count, dtype=np.int64), per_series)
        steps = rng.integers(1, self.max_horizon + 1, size=series.size)
        last_origin = usable[series] - 1 - steps
        origin = (rng.random(series.size) * (last_origin + 1)).astype(np.int64)
        keep = last_origin >= 0
        return series[keep], origin[keep], steps[keep]

    def _calibration_rows(
        self, panel: Panel, tails: IntArray, rng: np.random.Generator
    ) -> tuple[IntArray, IntArray, IntArray]:
        """Random rows whose origin is at or after the tail's start - 1 (targets in the tail)."""
        count = len(panel.lengths)
        per_series = max(self.calibration_rows // count, 1)
        series = np.repeat(np.arange(count, dtype=np.int64), per_series)
        steps = rng.integers(1, self.max_horizon + 1, size=series.size)
        first = panel.lengths[series] - tails[series] - 1
        last = panel.lengths[series] - 1 - steps
        span = np.maximum(last - first + 1, 0)
        origin = first + (rng.random(series.size) * span).astype(np.int64)
        keep = (span > 0) & (origin >= 0)
        return series[keep], origin[keep], steps[keep]

    def _predict_modelled(
        self, modelled: list[int], horizon: int, levels: Sequence[float]
    ) -> dict[int, FloatArray]:
        panel = Panel.build([self._members[i].history.series for i in modelled])
        count = len(modelled)
        series = np.repeat(np.arange(count, dtype=np.int64), horizon)
        steps = np.tile(np.arange(1, horizon + 1, dtype=np.int64), count)
        origin = panel.lengths[series] - 1
        x, level, scale = features(panel, series, origin, steps)
        point = self._booster.predict(x) * scale + self._base(panel, series, origin, level)
        assert self._conformal is not None
        offsets = self._conformal.offsets(horizon, levels)
        spread = np.array([self._members[i].spread for i in modelled])
        width = scale.reshape(count, horizon) * spread[:, None]
        table = point.reshape(count, horizon)[:, :, None] + (
            width[:, :, None] * offsets[None, :, :]
        )
        return {i: table[k] for k, i in enumerate(modelled)}


def series_spread(series: IntArray, scores: FloatArray, count: int, prior: float) -> FloatArray:
    """Each series' mean absolute calibration score over the pooled one, shrunk towards 1 as
    if `prior` pooled scores were added (a series with few scores keeps the pooled width)."""
    finite = np.isfinite(scores)
    size = np.abs(np.where(finite, scores, 0.0))
    pooled = float(size[finite].mean()) if finite.any() else 1.0
    if pooled <= 0:
        return np.ones(count)
    total = np.bincount(series, weights=size, minlength=count)
    n = np.bincount(series, weights=finite.astype(np.float64), minlength=count)
    return np.asarray((total + prior * pooled) / (n + prior) / pooled, dtype=np.float64)
