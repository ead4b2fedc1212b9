"""Capacity planning under uncertainty: how many GPUs of a model to hold for the next hours.

A newsvendor decision. Holding one GPU that turns out idle costs `idle_cost_per_gpu_hour`;
a GPU-hour of demand left unmet costs `unmet_cost_per_gpu_hour` (both in the operator's own
units: money, priority points). The expected cost of holding R GPUs against an uncertain
demand D is minimised by the smallest R with P(D <= R) >= critical ratio
`unmet / (unmet + idle)`; an operator who prefers to think in risk instead states the
accepted chance that demand exceeds what is held (`risk`), and the level is `1 - risk`.
The level's quantile is read off the predicted quantiles (linear between the two nearest
levels), per forecast step, then rounded up to whole GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from voltpack.forecast.interpolate import interpolate_quantile
from voltpack.forecast.series import QuantileForecast
from voltpack.forecast.wording import clock_label, duration_label
from voltpack.model.errors import ForecastError

_ROUNDING = 1e-9
"""A quantile within this of a whole number counts as that number (float noise)."""


@dataclass(frozen=True)
class CapacityCosts:
    """What a wrong decision costs, per GPU and hour, in the operator's units."""

    idle_cost_per_gpu_hour: float
    unmet_cost_per_gpu_hour: float

    def __post_init__(self) -> None:
        for field in ("idle_cost_per_gpu_hour", "unmet_cost_per_gpu_hour"):
            value = getattr(self, field)
            if not math.isfinite(value) or value < 0:
                raise ForecastError(f"{field}: must be a finite number >= 0, got {value}")
        if self.idle_cost_per_gpu_hour + self.unmet_cost_per_gpu_hour <= 0:
            raise ForecastError(
                "idle_cost_per_gpu_hour and unmet_cost_per_gpu_hour: at least one must be > 0"
            )

    @property
    def critical_ratio(self) -> float:
        """The newsvendor's service level: unmet / (unmet + idle)."""
        total = self.idle_cost_per_gpu_hour + self.unmet_cost_per_gpu_hour
        return self.unmet_cost_per_gpu_hour / total


@dataclass(frozen=True)
class CapacityPlan:
    """GPUs of one model to hold over the next `horizon_s`, and why."""

    gpu_model: str
    level: float
    """P(demand <= held) aimed at in every step: the critical ratio, or 1 - risk."""
    reserve_gpus: int
    """GPUs to hold (in use plus free) from `start_s` until `until_s`."""
    keep_free_gpus: int | None
    """GPUs to keep free on top of those in use (None when usage was not given)."""
    per_step_gpus: tuple[float, ...]
    """The level's demand quantile in each step (before rounding up)."""
    start_s: float
    until_s: float
    peak_step: int
    explanation: str


def decision_level(risk: float | None, costs: CapacityCosts | None) -> float:
    """The quantile level a plan aims at: `1 - risk`, or the costs' critical ratio."""
    if (risk is None) == (costs is None):
        raise ForecastError("risk, costs: give exactly one (an accepted risk or the two costs)")
    if costs is not None:
        level = costs.critical_ratio
        if not 0.0 < level < 1.0:
            raise ForecastError(
                "costs: a zero idle or zero unmet cost asks for the 0 or 1 quantile, which no "
                "forecast bounds; make both costs positive"
            )
        return level
    assert risk is not None
    if not math.isfinite(risk) or not 0.0 < risk < 1.0:
        raise ForecastError(f"risk: must lie strictly between 0 and 1, got {risk}")
    return 1.0 - risk


def plan_capacity(
    forecast: QuantileForecast,
    gpu_model: str,
    *,
    risk: float | None = None,
    costs: CapacityCosts | None = None,
    horizon_steps: int | None = None,
    in_use_gpus: float | None = None,
    time_label: Callable[[float], str] = clock_label,
) -> CapacityPlan:
    """How many `gpu_model` GPUs to hold over the first `horizon_steps` steps of `forecast`
    (all of them by default), for an accepted `risk` or a pair of `costs`.

    The plan holds one number for the whole horizon: the largest per-step quantile, rounded
    up, so each step's chance of demand staying within it is at least the level. With
    `in_use_gpus`, it also says how many to keep free beyond those in use.
    """
    level = decision_level(risk, costs)
    steps = forecast.horizon if horizon_steps is None else horizon_steps
    if not 1 <= steps <= forecast.horizon:
        raise ForecastError(
            f"horizon_steps: must lie in 1..{forecast.horizon} (the forecast's horizon), "
            f"got {steps}"
        )
    if in_use_gpus is not None and (not math.isfinite(in_use_gpus) or in_use_gpus < 0):
        raise ForecastError(f"in_use_gpus: must be a finite number >= 0, got {in_use_gpus}")
    field = "risk" if risk is not None else "costs"
    per_step = np.maximum(interpolate_quantile(forecast, level, field)[:steps], 0.0)
    peak = int(np.argmax(per_step))
    reserve = math.ceil(float(per_step[peak]) - _ROUNDING)
    keep_free = (
        None if in_use_gpus is None else max(0, reserve - math.ceil(in_use_gpus - _ROUNDING))
    )
    until_s = forecast.start_s + steps * forecast.step_s
    plan = CapacityPlan(
        gpu_model=gpu_model, level=level, reserve_gpus=reserve, keep_free_gpus=keep_free,
        per_step_gpus=tuple(float(v) for v in per_step), start_s=forecast.start_s,
        until_s=until_s, peak_step=peak, explanation="",
    )  # fmt: skip
    return _with_explanation(plan, forecast, costs, time_label)


def _with_explanation(
    plan: CapacityPlan,
    forecast: QuantileForecast,
    costs: CapacityCosts | None,
    time_label: Callable[[float], str],
) -> CapacityPlan:
    chance = f"{100 * plan.level:.4g}%"
    window = duration_label(forecast.step_s)
    peak_at = time_label(plan.start_s + plan.peak_step * forecast.step_s)
    if plan.keep_free_gpus is None:
        head = f"hold {plan.reserve_gpus} {plan.gpu_model}"
    else:
        head = (
            f"keep {plan.keep_free_gpus} {plan.gpu_model} free "
            f"({plan.reserve_gpus} in all, with those in use)"
        )
    text = (
        f"{head} until {time_label(plan.until_s)}: {chance} chance demand stays at or below "
        f"{plan.reserve_gpus} GPUs in each {window} window (forecast peak "
        f"{plan.per_step_gpus[plan.peak_step]:.1f} GPUs at {peak_at}, quantile {plan.level:.3g})"
    )
    if costs is not None:
        text += (
            f"; an idle GPU costs {costs.idle_cost_per_gpu_hour:g} and an unmet GPU "
            f"{costs.unmet_cost_per_gpu_hour:g} per hour, so the cheapest plan covers "
            f"{chance} of outcomes"
        )
    return CapacityPlan(**{**plan.__dict__, "explanation": text})


def plan_capacity_per_model(
    forecasts: Mapping[str, QuantileForecast],
    *,
    risk: float | None = None,
    costs: CapacityCosts | None = None,
    horizon_steps: int | None = None,
    in_use_gpus: Mapping[str, float] | None = None,
    time_label: Callable[[float], str] = clock_label,
) -> list[CapacityPlan]:
    """One plan per GPU model (the mapping's keys), in key order."""
    usage = in_use_gpus or {}
    return [
        plan_capacity(
            forecasts[model],
            model,
            risk=risk,
            costs=costs,
            horizon_steps=horizon_steps,
            in_use_gpus=usage.get(model),
            time_label=time_label,
        )
        for model in sorted(forecasts)
    ]
