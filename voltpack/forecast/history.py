"""Validate and clean a history before any model sees it, and make every forecast safe.

What `clean_history` does, in order (each step that changes something adds a note):

1. Infinite values are treated as missing samples (NaN).
2. A `nonnegative` series with a value below zero raises `ForecastError` naming the series and
   the first bad index (values above -1e-9 are float noise and are clipped to 0).
3. Fewer than 2 finite samples raises `ForecastError`.
4. Missing samples before the first finite one are dropped (the history starts later).
5. Every other run of missing samples no longer than `max_gap_steps` is filled: seasonally
   when a full season before the gap is known (the previous season's values, shifted by a
   linear ramp so both edges of the gap join up), otherwise by linear interpolation (a gap at
   the end: the previous season plus the last level shift, else the last value). A longer run
   raises `ForecastError`. The default limit is the shortest season, at least 12 samples.
6. A history whose values are all equal is flagged `constant`: models then forecast that value
   with a zero-width interval (note "constant history").

`finalize_quantiles` is the last step of every model: it rejects non-finite output, sorts each
row so quantiles never cross, and clips a nonnegative series at 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voltpack.forecast.series import FloatArray, TimeSeries
from voltpack.model.errors import ForecastError

MIN_GAP_LIMIT_STEPS = 12
NEGATIVE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class CleanHistory:
    """A history with only finite values, ready for a model."""

    series: TimeSeries
    notes: tuple[str, ...]
    constant: bool

    @property
    def values(self) -> FloatArray:
        return self.series.values


def default_gap_limit_steps(series: TimeSeries) -> int:
    """Longest run of missing samples that is filled rather than rejected."""
    return max(min(series.seasons, default=0), MIN_GAP_LIMIT_STEPS)


def clean_history(series: TimeSeries, max_gap_steps: int | None = None) -> CleanHistory:
    """Check `series` and fill its gaps (see the module docstring for the rules)."""
    values = np.array(series.values, dtype=np.float64)
    notes: list[str] = []
    infinite = np.isinf(values)
    if infinite.any():
        values[infinite] = np.nan
        notes.append(f"{int(infinite.sum())} infinite values treated as missing")
    if series.nonnegative:
        _reject_negative(series.name, values)
        values = np.where(values < 0, 0.0, values)
    finite = np.isfinite(values)
    if int(finite.sum()) < 2:
        raise ForecastError(
            f"series {series.name}: {int(finite.sum())} finite samples out of {values.size}; "
            "a forecast needs at least 2"
        )
    first = int(np.argmax(finite))
    if first > 0:
        notes.append(f"{first} leading missing samples dropped")
        values = values[first:]
    limit = default_gap_limit_steps(series) if max_gap_steps is None else max_gap_steps
    filled = _fill_gaps(series.name, values, min(series.seasons, default=0), limit, first)
    if filled:
        notes.append(f"{filled} missing samples filled")
    if series.nonnegative:
        values = np.maximum(values, 0.0)
    span = float(values.max() - values.min())
    constant = span <= 1e-12 * max(1.0, float(np.abs(values).max()))
    if constant:
        notes.append("constant history")
    cleaned = TimeSeries(
        series.name, series.family, series.step_s, series.time_s(first), values, series.unit,
        series.seasons, series.nonnegative,
    )  # fmt: skip
    return CleanHistory(cleaned, tuple(notes), constant)


def _reject_negative(name: str, values: FloatArray) -> None:
    bad = np.flatnonzero(values < -NEGATIVE_TOLERANCE)
    if bad.size:
        index = int(bad[0])
        raise ForecastError(
            f"series {name}: negative value {values[index]:g} at index {index} "
            f"({bad.size} negative samples) in a nonnegative series; fix the data or build the "
            "series with nonnegative=False"
        )


def _fill_gaps(name: str, values: FloatArray, season: int, limit: int, offset: int) -> int:
    """Fill runs of NaN in place (left to right, so a filled gap can seed a later one)."""
    missing = np.isnan(values)
    if not missing.any():
        return 0
    edges = np.diff(np.concatenate(([0], missing.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        if end - start > limit:
            raise ForecastError(
                f"series {name}: {end - start} missing samples in a row from index "
                f"{start + offset}, more than the {limit} that are filled; pass a larger "
                "max_gap_steps or forecast from after the gap"
            )
        _fill_one(values, start, end, season)
    return int(missing.sum())


def _fill_one(values: FloatArray, start: int, end: int, season: int) -> None:
    before = values[start - 1]
    at_end = end == values.size
    seasonal = season > end - start and start - 1 - season >= 0
    if seasonal:
        pattern = values[start - season : end - season]
        shift_start = before - values[start - 1 - season]
        shift_end = shift_start if at_end else values[end] - values[end - season]
        ramp = np.linspace(shift_start, shift_end, end - start + 2)[1:-1]
        values[start:end] = pattern + ramp
    elif at_end:
        values[start:end] = before
    else:
        values[start:end] = np.linspace(before, values[end], end - start + 2)[1:-1]


def finalize_quantiles(name: str, values: FloatArray, nonnegative: bool) -> FloatArray:
    """Sorted along quantiles, clipped at 0 when nonnegative; `ForecastError` if not finite."""
    if not np.isfinite(values).all():
        raise ForecastError(f"series {name}: the model produced a non-finite forecast")
    ordered = np.sort(values, axis=1)
    return np.maximum(ordered, 0.0) if nonnegative else ordered
