"""Power forecasts for the admin API: a domain's stored power roll-ups -> quantiles and headroom
(`voltpack.forecast.domain_power` does the work; this module shapes the response)."""

from __future__ import annotations

from pydantic import BaseModel

from voltpack.forecast.domain_power import DomainPowerForecast


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


def forecast_view(domain: str, level: float, result: DomainPowerForecast) -> PowerForecastView:
    """The API's answer for a domain forecast (`voltpack.forecast.domain_power`)."""
    forecast, headroom = result.forecast, result.headroom
    return PowerForecastView(
        domain=domain,
        model=result.model,
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
