"""Synthetic hourly series with a daily pattern, shared by the forecast model tests."""

from __future__ import annotations

import numpy as np

from voltpack.forecast.series import TimeSeries

SEASON = 24


def pattern(length: int, phase: int = 0) -> np.ndarray:
    steps = np.arange(length) + phase
    return 50.0 + 20.0 * np.sin(2 * np.pi * steps / SEASON) + 8.0 * (steps % SEASON < 3)


def noisy(seed: int, length: int = 24 * 40, noise: float = 2.0) -> TimeSeries:
    rng = np.random.default_rng(seed)
    values = pattern(length, phase=seed) + rng.normal(0.0, noise, length)
    return TimeSeries(f"synthetic/{seed}", "power", 3600.0, 0.0, values, "watts", (SEASON,))
