"""Split-conformal calibration: turn a point forecast into calibrated quantiles.

A model records *scores* on data it was not fitted on: the signed error
`(actual - point) / scale` of a forecast `h` steps ahead, where `scale` is whatever the model
uses to make series comparable (1 for a single series). Quantile `q` of the forecast is then
`point + scale * offset(q, h)`, where `offset` is the finite-sample conformal quantile of the
scores of `h`'s horizon bucket: the ceil((n+1)q)-th smallest for q > 0.5, the
floor((n+1)q)-th for q < 0.5 and the plain median for q = 0.5, so the central interval covers
at least its nominal share of exchangeable data. With too few scores for a level the extreme
score is used (the interval is then narrower than nominal). Buckets group horizons 1, 2, 3-4,
5-8, ... (log2), so each has enough scores; a horizon past the last bucket reuses it, widened
by sqrt(h / h_last).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from voltpack.forecast.series import FloatArray
from voltpack.model.errors import ForecastError

IntArray = NDArray[np.int64]


def horizon_bucket(steps_ahead: IntArray) -> IntArray:
    """Bucket of each horizon (1-based steps ahead): 1 -> 0, 2 -> 1, 3..4 -> 2, 5..8 -> 3."""
    steps = np.maximum(np.asarray(steps_ahead, dtype=np.int64), 1)
    return np.ceil(np.log2(steps)).astype(np.int64)


def _rank(count: int, level: float) -> int:
    """1-based rank of the finite-sample conformal `level` quantile among `count` scores."""
    return math.ceil((count + 1) * level) if level >= 0.5 else math.floor((count + 1) * level)


def has_rank(count: int, level: float) -> bool:
    """Whether `count` scores are enough for an exact finite-sample `level` quantile (else
    `conformal_quantile` falls back to the extreme score)."""
    return count > 0 and 1 <= _rank(count, level) <= count


def conformal_quantile(sorted_scores: FloatArray, level: float) -> float:
    """The finite-sample conformal `level` quantile of already sorted scores."""
    n = sorted_scores.size
    if n == 0:
        raise ForecastError("conformal calibration needs at least one score")
    if abs(level - 0.5) < 1e-12:
        return float(np.median(sorted_scores))
    return float(sorted_scores[min(max(_rank(n, level), 1), n) - 1])


@dataclass(frozen=True)
class HorizonConformal:
    """Sorted calibration scores per horizon bucket (bucket index -> scores)."""

    scores_by_bucket: dict[int, FloatArray]

    @classmethod
    def from_scores(cls, steps_ahead: IntArray, scores: FloatArray) -> HorizonConformal:
        """Group finite scores by the bucket of their horizon (1-based steps ahead)."""
        keep = np.isfinite(scores)
        buckets = horizon_bucket(steps_ahead[keep])
        kept = scores[keep]
        grouped = {int(b): np.sort(kept[buckets == b]) for b in np.unique(buckets)}
        if not grouped:
            raise ForecastError("conformal calibration got no finite score")
        return cls(grouped)

    def offsets(self, horizon: int, levels: Sequence[float]) -> FloatArray:
        """`offsets[h, j]`: score quantile `levels[j]` for `h + 1` steps ahead."""
        steps = np.arange(1, horizon + 1, dtype=np.int64)
        buckets = horizon_bucket(steps)
        last = max(self.scores_by_bucket)
        table = {
            b: np.array([conformal_quantile(s, q) for q in levels])
            for b, s in self.scores_by_bucket.items()
        }
        out = np.empty((horizon, len(levels)))
        for h, bucket in enumerate(buckets.tolist()):
            chosen = self._nearest(bucket)
            widen = 1.0
            if bucket > last:
                widen = math.sqrt((h + 1) / float(2**last))
            out[h] = table[chosen] * widen
        return out

    def _nearest(self, bucket: int) -> int:
        known = np.array(sorted(self.scores_by_bucket))
        return int(known[np.argmin(np.abs(known - bucket))])


def calibrated_quantiles(
    point: FloatArray, scale: float, conformal: HorizonConformal, levels: Sequence[float]
) -> FloatArray:
    """`values[h, j] = point[h] + scale * offset(levels[j], h + 1)`."""
    return point[:, None] + scale * conformal.offsets(point.size, levels)
