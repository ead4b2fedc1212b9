"""Power forecasts for the admin API: a domain's stored power roll-ups -> quantiles and headroom
(`voltpack.forecast.domain_power` does the work; this module shapes the response)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from voltpack.forecast.domain_power import forecast_domain_power
from voltpack.store import PowerBucket


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
    result = forecast_domain_power(
        domain, buckets, horizon_s=horizon_s, level=level, budget_w=budget_w, model=model
    )
    forecast, headroom = result.forecast, result.headroom
    return PowerForecastView(
        domain=domain,
        model=model,
        level=level,
        step_s=forecast.step_s,
        start_s=forecast.start_s,
        quantiles=list(forecast.quantiles),
        power_w=forecast.values.round(1).tolist(),
        budget_w=headroom.budget_w,
        predicted_peak_w=headroom.predicted_peak_w,
        headroom_w=headroom.headroom_w,
        explanation=headroom.explanation,
        notes=list(forecast.notes),
    )
