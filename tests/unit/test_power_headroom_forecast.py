"""Power headroom per domain: budget minus a high quantile of forecast power, in plain words."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voltpack.forecast.headroom import power_headroom, power_headroom_per_domain
from voltpack.forecast.series import QuantileForecast
from voltpack.model.errors import ForecastError

START_S = 14 * 3600.0


def forecast(values: list[list[float]], levels: tuple[float, ...] = (0.5, 0.9, 0.99)) -> (
    QuantileForecast
):  # fmt: skip
    return QuantileForecast(
        "row-sim/power/row-1/5min", "test", START_S, 300.0, levels,
        np.asarray(values, dtype=np.float64),
    )  # fmt: skip


POWER = forecast([[150e3, 160e3, 170e3], [155e3, 165e3, 180e3], [150e3, 158e3, 166e3]])


def test_headroom_by_hand() -> None:
    result = power_headroom(POWER, "row-1", 260e3)
    assert result.predicted_peak_w == pytest.approx(180e3)
    assert result.headroom_w == pytest.approx(80e3)
    assert result.peak_time_s == START_S + 300.0
    assert result.until_s == START_S + 900.0
    assert result.explanation == (
        "row-1: 80.0 kW of its 260.0 kW budget stays free until 14:15 UTC with 99% confidence "
        "(the 99% quantile of power over the next 15 min peaks at 180.0 kW at 14:05 UTC)"
    )


def test_interpolated_level_and_shorter_horizon() -> None:
    # 0.945 is halfway between 0.9 and 0.99: step 0 -> 165 kW
    result = power_headroom(POWER, "row-1", 200e3, level=0.945, horizon_steps=1)
    assert result.predicted_peak_w == pytest.approx(165e3)
    assert result.headroom_w == pytest.approx(35e3)


def test_negative_headroom_says_when_and_how_much() -> None:
    result = power_headroom(POWER, "row-1", 175e3)
    assert result.headroom_w == pytest.approx(-5e3)
    assert result.explanation.startswith(
        "row-1: power may exceed its 175.0 kW budget by 5.0 kW at 14:05 UTC"
    )


def test_per_domain() -> None:
    other = forecast([[1e3, 2e3, 3e3]])
    results = power_headroom_per_domain({"row-2": other, "row-1": POWER},
                                        {"row-1": 260e3, "row-2": 4e3})  # fmt: skip
    assert [(r.domain, r.headroom_w) for r in results] == [("row-1", 80e3), ("row-2", 1e3)]
    with pytest.raises(ForecastError, match="budgets_w: no budget for domain"):
        power_headroom_per_domain({"row-1": POWER}, {})


@pytest.mark.parametrize("budget_w", [0.0, -5.0, float("nan"), float("inf")])
def test_bad_budget(budget_w: float) -> None:
    with pytest.raises(ForecastError, match="budget_w: must be"):
        power_headroom(POWER, "row-1", budget_w)


@pytest.mark.parametrize("level", [0.0, 1.0, 1.2])
def test_bad_level(level: float) -> None:
    with pytest.raises(ForecastError, match="level: must lie strictly between 0 and 1"):
        power_headroom(POWER, "row-1", 1e5, level=level)


def test_level_not_bracketed_by_the_forecast() -> None:
    with pytest.raises(ForecastError, match=r"level: needs quantile 0\.999 .* outside"):
        power_headroom(POWER, "row-1", 1e5, level=0.999)
    with pytest.raises(ForecastError, match=r"horizon_steps: must lie in 1\.\.3"):
        power_headroom(POWER, "row-1", 1e5, horizon_steps=0)


@given(
    rows=st.lists(
        st.lists(st.floats(0.0, 1e6), min_size=3, max_size=3).map(sorted), min_size=1, max_size=5
    ),
    levels=st.tuples(st.floats(0.5, 0.99), st.floats(0.5, 0.99)),
)
def test_higher_confidence_never_leaves_more_headroom(
    rows: list[list[float]], levels: tuple[float, float]
) -> None:
    power = forecast(rows)
    low, high = sorted(levels)
    assert (
        power_headroom(power, "d", 2e6, level=high).headroom_w
        <= power_headroom(power, "d", 2e6, level=low).headroom_w + 1e-6
    )
