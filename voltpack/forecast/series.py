"""The two value types every forecaster speaks: a regular history and a quantile forecast."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from voltpack.model.errors import ForecastError

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class TimeSeries:
    """A regularly sampled history: `values[i]` is the mean (or count) over
    `[start_s + i * step_s, start_s + (i + 1) * step_s)`; NaN marks a missing sample."""

    name: str  # e.g. "openb/gpu_demand/A100/10min"
    family: str  # "gpu_demand" | "request_rate" | "power" (what the benchmark groups by)
    step_s: float
    start_s: float
    values: FloatArray
    unit: str  # "gpus", "requests_per_s", "watts"
    seasons: tuple[int, ...] = ()  # seasonal periods in steps, e.g. (144, 1008) at 10 minutes
    nonnegative: bool = True  # counts, rates and power cannot go below zero

    def __post_init__(self) -> None:
        if self.step_s <= 0 or not np.isfinite(self.step_s):
            raise ForecastError(f"series {self.name}: step_s must be > 0, got {self.step_s}")
        values = np.asarray(self.values, dtype=np.float64)
        if values.ndim != 1:
            raise ForecastError(f"series {self.name}: values must be one-dimensional")
        object.__setattr__(self, "values", values)
        if any(s < 2 for s in self.seasons):
            raise ForecastError(f"series {self.name}: seasons must be >= 2 steps: {self.seasons}")

    def __len__(self) -> int:
        return int(self.values.size)

    def time_s(self, index: int) -> float:
        """Start of sample `index` (may be past the end: a forecast's steps)."""
        return self.start_s + index * self.step_s

    def appended(self, new_values: FloatArray) -> TimeSeries:
        """This series with `new_values` observed after its last sample."""
        merged = np.concatenate((self.values, np.asarray(new_values, dtype=np.float64)))
        return TimeSeries(
            self.name, self.family, self.step_s, self.start_s, merged,
            self.unit, self.seasons, self.nonnegative,
        )  # fmt: skip

    def head(self, length: int) -> TimeSeries:
        """The first `length` samples (a backtest's training window)."""
        return TimeSeries(
            self.name, self.family, self.step_s, self.start_s, self.values[:length],
            self.unit, self.seasons, self.nonnegative,
        )  # fmt: skip


@dataclass(frozen=True)
class QuantileForecast:
    """Quantiles of the next `horizon` samples after a history.

    `values[h, j]` is quantile `quantiles[j]` of sample `h` ahead (h = 0 is the first sample
    after the history), non-decreasing in j; `notes` says which fallback, if any, made it.
    """

    series: str
    model: str
    start_s: float
    step_s: float
    quantiles: tuple[float, ...]
    values: FloatArray
    notes: tuple[str, ...] = field(default=())

    @property
    def horizon(self) -> int:
        return int(self.values.shape[0])

    def quantile(self, level: float) -> FloatArray:
        """The forecast of one quantile level that was asked for, over the horizon."""
        for j, q in enumerate(self.quantiles):
            if abs(q - level) < 1e-9:
                return self.values[:, j]
        raise ForecastError(f"forecast of {self.series}: quantile {level} was not predicted; "
                            f"available: {list(self.quantiles)}")  # fmt: skip


def check_quantiles(levels: Sequence[float]) -> tuple[float, ...]:
    """Quantile levels sorted, each strictly between 0 and 1."""
    bad = [q for q in levels if not 0.0 < q < 1.0]
    if bad or not levels:
        raise ForecastError(
            f"quantile levels must lie strictly between 0 and 1, got {list(levels)}"
        )
    return tuple(sorted(set(float(q) for q in levels)))
