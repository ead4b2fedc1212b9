"""Power headroom per domain for the power controller: the budget minus a high quantile of
the power predicted over the next control horizon.

Positive headroom is power the controller may hand out (admit work, lift caps) with the
chosen confidence; negative headroom says the domain is likely to exceed its budget and when.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from voltpack.forecast.interpolate import interpolate_quantile
from voltpack.forecast.series import QuantileForecast
from voltpack.forecast.wording import clock_label, duration_label, watts_label
from voltpack.model.errors import ForecastError

DEFAULT_LEVEL = 0.99


@dataclass(frozen=True)
class PowerHeadroom:
    """How much of a domain's budget the forecast leaves free over the control horizon."""

    domain: str
    budget_w: float
    level: float
    predicted_peak_w: float
    """The largest `level` quantile of power over the horizon."""
    headroom_w: float
    """budget_w - predicted_peak_w (negative: likely over budget)."""
    peak_time_s: float
    until_s: float
    explanation: str


def power_headroom(
    forecast: QuantileForecast,
    domain: str,
    budget_w: float,
    *,
    level: float = DEFAULT_LEVEL,
    horizon_steps: int | None = None,
    time_label: Callable[[float], str] = clock_label,
) -> PowerHeadroom:
    """Headroom of `domain` over the first `horizon_steps` steps of a power forecast (W)."""
    if not math.isfinite(budget_w) or budget_w <= 0:
        raise ForecastError(f"budget_w: must be a finite number > 0, got {budget_w}")
    if not math.isfinite(level) or not 0.0 < level < 1.0:
        raise ForecastError(f"level: must lie strictly between 0 and 1, got {level}")
    steps = forecast.horizon if horizon_steps is None else horizon_steps
    if not 1 <= steps <= forecast.horizon:
        raise ForecastError(
            f"horizon_steps: must lie in 1..{forecast.horizon} (the forecast's horizon), "
            f"got {steps}"
        )
    power = interpolate_quantile(forecast, level, "level")[:steps]
    peak = int(np.argmax(power))
    peak_w = float(power[peak])
    headroom_w = budget_w - peak_w
    peak_time_s = forecast.start_s + peak * forecast.step_s
    until_s = forecast.start_s + steps * forecast.step_s
    horizon = duration_label(steps * forecast.step_s)
    chance = f"{100 * level:.4g}%"
    if headroom_w >= 0:
        text = (
            f"{domain}: {watts_label(headroom_w)} of its {watts_label(budget_w)} budget stays "
            f"free until {time_label(until_s)} with {chance} confidence (the {chance} quantile "
            f"of power over the next {horizon} peaks at {watts_label(peak_w)} at "
            f"{time_label(peak_time_s)})"
        )
    else:
        text = (
            f"{domain}: power may exceed its {watts_label(budget_w)} budget by "
            f"{watts_label(-headroom_w)} at {time_label(peak_time_s)} (the {chance} quantile "
            f"over the next {horizon} peaks at {watts_label(peak_w)}); shed that much "
            f"low-priority power before then"
        )
    return PowerHeadroom(
        domain=domain, budget_w=budget_w, level=level, predicted_peak_w=peak_w,
        headroom_w=headroom_w, peak_time_s=peak_time_s, until_s=until_s, explanation=text,
    )  # fmt: skip


def power_headroom_per_domain(
    forecasts: Mapping[str, QuantileForecast],
    budgets_w: Mapping[str, float],
    *,
    level: float = DEFAULT_LEVEL,
    horizon_steps: int | None = None,
    time_label: Callable[[float], str] = clock_label,
) -> list[PowerHeadroom]:
    """One headroom per domain (the forecasts' keys, in order); every domain needs a budget."""
    missing = sorted(set(forecasts) - set(budgets_w))
    if missing:
        raise ForecastError(f"budgets_w: no budget for domain(s) {', '.join(missing)}")
    return [
        power_headroom(
            forecasts[d],
            d,
            budgets_w[d],
            level=level,
            horizon_steps=horizon_steps,
            time_label=time_label,
        )
        for d in sorted(forecasts)
    ]
