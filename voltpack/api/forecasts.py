"""Power forecasts for the admin API: a domain's stored power roll-ups -> quantiles and headroom.

The store keeps per-bucket roll-ups of each domain's power; the peak of each bucket (`max_w`)
is the series forecast, because a budget is broken by peaks, not by means. Missing buckets
become gaps (NaN), which the forecaster's history checks fill or refuse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from voltpack.forecast.headroom import power_headroom
from voltpack.forecast.registry import make_forecaster
from voltpack.forecast.series import TimeSeries
from voltpack.model.errors import ForecastError
from voltpack.store import PowerBucket

DAY_S = 86_400.0
#: quantile levels every power forecast carries, besides the one asked for
BASE_LEVELS = (0.1, 0.5, 0.9)


class PowerForecastView(BaseModel):
    """A domain's power forecast and the headroom it leaves under the budget."""

    domain: str
    model: str
    level: float
    step_s: float
    start_s: float
    quantiles: list[float]
    power_w: list[list[float]]
    """power_w[h][j]: quantile `quantiles[j]` of the peak power of step h ahead."""
    budget_w: float
    predicted_peak_w: float
    headroom_w: float
    explanation: str
    notes: list[str]


def power_series(domain: str, buckets: Sequence[PowerBucket]) -> TimeSeries:
    """The peak power per bucket on a regular grid (gaps as NaN), with a daily season when the
    history holds two days."""
    if not buckets:
        raise ForecastError(f"domain {domain}: no power history is stored yet")
    step_s = float(np.median([b.bucket_s for b in buckets]))
    start_s = buckets[0].bucket_start_s
    length = round((buckets[-1].bucket_start_s - start_s) / step_s) + 1
    values = np.full(length, np.nan)
    for bucket in buckets:
        index = round((bucket.bucket_start_s - start_s) / step_s)
        if 0 <= index < length:
            values[index] = bucket.max_w if math.isnan(values[index]) else max(
                values[index], bucket.max_w)  # fmt: skip
    day = round(DAY_S / step_s)
    seasons = (day,) if day >= 2 and length >= 2 * day else ()
    return TimeSeries(
        name=f"power/{domain}", family="power", step_s=step_s, start_s=start_s,
        values=values, unit="watts", seasons=seasons,
    )  # fmt: skip


def forecast_power(
    domain: str,
    buckets: Sequence[PowerBucket],
    *,
    horizon_s: float,
    level: float,
    budget_w: float | None = None,
    model: str = "seasonal_naive",
) -> PowerForecastView:
    """Forecast `domain`'s peak power `horizon_s` ahead and the headroom under its budget
    (the newest stored budget unless `budget_w` is given)."""
    history = power_series(domain, buckets)
    if budget_w is None:
        budgets = [b.budget_w for b in buckets if b.budget_w]
        if not budgets:
            raise ForecastError(f"budget_w: domain {domain} has no stored budget; pass budget_w")
        budget_w = float(budgets[-1])
    steps = max(1, math.ceil(horizon_s / history.step_s))
    levels = sorted({*BASE_LEVELS, level})
    forecaster = make_forecaster(model)
    forecaster.fit_many([history])
    (forecast,) = forecaster.predict_many(steps, levels)
    headroom = power_headroom(forecast, domain, budget_w, level=level)
    return PowerForecastView(
        domain=domain,
        model=model,
        level=level,
        step_s=history.step_s,
        start_s=forecast.start_s,
        quantiles=list(forecast.quantiles),
        power_w=forecast.values.round(1).tolist(),
        budget_w=budget_w,
        predicted_peak_w=headroom.predicted_peak_w,
        headroom_w=headroom.headroom_w,
        explanation=headroom.explanation,
        notes=list(forecast.notes),
    )
