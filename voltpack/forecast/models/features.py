"""Features of the global model: many series laid end to end, one row per (series, origin, h).

Every value feature is normalised at the origin: `(value - level) / scale`, where `level` is
the mean of the last `window` samples (the shortest season, else 24) and `scale` is the larger
of their standard deviation and the series' mean absolute one-step change. This makes series
of any unit and size comparable, so one model learns from all of them. Row features:

- the last `LAGS` samples before the origin;
- for each of the (up to) two shortest seasons, the last three known samples at the target's
  phase (`g - k * season` for the smallest k that lies in the history) and their mean, plus
  the change over one season at the origin;
- steps ahead, the target's phase in each season, its hour of day and day of week (from
  `start_s`, taken as seconds since a midnight), and `level / scale` (how close to zero).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from voltpack.forecast.series import FloatArray, TimeSeries

IntArray = NDArray[np.int64]
LAGS = 12
DEFAULT_WINDOW = 24
SEASON_LAGS = 3
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class Panel:
    """Histories laid end to end: series `i` is `values[offsets[i] : offsets[i] + lengths[i]]`."""

    values: FloatArray
    offsets: IntArray
    lengths: IntArray
    seasons: IntArray  # (series, 2): shortest two seasons in steps, 0 when absent
    windows: IntArray
    start_s: FloatArray
    step_s: FloatArray
    base_scale: FloatArray  # mean absolute one-step change of each history
    cumsum: FloatArray  # cumulative sums with a leading 0 (level over a window)
    cumsum_sq: FloatArray

    @classmethod
    def build(cls, histories: Sequence[TimeSeries]) -> Panel:
        """Lay out finite, cleaned histories (see `history.clean_history`)."""
        lengths = np.array([len(s) for s in histories], dtype=np.int64)
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        values = np.concatenate([s.values for s in histories]).astype(np.float64)
        seasons = np.zeros((len(histories), 2), dtype=np.int64)
        for i, series in enumerate(histories):
            chosen = sorted(series.seasons)[:2]
            seasons[i, : len(chosen)] = chosen
        windows = np.where(seasons[:, 0] > 0, seasons[:, 0], DEFAULT_WINDOW)
        base_scale = np.array(
            [float(np.mean(np.abs(np.diff(s.values)))) if len(s) > 1 else 0.0 for s in histories]
        )
        return cls(
            values, offsets, lengths, seasons, windows.astype(np.int64),
            np.array([s.start_s for s in histories]), np.array([s.step_s for s in histories]),
            base_scale, np.concatenate(([0.0], np.cumsum(values))),
            np.concatenate(([0.0], np.cumsum(values * values))),
        )  # fmt: skip

    def level_scale(self, series: IntArray, origin: IntArray) -> tuple[FloatArray, FloatArray]:
        """Level and scale at each origin (the last observed index of each row)."""
        width = np.minimum(self.windows[series], origin + 1)
        end = self.offsets[series] + origin + 1
        total = self.cumsum[end] - self.cumsum[end - width]
        total_sq = self.cumsum_sq[end] - self.cumsum_sq[end - width]
        level = total / width
        spread = np.sqrt(np.maximum(total_sq / width - level * level, 0.0))
        floor = 1e-6 * np.maximum(np.abs(level), 1.0)
        scale = np.maximum(np.maximum(spread, self.base_scale[series]), floor)
        return level, scale

    def gather(self, series: IntArray, index: IntArray) -> FloatArray:
        """`values` of each row's series at `index` (NaN where outside the history)."""
        inside = (index >= 0) & (index < self.lengths[series])
        flat = self.offsets[series] + np.where(inside, index, 0)
        return np.where(inside, self.values[flat], np.nan)


def features(
    panel: Panel, series: IntArray, origin: IntArray, steps: IntArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Feature matrix, level and scale of rows (series, origin index, steps ahead >= 1)."""
    level, scale = panel.level_scale(series, origin)
    columns: list[FloatArray] = []

    def norm(raw: FloatArray) -> FloatArray:
        return (raw - level) / scale

    for lag in range(LAGS):
        columns.append(norm(panel.gather(series, origin - lag)))
    target = origin + steps
    for which in range(2):
        season = panel.seasons[series, which]
        has = season > 0
        period = np.where(has, season, 1)
        first = period * np.ceil(steps / period).astype(np.int64)
        same_phase = [
            np.where(has, panel.gather(series, target - first - k * period), np.nan)
            for k in range(SEASON_LAGS)
        ]
        columns.extend(norm(v) for v in same_phase)
        stacked = np.vstack(same_phase)
        known = np.isfinite(stacked)
        count = known.sum(axis=0)
        mean = np.where(known, stacked, 0.0).sum(axis=0) / np.maximum(count, 1)
        columns.append(norm(np.where(count > 0, mean, np.nan)))
        change = panel.gather(series, origin) - panel.gather(series, origin - period)
        columns.append(np.where(has, change / scale, np.nan))
    columns.append(steps.astype(np.float64))
    for which in range(2):
        season = panel.seasons[series, which]
        period = np.maximum(season, 1)
        columns.append(np.where(season > 0, (target % period) / period, np.nan))
    clock_s = panel.start_s[series] + target * panel.step_s[series]
    columns.append((clock_s % SECONDS_PER_DAY) / 3600.0)
    columns.append(np.floor(clock_s / SECONDS_PER_DAY) % 7)
    columns.append(level / scale)
    return np.column_stack(columns), level, scale
