"""The power loop's forecast peaks from recorded power, on SQLite and on a real PostgreSQL:
a coming daily rise is foreseen, a domain without history has none, an outage loses nothing."""

from __future__ import annotations

import logging
import math

import pytest
import sqlalchemy
from prometheus_client import CollectorRegistry

from tests.integration.store.conftest import Outage
from voltpack.operator.power.forecasts import ForecastPeaks
from voltpack.policies.schema import PowerForecastSpec
from voltpack.store import BufferedStore, PowerSample, Store

DAY_S = 86_400.0
BUDGET_W = 10_000.0
NOW_S = 1_800_000_000.0  # a Unix time; the history ends here
SPEC = PowerForecastSpec(horizon_s=3600.0, level=0.99, refresh_s=300.0)


def diurnal_w(at_s: float) -> float:
    """5 kW +- 3 kW, rising fastest at phase 0 of each day."""
    return 5_000.0 + 3_000.0 * math.sin(2.0 * math.pi * ((at_s - NOW_S) % DAY_S) / DAY_S)


@pytest.fixture
def buffered(store: Store) -> BufferedStore:
    return BufferedStore(store, registry=CollectorRegistry(), retry_interval_s=0.0)


def record(buffered: BufferedStore, domain: str, days: float, end_s: float = NOW_S) -> None:
    """`days` of one sample a minute ending at `end_s`, as the power loop records them."""
    count = int(days * 1440)
    samples = [
        PowerSample(at_s=at, power_w=diurnal_w(at), budget_w=BUDGET_W)
        for at in (end_s - (count - i) * 60.0 for i in range(count))
    ]
    buffered.read(lambda s: s.add_power_samples(domain, samples))


def test_a_coming_daily_rise_is_foreseen(buffered: BufferedStore) -> None:
    record(buffered, "row-1", days=3)
    peaks = ForecastPeaks(SPEC, buffered)
    assert peaks.refresh(NOW_S, [("row-1", BUDGET_W)])
    now_w = diurnal_w(NOW_S - 60.0)
    in_an_hour_w = diurnal_w(NOW_S + 3600.0)
    peak_w = peaks.current(NOW_S)["row-1"]
    # the last reading is ~5 kW; the daily shape says ~5.8 kW within the hour
    assert now_w < 5_000.0 + 1.0 and in_an_hour_w > 5_700.0
    assert in_an_hour_w - 100.0 <= peak_w <= BUDGET_W
    assert "row-1" in peaks.peaks["row-1"].explanation
    # the forecast stops counting after its horizon
    assert peaks.current(NOW_S + 3599.0) == {"row-1": peak_w}
    assert peaks.current(NOW_S + 3600.0) == {}


def test_refreshes_run_in_a_worker_every_refresh_s(buffered: BufferedStore) -> None:
    record(buffered, "row-1", days=2)
    peaks = ForecastPeaks(SPEC, buffered)
    assert peaks.start_refresh(NOW_S, [("row-1", BUDGET_W)])
    peaks.wait(30.0)
    assert not peaks.running() and set(peaks.current(NOW_S)) == {"row-1"}
    assert not peaks.start_refresh(NOW_S + 299.0, [("row-1", BUDGET_W)])  # not due yet
    assert peaks.start_refresh(NOW_S + 300.0, [])  # due: a refresh over no domain
    peaks.wait(30.0)
    assert peaks.current(NOW_S + 300.0) == {}


def test_a_domain_without_history_has_no_forecast_and_says_so_once(
    buffered: BufferedStore, caplog: pytest.LogCaptureFixture
) -> None:
    record(buffered, "row-1", days=1)
    peaks = ForecastPeaks(SPEC, buffered)
    with caplog.at_level(logging.INFO, logger="voltpack.operator.power.forecasts"):
        assert peaks.refresh(NOW_S, [("row-1", BUDGET_W), ("row-2", BUDGET_W)])
        assert peaks.refresh(NOW_S + 300.0, [("row-1", BUDGET_W), ("row-2", BUDGET_W)])
    assert set(peaks.current(NOW_S + 300.0)) == {"row-1"}
    told = [r.getMessage() for r in caplog.records if "row-2" in r.getMessage()]
    assert told == ["domain row-2: no power forecast: domain row-2: no power history is stored yet"]


def test_an_outage_skips_the_refresh_keeps_the_last_forecast_and_retries(
    buffered: BufferedStore, outage: Outage
) -> None:
    record(buffered, "row-1", days=2)
    peaks = ForecastPeaks(SPEC, buffered)
    assert peaks.refresh(NOW_S, [("row-1", BUDGET_W)])
    before = peaks.current(NOW_S)
    outage.cut()
    try:
        assert not peaks.refresh(NOW_S + 300.0, [("row-1", BUDGET_W)])
        assert peaks.current(NOW_S + 300.0) == before
    finally:
        outage.restore()
    assert peaks.refresh(NOW_S + 600.0, [("row-1", BUDGET_W)])
    assert set(peaks.current(NOW_S + 600.0)) == {"row-1"}


def test_a_late_history_is_stretched_to_now_and_a_stopped_one_is_not_used(
    buffered: BufferedStore,
) -> None:
    # recording stopped 30 minutes ago (an operator restart): the peak covers [now, now + 1 h]
    record(buffered, "row-1", days=3, end_s=NOW_S - 1800.0)
    peaks = ForecastPeaks(SPEC, buffered)
    assert peaks.refresh(NOW_S, [("row-1", BUDGET_W)])
    in_an_hour_w = diurnal_w(NOW_S + 3600.0)
    assert peaks.current(NOW_S)["row-1"] >= in_an_hour_w - 100.0
    # stopped 6 hours ago: more than the horizon, so no forecast (measured power only)
    assert peaks.refresh(NOW_S + 6 * 3600.0, [("row-1", BUDGET_W)])
    assert peaks.current(NOW_S + 6 * 3600.0) == {}
    assert "s old" in peaks._told["row-1"]


def test_history_before_an_outage_longer_than_a_day_is_left_out(buffered: BufferedStore) -> None:
    record(buffered, "row-1", days=3, end_s=NOW_S - 2 * DAY_S)  # then a 2-day outage
    record(buffered, "row-1", days=0.5)  # and half a day since
    peaks = ForecastPeaks(SPEC, buffered)
    assert peaks.refresh(NOW_S, [("row-1", BUDGET_W)])
    assert set(peaks.current(NOW_S)) == {"row-1"}


def test_a_corrupt_record_costs_only_its_own_domains_forecast(
    buffered: BufferedStore, store: Store
) -> None:
    record(buffered, "row-1", days=1)
    with store.engine.begin() as connection:  # a zero-length bucket no forecaster can grid
        connection.execute(
            sqlalchemy.text(
                "INSERT INTO power_samples (domain, bucket_start_s, bucket_s, samples, mean_w, "
                "max_w, budget_w, actions) VALUES ('row-2', :at, 0, 1, 1, 1, 5000, 0)"
            ),
            {"at": NOW_S - 60.0},
        )
    peaks = ForecastPeaks(SPEC, buffered)
    assert peaks.refresh(NOW_S, [("row-1", BUDGET_W), ("row-2", BUDGET_W)])
    assert set(peaks.current(NOW_S)) == {"row-1"}
    assert "no power forecast: ZeroDivisionError" in peaks._told["row-2"]
