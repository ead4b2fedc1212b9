"""voltpack's `auto` model: per series, the candidate that best forecast its own recent past.

Candidates are registry models (default: `naive`, `seasonal_naive`, `ets`, `global_gbm`). Each
is fitted on every history without its tail (the head keeps at least `min_fit_samples`
samples, or half of a shorter history), then walked through the tail: at up to `origins`
forecast origins it predicts the validation horizon (`max_horizon`, or an eighth of a shorter
history) at the quantile levels `VALIDATION_LEVELS`, then takes the samples up to the next
origin (half a validation horizon later) with `update` (no re-estimation). A candidate's
validation loss on a series is its mean pinball loss over those forecasts (every level, every
step ahead), so it judges the whole distribution, not only the median.

Each series is forecast by the first candidate in the list (the simplest) whose loss is within
one standard error of the lowest (the standard error of the best candidate's mean over the
origins): a more complex model must beat a simpler one by more than the validation's own
noise. The chosen candidate is then re-fitted on the series' whole history (with `refit`, the
default; its parameters then also reflect the most recent data); without `refit`, or when the
re-fit fails (noted), the walked model serves, which has seen the whole history through
`update`. The forecast's notes name the choice and every candidate's loss.

With `rescale` (off by default: on the benchmark it did not help; docs/forecast.md), the
chosen candidate's intervals are then re-scaled: every
quantile's distance from the median is multiplied by a factor per level that made the
candidate's own walk forecasts cover as nominal (`width_calibration.py`). The candidate keeps
its shape over the horizon and its scale; only a systematic over- or under-coverage on the
series' most recent data is corrected, e.g. ETS's Gaussian intervals after the series has
become calmer than its fitting window. The notes give the factors.

Fallbacks (named in the notes): a history too short for `tail_walk.MIN_ORIGINS` origins is not
validated and uses the first candidate; a candidate that raises `ForecastError` on the batch
is left out. Bad histories go through `history.clean_history` first (a clear error, or the
documented gap filling).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from voltpack.forecast.history import CleanHistory, clean_history, finalize_quantiles
from voltpack.forecast.metrics import mean_pinball_loss
from voltpack.forecast.models.tail_walk import TailPlan, heads, plan_tail, tail_steps, two_seasons
from voltpack.forecast.protocol import BatchForecaster
from voltpack.forecast.series import FloatArray, QuantileForecast, TimeSeries, check_quantiles
from voltpack.forecast.single_from_batch import SingleFromBatch
from voltpack.forecast.width_calibration import MEDIAN, RatioScores, WidthCalibration
from voltpack.model.errors import ForecastError

VALIDATION_LEVELS = (0.01, 0.1, 0.5, 0.9, 0.99)
DEFAULT_CANDIDATES = ("naive", "seasonal_naive", "ets", "global_gbm")


@dataclass(frozen=True)
class _Serving:
    """The models that forecast the series that chose one candidate (`members`): `median`
    forecasts the series of `median_batch` in order; `walked`, when set, the series of
    `walked_batch` (it gives the re-scaled widths)."""

    members: list[int]
    median: BatchForecaster
    median_batch: list[int]
    walked: BatchForecaster | None
    walked_batch: list[int]

    def models(self) -> list[tuple[BatchForecaster, list[int]]]:
        """Every model with the series it holds, in order."""
        own = [(self.median, self.median_batch)]
        return own + ([(self.walked, self.walked_batch)] if self.walked is not None else [])

    def predict(
        self, horizon: int, levels: Sequence[float], walked: bool = False
    ) -> dict[int, QuantileForecast]:
        """Forecasts of the median model (or of the walked one: empty without it), by series."""
        model, batch = (
            (self.walked, self.walked_batch) if walked else (self.median, self.median_batch)
        )
        if model is None:
            return {}
        return dict(zip(batch, model.predict_many(horizon, levels), strict=True))


class TailSelect(SingleFromBatch):
    """Per-series choice among candidate models by pinball loss on the history's own tail."""

    name = "auto"

    def __init__(
        self,
        factory: Callable[[str, dict[str, Any]], BatchForecaster],
        candidates: Sequence[str] = DEFAULT_CANDIDATES,
        max_horizon: int = 48,
        origins: int = 16,
        min_fit_samples: int = 200,
        candidate_params: dict[str, dict[str, Any]] | None = None,
        refit: bool = True,
        rescale: bool = False,
        max_gap_steps: int | None = None,
    ) -> None:
        if not candidates or "auto" in candidates:
            raise ForecastError("auto needs at least one candidate, and not itself")
        if max_horizon < 1 or origins < 0:
            raise ForecastError("max_horizon must be >= 1 and origins >= 0")
        self._factory = factory  # name, parameters -> model (the registry's make_forecaster)
        self.candidates = tuple(candidates)
        self.max_horizon = max_horizon
        self.origins = origins
        self.min_fit_samples = min_fit_samples
        self.candidate_params = dict(candidate_params or {})
        self.refit = refit
        self.rescale = rescale
        self.max_gap_steps = max_gap_steps
        # per chosen candidate: the models serving its series (`_Serving`)
        self._serving: list[_Serving] = []
        self._chosen: list[str] = []
        self._notes: list[tuple[str, ...]] = []
        self._widths: list[WidthCalibration | None] = []
        self._nonnegative: list[bool] = []

    # --- many series at once ---------------------------------------------------------------
    def fit_many(self, histories: Sequence[TimeSeries]) -> None:
        """Walk every candidate through every history's tail and choose one per series."""
        if not histories:
            raise ForecastError(f"{self.name}: fit_many needs at least one series")
        cleaned = [clean_history(s, self.max_gap_steps) for s in histories]
        plans = [self._plan(c) for c in cleaned]
        losses: dict[str, list[FloatArray]] = {}
        widths: dict[str, list[WidthCalibration | None]] = {}
        models: dict[str, BatchForecaster] = {}
        dropped: list[str] = []
        for name in self.candidates:
            model = self._make(name)
            try:
                losses[name], widths[name] = self._walk(model, cleaned, plans)
            except ForecastError as exc:
                dropped.append(f"{name} left out: {exc}")
                continue
            models[name] = model
        if not models:
            raise ForecastError(f"{self.name}: every candidate failed: {'; '.join(dropped)}")
        self._chosen, self._notes, self._widths = [], [], []
        self._nonnegative = [c.series.nonnegative for c in cleaned]
        for i, clean in enumerate(cleaned):
            chosen, note = self._choose(i, plans[i].origins, losses, list(models))
            width = widths[chosen][i] if plans[i].origins else None
            if width is not None and not width.changes:
                width = None
            rescaled = () if width is None else (f"intervals re-scaled: {width.describe()}",)
            self._chosen.append(chosen)
            self._widths.append(width)
            self._notes.append((*clean.notes, *dropped, note, *rescaled))
        self._serving = []
        for name in dict.fromkeys(self._chosen):
            members = [i for i, chosen in enumerate(self._chosen) if chosen == name]
            self._serving.append(self._final(name, models[name], cleaned, members))

    def update_many(self, new_values: Sequence[FloatArray]) -> None:
        """Append new samples to each series in the models serving it (no re-estimation)."""
        self.check_update_count(len(new_values), len(self._chosen))
        for serving in self._serving:
            for model, batch in serving.models():
                model.update_many([new_values[i] for i in batch])

    def predict_many(self, horizon: int, quantiles: Sequence[float]) -> list[QuantileForecast]:
        """Each series' forecast from its chosen candidate, its intervals re-scaled (with
        `rescale`), relabelled `auto`."""
        if not self._chosen:
            raise ForecastError(f"{self.name}: predict called before fit")
        levels = check_quantiles(quantiles)
        with_median = check_quantiles((*levels, MEDIAN))
        keep = [with_median.index(q) for q in levels]
        out: dict[int, QuantileForecast] = {}
        for serving in self._serving:
            forecasts = serving.predict(horizon, with_median)
            walked = serving.predict(horizon, with_median, walked=True)
            for i in serving.members:
                inner, width = forecasts[i], self._widths[i]
                values = inner.values
                if width is not None:  # the walked model's distances, re-scaled, on the median
                    own = walked[i].values if walked else values
                    values = width.apply(
                        own, with_median, onto=values[:, with_median.index(MEDIAN)]
                    )
                values = finalize_quantiles(inner.series, values[:, keep], self._nonnegative[i])
                notes = tuple(dict.fromkeys((*self._notes[i], *inner.notes)))
                out[i] = replace(inner, model=self.name, quantiles=levels, values=values,
                                 notes=notes)  # fmt: skip
        return [out[i] for i in range(len(self._chosen))]

    def _final(
        self, name: str, walked: BatchForecaster, cleaned: list[CleanHistory], members: list[int]
    ) -> _Serving:
        """The models that serve `members`: `name` re-fitted on their whole histories (its
        parameters then come from the most recent data too) for the median, and the walked
        model (fitted on the heads, updated through the tails) for the re-scaled widths, whose
        factors were measured on it; with `refit` off or when the re-fit fails, the walked
        model alone."""
        everyone = list(range(len(cleaned)))
        rescaled = any(self._widths[i] is not None for i in members)
        if self.refit:
            model = self._make(name)
            try:
                model.fit_many([cleaned[i].series for i in members])
            except ForecastError as exc:
                for i in members:
                    self._notes[i] = (*self._notes[i], f"re-fit failed, walked model kept: {exc}")
            else:
                return _Serving(members, model, members, walked if rescaled else None, everyone)
        return _Serving(members, walked, everyone, None, everyone)

    # --- internals ---------------------------------------------------------------------------
    def _make(self, name: str) -> BatchForecaster:
        params = {"max_gap_steps": self.max_gap_steps, **self.candidate_params.get(name, {})}
        if name in ("naive", "seasonal_naive", "global_gbm"):
            params.setdefault("max_horizon", self.max_horizon)
        return self._factory(name, params)

    def _plan(self, history: CleanHistory) -> TailPlan:
        """Validation horizon, stride and origins for one history."""
        return plan_tail(len(history.values), self.max_horizon, self.origins,
                         self.min_fit_samples, min_head=two_seasons(history))  # fmt: skip

    def _walk(
        self, model: BatchForecaster, cleaned: list[CleanHistory], plans: list[TailPlan]
    ) -> tuple[list[FloatArray], list[WidthCalibration | None]]:
        """Fit `model` on the heads, walk it through the tails: pinball per origin per series,
        and, with `rescale`, each series' width calibration from the same forecasts."""
        model.fit_many(heads(cleaned, plans))
        losses: list[list[float]] = [[] for _ in cleaned]
        ratios = [RatioScores(VALIDATION_LEVELS) if self.rescale else None for _ in cleaned]
        horizon = max(p.horizon for p in plans)
        for step in tail_steps(cleaned, plans):
            forecasts = model.predict_many(horizon, VALIDATION_LEVELS)
            for i, actual in step.ahead.items():
                table = forecasts[i].values[: actual.size]
                losses[i].append(mean_pinball_loss(actual, table, VALIDATION_LEVELS))
                gathered = ratios[i]
                if gathered is not None:
                    gathered.add(actual, table)
            model.update_many(step.updates)
        return [np.array(own, dtype=np.float64) for own in losses], [
            None if r is None else r.calibration() for r in ratios
        ]

    def _choose(
        self, series: int, origins: int, losses: dict[str, list[FloatArray]], usable: list[str]
    ) -> tuple[str, str]:
        """The simplest candidate within one standard error of the best, and why."""
        first = usable[0]
        if origins == 0:
            return first, f"auto: {first} (history too short to validate)"
        per_origin = {
            name: own[series]
            for name, own in losses.items()
            if own[series].size and np.isfinite(own[series]).all()
        }
        if not per_origin:
            return first, f"auto: {first} (no candidate could be validated)"
        mean = {name: float(own.mean()) for name, own in per_origin.items()}
        best = min(mean, key=lambda name: mean[name])
        errors = per_origin[best]
        bound = mean[best] + float(errors.std(ddof=1)) / np.sqrt(errors.size)
        chosen = next(name for name in mean if mean[name] <= bound)
        detail = ", ".join(f"{name} {loss:.4g}" for name, loss in mean.items())
        return chosen, f"auto: {chosen} (validation pinball, last {origins} origins: {detail})"
