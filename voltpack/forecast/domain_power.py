"""A power domain's recorded power roll-ups -> a quantile forecast and the headroom it leaves.

The operator records each domain's power rolled up per time bucket; the peak of each bucket
(`max_w`) is the series forecast, because a budget is broken by peaks, not by means. Missing
buckets become gaps (NaN), which the forecaster's history checks fill or refuse. The admin API
(`GET /v1/power/domains/{name}/forecast`) and the operator's power loop (the headroom the
scheduler sees) both forecast through `forecast_domain_power`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from voltpack.forecast.default_model import DEFAULT_MODEL
from voltpack.forecast.headroom import PowerHeadroom, power_headroom
from voltpack.forecast.history import MIN_GAP_LIMIT_STEPS
from voltpack.forecast.registry import make_forecaster
from voltpack.forecast.series import QuantileForecast, TimeSeries
from voltpack.model.errors import ForecastError

DAY_S = 86_400.0
BASE_LEVELS = (0.1, 0.5, 0.9)
"""Quantile levels every power forecast carries, besides the one asked for."""


class PowerRollup(Protocol):
    """One bucket of a domain's recorded power (the store's `PowerBucket` is one)."""

    @property
    def bucket_start_s(self) -> float: ...
    @property
    def bucket_s(self) -> float: ...
    @property
    def max_w(self) -> float: ...
    @property
    def budget_w(self) -> float | None: ...


@dataclass(frozen=True)
class DomainPowerForecast:
    """A domain's power forecast and its headroom under the budget."""

    model: str
    forecast: QuantileForecast
    headroom: PowerHeadroom


def power_series(domain: str, rollups: Sequence[PowerRollup]) -> TimeSeries:
    """The peak power per bucket on a regular grid (gaps as NaN), with a daily season when the
    history holds two days. History before a gap too long to fill (an outage: longer than a
    day, or than `MIN_GAP_LIMIT_STEPS` buckets when what follows holds no daily season) is left
    out: the series starts after the last such gap."""
    if not rollups:
        raise ForecastError(f"domain {domain}: no power history is stored yet")
    count = len(rollups)
    starts_s = np.fromiter((r.bucket_start_s for r in rollups), np.float64, count)
    peaks_w = np.fromiter((r.max_w for r in rollups), np.float64, count)
    step_s = float(np.median(np.fromiter((r.bucket_s for r in rollups), np.float64, count)))
    start_s = float(starts_s[0])
    length = round((float(starts_s[-1]) - start_s) / step_s) + 1
    values = np.full(length, np.nan)
    indices = np.rint((starts_s - start_s) / step_s).astype(np.int64)  # half to even, as round
    inside = (indices >= 0) & (indices < length)
    np.fmax.at(values, indices[inside], peaks_w[inside])  # the peak of buckets on one slot
    day = round(DAY_S / step_s)
    first = _after_last_long_gap(values, max(day, MIN_GAP_LIMIT_STEPS))
    if not (day >= 2 and values.size - first >= 2 * day):  # no season: shorter gaps are too long
        first = max(first, _after_last_long_gap(values, MIN_GAP_LIMIT_STEPS))
    values, start_s = values[first:], start_s + first * step_s
    seasons = (day,) if day >= 2 and values.size >= 2 * day else ()
    return TimeSeries(
        name=f"power/{domain}", family="power", step_s=step_s, start_s=start_s,
        values=values, unit="watts", seasons=seasons,
    )  # fmt: skip


def _after_last_long_gap(values: NDArray[np.float64], limit_steps: int) -> int:
    """Index just past the last run of more than `limit_steps` NaN (0 when there is none)."""
    missing = np.concatenate(([0], np.isnan(values).astype(np.int8), [0]))
    edges = np.diff(missing)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    long_runs = ends[(ends - starts) > limit_steps]
    return int(long_runs[-1]) if long_runs.size else 0


def history_age_s(domain: str, rollups: Sequence[PowerRollup], now_s: float) -> float:
    """Seconds from the end of the newest recorded bucket to `now_s` (0 if it is not over)."""
    if not rollups:
        raise ForecastError(f"domain {domain}: no power history is stored yet")
    newest = rollups[-1]
    return max(0.0, now_s - (newest.bucket_start_s + newest.bucket_s))


def latest_budget_w(domain: str, rollups: Sequence[PowerRollup]) -> float:
    """The newest budget recorded with the roll-ups."""
    budgets = [r.budget_w for r in rollups if r.budget_w]
    if not budgets:
        raise ForecastError(f"budget_w: domain {domain} has no stored budget; pass budget_w")
    return float(budgets[-1])


def forecast_domain_power(
    domain: str,
    rollups: Sequence[PowerRollup],
    *,
    horizon_s: float,
    level: float,
    budget_w: float | None = None,
    model: str = DEFAULT_MODEL,
) -> DomainPowerForecast:
    """Forecast `domain`'s peak power `horizon_s` ahead and the headroom the `level` quantile
    leaves under its budget (the newest recorded budget unless `budget_w` is given)."""
    history = power_series(domain, rollups)
    if budget_w is None:
        budget_w = latest_budget_w(domain, rollups)
    steps = max(1, math.ceil(horizon_s / history.step_s))
    levels = sorted({*BASE_LEVELS, level})
    forecaster = make_forecaster(model)
    forecaster.fit_many([history])
    (forecast,) = forecaster.predict_many(steps, levels)
    headroom = power_headroom(forecast, domain, budget_w, level=level)
    return DomainPowerForecast(model, forecast, headroom)
