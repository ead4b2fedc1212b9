"""Rolling-origin splits shared by every backtest and the benchmark (one definition)."""

from __future__ import annotations

from voltpack.model.errors import ForecastError


def rolling_origins(length: int, horizon: int, windows: int, min_train: int) -> list[int]:
    """Forecast origins (training lengths) for `windows` test windows of `horizon` samples at
    the end of a series of `length`: the last window ends at the last sample and windows do
    not overlap. Raises when the first origin would leave fewer than `min_train` samples."""
    if horizon < 1 or windows < 1:
        raise ForecastError(f"horizon and windows must be >= 1, got {horizon} and {windows}")
    first = length - windows * horizon
    if first < min_train:
        raise ForecastError(
            f"a series of {length} samples is too short for {windows} windows of {horizon} "
            f"after {min_train} training samples; use fewer windows or a shorter horizon"
        )
    return [first + k * horizon for k in range(windows)]
