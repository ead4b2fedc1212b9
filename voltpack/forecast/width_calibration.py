"""Re-scaling a model's own quantiles so they cover as nominal on data it was not fitted on.

A model's quantile `q` at a step ahead sits at some distance from its median. On validation
forecasts (a walk through the end of the history, `tail_walk.py`) each actual sample gives a
*ratio* `r = (actual - median) / (quantile_q - median)`: the model's quantile was right where
`r <= 1` as often as the level says (`q` of the time above the median, `1 - q` below). The
*factor* of level `q` is the finite-sample conformal quantile of the ratios at level
`max(q, 1 - q)` (`conformal.conformal_quantile`): multiplying every distance from the median by
it makes the validation forecasts cover as nominal, so the new intervals keep the model's own
shape over the horizon (wider further ahead) and its own scale (a quiet series stays narrow),
and only their overall width is corrected. This is normalised split conformal prediction with
the model's own width as the normaliser (Lei et al., 2018, "Distribution-free predictive
inference for regression", section 5.2), applied per quantile level as in conformalized
quantile regression (Romano et al., 2019).

Ratios are pooled over every step ahead of the walk. Where the model's quantile is (almost)
its median (a zero-width interval, as the naive rule gives on a flat series; a width under a
thousandth of the level's median width counts as zero) no ratio is formed; non-finite ratios
are dropped. A level keeps factor 1 (the model's own quantile) when fewer than half of its
samples give a ratio, or when the ratios are too few for its conformal rank
(`ceil((n + 1) level) > n`, e.g. fewer than 99 ratios at 0.99). Factors are held within
[`MIN_FACTOR`, `MAX_FACTOR`]: a walk that asks for more than a tenfold change says more about
itself than about the future.

The factors belong to the model whose walk they were measured on: apply them to that model's
distances from its median (the `auto` model does, even when its median comes from a re-fit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from voltpack.forecast.conformal import conformal_quantile, has_rank
from voltpack.forecast.series import FloatArray
from voltpack.model.errors import ForecastError

MEDIAN = 0.5
MIN_RATIO_SHARE = 0.5  # a level needs a ratio from at least half of its samples
ZERO_WIDTH_SHARE = 1e-3  # a width under this share of the level's median width counts as zero
MIN_FACTOR, MAX_FACTOR = 0.1, 10.0


@dataclass
class RatioScores:
    """Ratios gathered from one series' validation forecasts, per quantile level."""

    levels: tuple[float, ...]
    ratios: dict[float, list[FloatArray]] = field(init=False, default_factory=dict)
    samples: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if MEDIAN not in self.levels:
            raise ForecastError("width calibration needs the median among the levels")
        self.ratios = {q: [] for q in self.levels if q != MEDIAN}

    def add(self, actual: FloatArray, table: FloatArray) -> None:
        """One forecast: `actual[h]` against `table[h, j]` (quantile `levels[j]`, h ahead)."""
        steps = min(actual.size, table.shape[0])
        actual, table = actual[:steps], table[:steps]
        median = table[:, self.levels.index(MEDIAN)]
        for j, q in enumerate(self.levels):
            if q == MEDIAN:
                continue
            width = table[:, j] - median
            size = np.abs(width[np.isfinite(width)])
            tiny = ZERO_WIDTH_SHARE * float(np.median(size)) if size.size else 0.0
            usable = np.isfinite(width) & (np.abs(width) > max(tiny, 1e-12))
            with np.errstate(invalid="ignore"):
                ratio = (actual[usable] - median[usable]) / width[usable]
            self.ratios[q].append(ratio[np.isfinite(ratio)])
        self.samples += steps

    def calibration(self) -> WidthCalibration:
        """The factor of every level: 1.0 where the ratios are too few (see the module)."""
        factors: dict[float, float] = {}
        for q, parts in self.ratios.items():
            ratios = np.sort(np.concatenate(parts)) if parts else np.empty(0)
            level = max(q, 1.0 - q)
            factors[q] = 1.0
            if ratios.size >= MIN_RATIO_SHARE * self.samples and has_rank(ratios.size, level):
                factor = conformal_quantile(ratios, level)
                factors[q] = float(np.clip(factor, MIN_FACTOR, MAX_FACTOR))
        return WidthCalibration(factors)


@dataclass(frozen=True)
class WidthCalibration:
    """Factor on the distance from the median, per validated quantile level."""

    factors: dict[float, float]

    def factor(self, level: float) -> float:
        """The factor of `level`: interpolated in the level between validated levels on its
        side of the median, the nearest validated one beyond them, 1.0 with none."""
        side = sorted(q for q in self.factors if (q > MEDIAN) == (level > MEDIAN))
        if level == MEDIAN or not side:
            return 1.0
        return float(np.interp(level, side, [self.factors[q] for q in side]))

    def apply(
        self, values: FloatArray, quantiles: Sequence[float], onto: FloatArray | None = None
    ) -> FloatArray:
        """`values[h, j]` (quantile `quantiles[j]`, which include the median) re-scaled: each
        distance from their median times its level's factor, laid on `onto[h]` (another
        model's median; by default their own)."""
        if MEDIAN not in quantiles:
            raise ForecastError("re-scaling quantiles needs the median among them")
        median = values[:, list(quantiles).index(MEDIAN)]
        centre = median if onto is None else onto
        factors = np.array([self.factor(q) for q in quantiles])
        return centre[:, None] + factors[None, :] * (values - median[:, None])

    @property
    def changes(self) -> bool:
        """Whether any level is re-scaled."""
        return any(f != 1.0 for f in self.factors.values())

    def describe(self) -> str:
        """E.g. "0.1 x0.62, 0.9 x0.55"; "none" when no level was re-scaled."""
        parts = [f"{q:g} x{f:.2f}" for q, f in sorted(self.factors.items())]
        return ", ".join(parts) if self.changes else "none"
