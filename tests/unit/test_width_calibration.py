"""Re-scaling a model's quantiles on validation forecasts: a model whose intervals are too
wide or too narrow is brought to nominal coverage, zero widths and too few ratios leave a
level alone, and `auto` applies the factors and says so."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from voltpack.forecast.registry import make_forecaster
from voltpack.forecast.series import TimeSeries
from voltpack.forecast.width_calibration import RatioScores, WidthCalibration
from voltpack.model.errors import ForecastError

LEVELS = (0.01, 0.1, 0.5, 0.9, 0.99)
STEPS = 24


def gaussian_table(median: float, sd_claimed: float, steps: int = STEPS) -> np.ndarray:
    """A forecast table whose quantiles claim a normal spread of `sd_claimed`."""
    row = median + sd_claimed * norm.ppf(LEVELS)
    return np.tile(row, (steps, 1))


def coverage(actual: np.ndarray, table: np.ndarray, low: int, high: int) -> float:
    return float(np.mean((actual >= table[:, low]) & (actual <= table[:, high])))


@pytest.mark.parametrize("sd_claimed", [0.5, 1.0, 3.0])
def test_factors_bring_a_miscalibrated_model_to_nominal_coverage(sd_claimed: float) -> None:
    rng = np.random.default_rng(7)
    scores = RatioScores(LEVELS)
    for _ in range(40):  # 40 origins of 24 steps, the truth has sd 1
        scores.add(rng.normal(10.0, 1.0, STEPS), gaussian_table(10.0, sd_claimed))
    calibration = scores.calibration()
    for q in (0.1, 0.9, 0.01, 0.99):
        assert calibration.factor(q) == pytest.approx(1.0 / sd_claimed, rel=0.2)
    fresh = rng.normal(10.0, 1.0, 20_000)
    table = calibration.apply(gaussian_table(10.0, sd_claimed, fresh.size), LEVELS)
    assert coverage(fresh, table, 1, 3) == pytest.approx(0.80, abs=0.03)
    assert coverage(fresh, table, 0, 4) == pytest.approx(0.98, abs=0.01)
    np.testing.assert_allclose(table[:, 2], 10.0)  # the median is never moved


def test_zero_widths_and_too_few_ratios_leave_a_level_alone() -> None:
    flat = RatioScores(LEVELS)
    for _ in range(10):  # the naive rule on a flat series: every quantile is the median
        flat.add(np.full(STEPS, 4.0), np.full((STEPS, len(LEVELS)), 4.0))
    assert flat.calibration().factors == {0.01: 1.0, 0.1: 1.0, 0.9: 1.0, 0.99: 1.0}
    assert flat.calibration().describe() == "none"
    assert not flat.calibration().changes
    few = RatioScores(LEVELS)
    few.add(np.linspace(9, 11, 50), gaussian_table(10.0, 2.0, 50))  # 50 ratios: < 99 needed
    calibration = few.calibration()
    assert calibration.factor(0.1) < 0.9 and calibration.factor(0.9) < 0.9
    assert calibration.factor(0.01) == calibration.factor(0.99) == 1.0  # kept, not borrowed


def test_each_side_is_scaled_on_its_own_and_factors_stay_bounded() -> None:
    rng = np.random.default_rng(5)
    skewed = RatioScores(LEVELS)
    for _ in range(40):  # truth: exponential noise, a long upper tail the model ignores
        skewed.add(10.0 + rng.exponential(1.0, STEPS) - np.log(2.0), gaussian_table(10.0, 1.0))
    calibration = skewed.calibration()
    assert calibration.factor(0.9) > 1.1  # the upper tail is longer than claimed (1.26)
    assert calibration.factor(0.99) > 1.4  # (1.68)
    assert calibration.factor(0.1) < 0.6  # the lower one shorter (0.46)
    wild = RatioScores(LEVELS)
    for _ in range(40):  # claimed widths of a millionth: the factor is held at the bound
        wild.add(rng.normal(10.0, 1.0, STEPS), gaussian_table(10.0, 1e-6))
    assert wild.calibration().factor(0.9) == 10.0
    broken = RatioScores(LEVELS)
    table = gaussian_table(10.0, 1.0)
    table[:, 4] = np.inf  # a non-finite quantile gives no ratio, not a biased one
    for _ in range(40):
        broken.add(rng.normal(10.0, 1.0, STEPS), table)
    assert np.isfinite(broken.calibration().factor(0.99))
    assert broken.calibration().factor(0.99) == 1.0


def test_factor_between_and_beyond_validated_levels() -> None:
    calibration = WidthCalibration({0.1: 0.5, 0.01: 0.7, 0.9: 2.0, 0.99: 3.0})
    assert calibration.factor(0.5) == 1.0
    with pytest.raises(ForecastError, match="median"):
        calibration.apply(np.zeros((2, 2)), (0.1, 0.9))
    assert calibration.factor(0.95) == pytest.approx(2.0 + (0.05 / 0.09))
    assert calibration.factor(0.75) == 2.0  # nearer the median than any validated level
    assert calibration.factor(0.999) == 3.0
    assert calibration.factor(0.05) == pytest.approx(0.5 + 0.2 * (0.05 / 0.09))
    assert WidthCalibration({}).factor(0.9) == 1.0
    with pytest.raises(ForecastError, match="median"):
        RatioScores((0.1, 0.9))


def calming(seed: int, length: int = 24 * 40) -> TimeSeries:
    """Noise around a daily pattern whose spread falls tenfold in the last quarter."""
    rng = np.random.default_rng(seed)
    hours = np.arange(length)
    sd = np.where(hours < length * 3 // 4, 10.0, 1.0)
    values = 200.0 + 30.0 * np.sin(2 * np.pi * hours / 24) + rng.normal(0.0, 1.0, length) * sd
    return TimeSeries(f"calming/{seed}", "request_rate", 3600.0, 0.0, values, "rps", (24,))


def test_auto_narrows_intervals_the_recent_past_says_are_too_wide() -> None:
    cheap = {"candidates": ("seasonal_naive", "ets"), "max_horizon": 24}
    history = calming(3)
    truth = calming(3, 24 * 40 + 24 * 10).values[24 * 40 :]  # same noise law, 10 days on
    plain = make_forecaster("auto", rescale=False, **cheap)
    rescaled = make_forecaster("auto", rescale=True, **cheap)
    for model in (plain, rescaled):
        model.fit_many([history])
    wide = plain.predict_many(24, (0.1, 0.9))[0]
    narrow = rescaled.predict_many(24, (0.1, 0.9))[0]  # the median is not asked for
    assert narrow.quantiles == (0.1, 0.9)
    wide_width = float(np.mean(wide.values[:, 1] - wide.values[:, 0]))
    narrow_width = float(np.mean(narrow.values[:, 1] - narrow.values[:, 0]))
    assert narrow_width < 0.5 * wide_width
    actual = truth[:24]
    assert coverage(actual, narrow.values, 0, 1) >= 0.6  # still an interval, not a point
    assert any(n.startswith("intervals re-scaled: 0.01 x") for n in narrow.notes)
    assert not any(n.startswith("intervals") for n in wide.notes)


def test_re_scaled_widths_come_from_the_model_they_were_measured_on() -> None:
    """With `refit`, the median comes from the re-fitted model but the widths from the walked
    one: its factors were measured on it (a re-fitted `global_gbm` has already narrowed)."""
    gbm = {"rows": 10_000, "calibration_rows": 10_000, "n_estimators": 40, "threads": 1}
    settings = {"candidates": ("global_gbm",), "max_horizon": 24,
                "candidate_params": {"global_gbm": gbm}}  # fmt: skip
    history = calming(4)
    refitted = make_forecaster("auto", rescale=True, **settings)
    walked = make_forecaster("auto", rescale=True, refit=False, **settings)
    for model in (refitted, walked):
        model.fit_many([history])
    levels = (0.1, 0.5, 0.9)
    with_refit = refitted.predict_many(24, levels)[0].values
    walked_only = walked.predict_many(24, levels)[0].values
    width = with_refit[:, 2] - with_refit[:, 0]
    np.testing.assert_allclose(width, walked_only[:, 2] - walked_only[:, 0], rtol=1e-9)
