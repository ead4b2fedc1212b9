"""Conformal calibration, the rolling-origin backtest on a hand-checkable case, and the
drift-triggered refit policy."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pytest

from voltpack.forecast.backtest import backtest, summarise
from voltpack.forecast.batch import PerSeries
from voltpack.forecast.conformal import HorizonConformal, conformal_quantile, horizon_bucket
from voltpack.forecast.drift import DriftMonitor, DriftPolicy, compare_refit_policies, saving
from voltpack.forecast.models.seasonal_naive import SeasonalNaive
from voltpack.forecast.series import FloatArray, QuantileForecast, TimeSeries, check_quantiles
from voltpack.forecast.splits import rolling_origins
from voltpack.model.errors import ForecastError


def test_conformal_quantile_ranks() -> None:
    scores = np.arange(1.0, 10.0)  # n = 9
    assert conformal_quantile(scores, 0.9) == 9.0  # ceil(10 * 0.9) = 9th
    assert conformal_quantile(scores, 0.8) == 8.0
    assert conformal_quantile(scores, 0.1) == 1.0  # floor(10 * 0.1) = 1st
    assert conformal_quantile(scores, 0.5) == 5.0  # the median
    assert conformal_quantile(scores, 0.99) == 9.0  # too few scores: the largest


def test_horizon_buckets_are_log2() -> None:
    assert horizon_bucket(np.array([1, 2, 3, 4, 5, 8, 9])).tolist() == [0, 1, 2, 2, 3, 3, 4]


def test_conformal_intervals_cover_exchangeable_data() -> None:
    rng = np.random.default_rng(0)
    calibration = rng.standard_t(4, size=2000)
    conformal = HorizonConformal.from_scores(np.ones(2000, dtype=np.int64), calibration)
    offsets = conformal.offsets(1, [0.01, 0.1, 0.9, 0.99])[0]
    fresh = rng.standard_t(4, size=20_000)
    assert abs(np.mean((fresh >= offsets[1]) & (fresh <= offsets[2])) - 0.80) < 0.02
    assert abs(np.mean((fresh >= offsets[0]) & (fresh <= offsets[3])) - 0.98) < 0.01


def test_conformal_widens_past_the_last_bucket() -> None:
    conformal = HorizonConformal.from_scores(np.array([1, 1, 1]), np.array([-1.0, 0.0, 1.0]))
    offsets = conformal.offsets(4, [0.1, 0.9])
    np.testing.assert_allclose(offsets[0], [-1.0, 1.0])
    np.testing.assert_allclose(offsets[3], [-2.0, 2.0])  # sqrt(4 / 1)


class FixedForecaster:
    """Predicts `level` plus fixed offsets per quantile, for hand-checked metrics."""

    name = "fixed"
    offsets: ClassVar[dict[float, float]] = {0.01: -3.0, 0.1: -1.0, 0.5: 0.0, 0.9: 1.0, 0.99: 3.0}

    def __init__(self, level: float) -> None:
        self.level = level
        self.history: TimeSeries | None = None

    def fit(self, history: TimeSeries) -> None:
        self.history = history

    def update(self, new_values: FloatArray) -> None:
        raise NotImplementedError

    def predict(self, horizon: int, quantiles: Sequence[float]) -> QuantileForecast:
        assert self.history is not None
        levels = check_quantiles(quantiles)
        row = [self.level + self.offsets[q] for q in levels]
        return QuantileForecast(
            self.history.name, self.name, 0.0, 1.0, levels, np.tile(row, (horizon, 1))
        )


def test_backtest_metrics_by_hand() -> None:
    # history 0..7 then test windows [8, 9] and [10, 11]; the forecast is always 9 (+- offsets)
    series = TimeSeries("hand", "power", 1.0, 0.0, np.arange(12.0), "watts", ())
    metrics = backtest(lambda: PerSeries(lambda: FixedForecaster(9.0)), [series], [2], 2, 8)
    first, second = metrics
    assert (first.origin, second.origin) == (8, 10)
    # window 1: actual 8, 9 vs median 9 -> errors 1, 0; naive scale of 0..7 is 1
    assert first.mase == pytest.approx(0.5)
    assert first.pinball_50 == pytest.approx((0.5 * 1 + 0.0) / 2)
    # 0.9 quantile 10: 0.1 * (10 - 8) and 0.1 * (10 - 9) -> mean 0.15
    assert first.pinball_90 == pytest.approx(0.15)
    assert first.pinball_99 == pytest.approx((0.01 * 4 + 0.01 * 3) / 2)
    assert first.coverage_80 == 1.0  # [8, 10] holds 8 and 9
    # window 2: actual 10, 11 vs [8, 10]: 10 inside, 11 outside; [6, 12] holds both
    assert second.coverage_80 == 0.5
    assert second.coverage_98 == 1.0
    assert second.smape_pct == pytest.approx(100 * (2 / 19 + 4 / 20) / 2)
    summary = summarise(metrics)
    assert summary["windows"] == 2.0
    assert summary["coverage_80"] == pytest.approx(0.75)
    expected_mean = np.mean([first.pinball_50, first.pinball_90, first.pinball_99])
    assert first.mean_pinball == pytest.approx(expected_mean)


def test_backtest_too_short_series_is_an_error() -> None:
    series = TimeSeries("short", "power", 1.0, 0.0, np.arange(10.0), "watts", ())
    with pytest.raises(ForecastError, match="too short"):
        backtest(lambda: PerSeries(lambda: FixedForecaster(0.0)), [series], [4], 3, 5)


def ticking_clock() -> itertools.count[float]:
    return itertools.count(0.0, 1.0)


def walk(values: np.ndarray, policy: DriftPolicy) -> tuple[int, ...]:
    series = TimeSeries("walk", "power", 60.0, 0.0, values, "watts", (24,))
    clock = ticking_clock()
    drift, every = compare_refit_policies(SeasonalNaive, series, 240, policy, lambda: next(clock))
    assert every.fits == len(values) - 240  # the first fit and one per step but the last
    figures = saving(drift, every)
    assert figures["fits_drift"] == drift.fits
    return drift.refit_steps


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_drift_refit_triggers_on_a_level_shift(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = 40 + 10 * np.sin(2 * np.pi * np.arange(720) / 24) + rng.normal(0, 1, 720)
    values[480:] += 30.0
    refits = walk(values, DriftPolicy())
    assert refits, "a level shift of 30 sd must trigger a refit"
    assert 480 < refits[0] <= 480 + DriftPolicy().window_steps


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_drift_refit_on_a_stationary_series(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = 40 + 10 * np.sin(2 * np.pi * np.arange(720) / 24) + rng.normal(0, 1, 720)
    assert walk(values, DriftPolicy()) == ()


def test_drift_monitor_keeps_the_old_baseline_after_a_bad_refit() -> None:
    monitor = DriftMonitor(DriftPolicy(window_steps=4, threshold=2.0), floor=0.0)
    assert not any(monitor.observe(1.0) for _ in range(4))  # baseline 1
    assert monitor.observe(10.0)  # recent mean 3.25 > 2
    monitor.reset()
    assert monitor.observe(9.0)  # the refit is as bad: after a quarter window, refit again
    assert monitor.baseline == 1.0


def test_drift_policy_rejects_bad_settings() -> None:
    with pytest.raises(ForecastError, match="threshold"):
        DriftPolicy(threshold=0.9)


def test_spread_origins_cover_the_span_without_overlap() -> None:
    origins = rolling_origins(1000, 24, 8, 100, span_fraction=0.4)
    assert origins[0] == 600 and origins[-1] == 976
    assert all(b - a >= 24 for a, b in itertools.pairwise(origins))
    # a span no wider than the contiguous windows keeps them contiguous
    assert rolling_origins(200, 24, 8, 0, span_fraction=0.5) == rolling_origins(200, 24, 8, 0)
    with pytest.raises(ForecastError, match="span_fraction"):
        rolling_origins(1000, 24, 8, 100, span_fraction=1.0)
