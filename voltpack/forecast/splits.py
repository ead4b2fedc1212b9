"""Rolling-origin splits shared by every backtest and the benchmark (one definition)."""

from __future__ import annotations

import numpy as np

from voltpack.model.errors import ForecastError


def rolling_origins(
    length: int, horizon: int, windows: int, min_train: int, span_fraction: float = 0.0
) -> list[int]:
    """Forecast origins (training lengths) for `windows` non-overlapping test windows of
    `horizon` samples in a series of `length`; the last window ends at the last sample.

    With `span_fraction` 0 the windows are contiguous at the end. Otherwise they are spread
    evenly from `span_fraction` of the way back from the end (but not before `min_train`), so
    the test covers more than the series' last days; when that span is no wider than the
    contiguous windows, they stay contiguous. Raises when the contiguous layout would leave
    fewer than `min_train` training samples."""
    if horizon < 1 or windows < 1:
        raise ForecastError(f"horizon and windows must be >= 1, got {horizon} and {windows}")
    if not 0.0 <= span_fraction < 1.0:
        raise ForecastError(f"span_fraction must lie in [0, 1), got {span_fraction}")
    first = length - windows * horizon
    if first < min_train:
        raise ForecastError(
            f"a series of {length} samples is too short for {windows} windows of {horizon} "
            f"after {min_train} training samples; use fewer windows or a shorter horizon"
        )
    contiguous = [first + k * horizon for k in range(windows)]
    earliest = max(min_train, int(length * (1.0 - span_fraction)))
    if windows == 1 or earliest >= first:
        return contiguous
    spread = np.linspace(earliest, length - horizon, windows)
    return [int(v) for v in np.floor(spread)]
