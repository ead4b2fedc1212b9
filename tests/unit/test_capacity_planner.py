"""The newsvendor capacity planner: quantile choice by hand, its wording, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voltpack.forecast.capacity import (
    CapacityCosts,
    decision_level,
    plan_capacity,
    plan_capacity_per_model,
)
from voltpack.forecast.series import QuantileForecast
from voltpack.model.errors import ForecastError

START_S = 16 * 3600.0  # 16:00 UTC on the epoch's first day


def forecast(values: list[list[float]], levels: tuple[float, ...] = (0.1, 0.5, 0.9)) -> (
    QuantileForecast
):  # fmt: skip
    return QuantileForecast(
        "openb/gpu_demand/A100/10min", "test", START_S, 600.0, levels,
        np.asarray(values, dtype=np.float64),
    )  # fmt: skip


DEMAND = forecast([[8.0, 10.0, 12.0], [9.0, 11.0, 14.0], [7.0, 9.0, 10.0]])


def test_risk_picks_the_interpolated_quantile() -> None:
    # risk 0.3 -> level 0.7, halfway between 0.5 and 0.9: steps 11, 12.5, 9.5
    plan = plan_capacity(DEMAND, "A100", risk=0.3)
    assert plan.level == pytest.approx(0.7)
    assert plan.per_step_gpus == pytest.approx((11.0, 12.5, 9.5))
    assert plan.reserve_gpus == 13  # the peak 12.5 rounded up
    assert plan.peak_step == 1
    assert plan.until_s == START_S + 3 * 600.0


def test_costs_pick_the_critical_ratio() -> None:
    costs = CapacityCosts(idle_cost_per_gpu_hour=1.0, unmet_cost_per_gpu_hour=3.0)
    assert costs.critical_ratio == pytest.approx(0.75)
    # 0.75 is 5/8 of the way from 0.5 to 0.9: step 1 -> 11 + 0.625 * 3 = 12.875
    plan = plan_capacity(DEMAND, "A100", costs=costs)
    assert plan.per_step_gpus[1] == pytest.approx(12.875)
    assert plan.reserve_gpus == 13
    cheap_idle = plan_capacity(DEMAND, "A100", costs=CapacityCosts(1.0, 1.0))
    assert cheap_idle.reserve_gpus == 11  # the median, 11 at step 1


def test_a_predicted_level_is_used_exactly_and_not_rounded_past() -> None:
    plan = plan_capacity(DEMAND, "A100", risk=0.1)
    assert plan.per_step_gpus == pytest.approx((12.0, 14.0, 10.0))
    assert plan.reserve_gpus == 14


def test_horizon_and_usage() -> None:
    plan = plan_capacity(DEMAND, "A100", risk=0.1, horizon_steps=1, in_use_gpus=9.5)
    assert plan.reserve_gpus == 12
    assert plan.keep_free_gpus == 2  # 12 held, 10 whole GPUs busy with 9.5 in use
    assert plan.until_s == START_S + 600.0
    busy = plan_capacity(DEMAND, "A100", risk=0.1, in_use_gpus=20.0)
    assert busy.keep_free_gpus == 0


def test_plain_words() -> None:
    plan = plan_capacity(DEMAND, "A100", risk=0.1, in_use_gpus=10.0)
    assert plan.explanation.startswith(
        "keep 4 A100 free (14 in all, with those in use) until 16:30 UTC: 90% chance demand "
        "stays at or below 14 GPUs in each 10 min window"
    )
    assert "peak 14.0 GPUs at 16:10 UTC" in plan.explanation
    costs = plan_capacity(DEMAND, "A100", costs=CapacityCosts(1.0, 9.0))
    assert costs.explanation.startswith("hold 14 A100 until 16:30 UTC: 90% chance")
    assert "an idle GPU costs 1 and an unmet GPU 9 per hour" in costs.explanation


def test_per_model() -> None:
    other = forecast([[1.0, 2.0, 3.0]])
    plans = plan_capacity_per_model({"V100": other, "A100": DEMAND}, risk=0.1,
                                    in_use_gpus={"A100": 10.0})  # fmt: skip
    assert [(p.gpu_model, p.reserve_gpus, p.keep_free_gpus) for p in plans] == [
        ("A100", 14, 4),
        ("V100", 3, None),
    ]


@pytest.mark.parametrize("risk", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_risk_outside_the_open_interval(risk: float) -> None:
    with pytest.raises(ForecastError, match="risk: must lie strictly between 0 and 1"):
        plan_capacity(DEMAND, "A100", risk=risk)


def test_bad_costs_name_the_field() -> None:
    with pytest.raises(ForecastError, match="idle_cost_per_gpu_hour: must be"):
        CapacityCosts(-1.0, 2.0)
    with pytest.raises(ForecastError, match="unmet_cost_per_gpu_hour: must be"):
        CapacityCosts(1.0, float("inf"))
    with pytest.raises(ForecastError, match="at least one must be > 0"):
        CapacityCosts(0.0, 0.0)
    with pytest.raises(ForecastError, match="costs: a zero idle or zero unmet cost"):
        plan_capacity(DEMAND, "A100", costs=CapacityCosts(0.0, 1.0))


def test_exactly_one_of_risk_and_costs() -> None:
    with pytest.raises(ForecastError, match="risk, costs: give exactly one"):
        decision_level(None, None)
    with pytest.raises(ForecastError, match="risk, costs: give exactly one"):
        plan_capacity(DEMAND, "A100", risk=0.1, costs=CapacityCosts(1.0, 1.0))


def test_forecast_without_the_needed_quantile() -> None:
    with pytest.raises(ForecastError, match=r"risk: needs quantile 0\.99 .* outside"):
        plan_capacity(DEMAND, "A100", risk=0.01)
    with pytest.raises(ForecastError, match=r"costs: needs quantile 0\.05"):
        plan_capacity(DEMAND, "A100", costs=CapacityCosts(19.0, 1.0))
    broken = forecast([[1.0, np.nan, 3.0]])
    with pytest.raises(ForecastError, match="NaN"):
        plan_capacity(broken, "A100", risk=0.1)


def test_bad_horizon_and_usage() -> None:
    with pytest.raises(ForecastError, match=r"horizon_steps: must lie in 1\.\.3"):
        plan_capacity(DEMAND, "A100", risk=0.1, horizon_steps=4)
    with pytest.raises(ForecastError, match="in_use_gpus: must be"):
        plan_capacity(DEMAND, "A100", risk=0.1, in_use_gpus=-1.0)


quantile_rows = st.lists(
    st.lists(st.floats(0.0, 500.0), min_size=4, max_size=4).map(sorted),
    min_size=1,
    max_size=6,
)


@given(rows=quantile_rows, risks=st.tuples(st.floats(0.02, 0.9), st.floats(0.02, 0.9)))
def test_more_risk_averse_never_holds_fewer(
    rows: list[list[float]], risks: tuple[float, float]
) -> None:
    demand = forecast(rows, levels=(0.05, 0.5, 0.9, 0.98))
    averse, bold = min(risks), max(risks)
    assert (
        plan_capacity(demand, "A100", risk=averse).reserve_gpus
        >= plan_capacity(demand, "A100", risk=bold).reserve_gpus
    )


@given(
    rows=quantile_rows,
    idle=st.floats(1.0, 10.0),
    unmet=st.tuples(st.floats(1.0, 40.0), st.floats(1.0, 40.0)),
)
def test_dearer_unmet_demand_never_holds_fewer(
    rows: list[list[float]], idle: float, unmet: tuple[float, float]
) -> None:
    demand = forecast(rows, levels=(0.01, 0.3, 0.7, 0.99))  # critical ratios 0.09..0.98
    low, high = sorted(unmet)
    assert (
        plan_capacity(demand, "A100", costs=CapacityCosts(idle, high)).reserve_gpus
        >= plan_capacity(demand, "A100", costs=CapacityCosts(idle, low)).reserve_gpus
    )
