"""Turning events and raw samples into regular windows (the arithmetic every target shares)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from voltpack.model.errors import ForecastError

FloatArray = NDArray[np.float64]

SECONDS_PER_DAY = 86_400.0
SECONDS_PER_WEEK = 7 * SECONDS_PER_DAY


def step_label(step_s: float) -> str:
    """A window length as it appears in a series name: 10min, 1h, 1s."""
    if step_s % 3600 == 0:
        return f"{int(step_s // 3600)}h"
    if step_s % 60 == 0:
        return f"{int(step_s // 60)}min"
    return f"{step_s:g}s"


def seasons_for(step_s: float, length: int) -> tuple[int, ...]:
    """The daily and weekly periods in steps that a series of `length` samples shows at least
    twice (a model cannot learn a season it has seen fewer than two times)."""
    seasons = []
    for period_s in (SECONDS_PER_DAY, SECONDS_PER_WEEK):
        steps = period_s / step_s
        if steps.is_integer() and steps >= 2 and length >= 2 * steps:
            seasons.append(int(steps))
    return tuple(seasons)


def window_count(start_s: float, end_s: float, step_s: float) -> int:
    """Number of whole windows of `step_s` from `start_s` that end by `end_s` (at least 1 when
    any time is covered, so a short input still yields its partial first window)."""
    return max(1, math.floor((end_s - start_s) / step_s + 1e-9))


def alive_mean(
    begin_s: FloatArray, end_s: FloatArray, weight: FloatArray, start_s: float, step_s: float,
    windows: int,
) -> FloatArray:  # fmt: skip
    """Time-average over each window of the summed `weight` of intervals alive in it.

    Interval i counts `weight[i]` from `begin_s[i]` (inclusive) to `end_s[i]` (exclusive).
    Exact: the cumulative integral F(t) = sum_i w_i (max(0, t - b_i) - max(0, t - e_i)) is
    evaluated at the window edges with sorted prefix sums, and each window is
    (F(right) - F(left)) / step.
    """
    if np.any(end_s < begin_s):
        raise ForecastError("an interval ends before it begins")
    edges = start_s + step_s * np.arange(windows + 1, dtype=np.float64)
    integral = _ramp_sum(begin_s, weight, edges) - _ramp_sum(end_s, weight, edges)
    mean = np.diff(integral) / step_s
    if np.all(weight >= 0):  # then only round-off can make a window negative
        mean = np.maximum(mean, 0.0)
    return np.asarray(mean, dtype=np.float64)


def _ramp_sum(points: FloatArray, weight: FloatArray, at: FloatArray) -> FloatArray:
    """sum_i weight_i * max(0, at - points_i) for every value of `at`."""
    order = np.argsort(points, kind="stable")
    sorted_points, sorted_weight = points[order], weight[order]
    cum_weight = np.concatenate([[0.0], np.cumsum(sorted_weight)])
    cum_moment = np.concatenate([[0.0], np.cumsum(sorted_weight * sorted_points)])
    before = np.searchsorted(sorted_points, at, side="right")
    return np.asarray(at * cum_weight[before] - cum_moment[before], dtype=np.float64)


def sampling_interval_s(time_s: FloatArray) -> float:
    """The sampling period of a metric: the median gap between its distinct timestamps."""
    distinct = np.unique(time_s)
    if distinct.size < 2:
        raise ForecastError("need at least two distinct sample times to infer the interval")
    return float(np.median(np.diff(distinct)))


def window_sums(
    time_s: FloatArray, value: FloatArray, start_s: float, step_s: float, windows: int
) -> FloatArray:
    """Sum of `value` over the samples whose time falls in each window."""
    index = np.floor((time_s - start_s) / step_s).astype(np.int64)
    inside = (index >= 0) & (index < windows)
    return np.bincount(index[inside], weights=value[inside], minlength=windows).astype(np.float64)


def instant_means(
    time_s: FloatArray, value: FloatArray, start_s: float, step_s: float, windows: int
) -> FloatArray:
    """Per window, the mean over its distinct sample instants of the sum of `value` at each
    instant (e.g. the power of all pods at one scrape, averaged over the window's scrapes);
    NaN for a window without any sample."""
    instants, inverse = np.unique(time_s, return_inverse=True)
    per_instant = np.bincount(inverse, weights=value).astype(np.float64)
    sums = window_sums(instants, per_instant, start_s, step_s, windows)
    counts = window_sums(instants, np.ones_like(instants), start_s, step_s, windows)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.where(counts > 0, counts, 1.0), np.nan)
