"""The `auto` model: it picks the candidate that forecast the series' own past best, says so in
the notes, and handles short, flat, gappy and negative histories like the other models."""

from __future__ import annotations

import numpy as np
import pytest

from voltpack.forecast.registry import make_forecaster
from voltpack.forecast.series import TimeSeries
from voltpack.model.errors import ForecastError

from .synthetic_series import (
    SEASON,
    noisy,
    pattern,
    safe_forecasts_of_bad_histories,
)

QUANTILES = (0.01, 0.1, 0.5, 0.9, 0.99)
CANDIDATES = ("naive", "seasonal_naive", "ets")
CHEAP = {"candidates": CANDIDATES, "max_horizon": SEASON}


def random_walk(seed: int, length: int = 24 * 30) -> TimeSeries:
    rng = np.random.default_rng(seed)
    values = 500.0 + np.cumsum(rng.normal(0.0, 3.0, length))
    return TimeSeries(f"walk/{seed}", "gpu_demand", 3600.0, 0.0, values, "gpus", (SEASON,))


def chosen(notes: tuple[str, ...]) -> str:
    note = next(n for n in notes if n.startswith("auto: "))
    return note.split()[1]


def test_auto_keeps_the_level_of_a_random_walk_and_picks_a_seasonal_model_for_a_season() -> None:
    model = make_forecaster("auto", **CHEAP)
    history = random_walk(1)
    model.fit_many([history, noisy(2)])
    walk, seasonal = model.predict_many(SEASON, QUANTILES)
    # a random walk: the last value is the best median (ETS with alpha ~1 is the same rule);
    # naive's median adds the median of its past errors, so allow a drift well inside the
    # spread of 24 steps of sd 3 (about 15)
    assert chosen(walk.notes) in ("naive", "ets")
    assert np.abs(walk.quantile(0.5) - history.values[-1]).max() < 7.0
    assert chosen(seasonal.notes) in ("seasonal_naive", "ets")
    assert walk.model == seasonal.model == "auto"
    truth = pattern(24 * 40 + SEASON, phase=2)[24 * 40 :]
    assert np.abs(seasonal.quantile(0.5) - truth).mean() < 3.0
    # the note gives every candidate's validation loss, so the choice can be checked
    note = next(n for n in seasonal.notes if n.startswith("auto: "))
    assert all(name in note for name in CANDIDATES)


def test_auto_never_nan_on_bad_histories() -> None:
    model = make_forecaster("auto", **CHEAP)
    forecasts = safe_forecasts_of_bad_histories(model, 6, QUANTILES)
    gappy_notes, short_notes, _, _ = (f.notes for f in forecasts)
    assert any("filled" in note for note in gappy_notes)
    assert "auto: naive (history too short to validate)" in short_notes
    np.testing.assert_array_equal(forecasts[2].values, 3.0)


def test_auto_with_the_global_model_among_its_candidates() -> None:
    gbm = {"rows": 10_000, "calibration_rows": 10_000, "n_estimators": 40, "threads": 1}
    model = make_forecaster("auto", max_horizon=SEASON, candidate_params={"global_gbm": gbm})
    model.fit_many([noisy(8), noisy(9)])
    for forecast in model.predict_many(SEASON, QUANTILES):
        assert chosen(forecast.notes) in ("naive", "seasonal_naive", "ets", "global_gbm")
        assert "global_gbm" in next(n for n in forecast.notes if n.startswith("auto: "))
        assert np.isfinite(forecast.values).all()


def test_auto_rejects_bad_settings_negative_values_and_predict_before_fit() -> None:
    with pytest.raises(ForecastError, match="not itself"):
        make_forecaster("auto", candidates=("naive", "auto"))
    with pytest.raises(ForecastError, match="unknown forecaster 'prophet'"):
        make_forecaster("auto", candidates=("prophet",)).fit(noisy(1))
    model = make_forecaster("auto", **CHEAP)
    with pytest.raises(ForecastError, match="before fit"):
        model.predict(3, QUANTILES)
    values = noisy(7).values.copy()
    values[100] = -5.0
    with pytest.raises(ForecastError, match="negative value"):
        model.fit(TimeSeries("neg", "power", 3600.0, 0.0, values, "watts", (SEASON,)))


@pytest.mark.parametrize("refit", [True, False])
def test_auto_serves_each_series_from_its_own_choice_with_or_without_refit(refit: bool) -> None:
    flat_then_step = np.concatenate((np.full(400, 8.0), np.full(320, 12.0)))
    histories = [
        TimeSeries("step", "gpu_demand", 3600.0, 0.0, flat_then_step, "gpus", (SEASON,)),
        noisy(11),
        random_walk(12),
    ]
    model = make_forecaster("auto", refit=refit, **CHEAP)
    model.fit_many(histories)
    model.update_many([np.array([12.0]), pattern(1, phase=11 + 24 * 40), np.array([500.0])])
    step, seasonal, walk = model.predict_many(SEASON, QUANTILES)
    assert [f.series for f in (step, seasonal, walk)] == ["step", "synthetic/11", "walk/12"]
    # the step series has been flat at 12 for 320 samples: every candidate forecasts 12
    np.testing.assert_allclose(step.quantile(0.5), 12.0, atol=0.5)
    truth = pattern(24 * 40 + 1 + SEASON, phase=11)[24 * 40 + 1 :]
    assert np.abs(seasonal.quantile(0.5) - truth).mean() < 3.0
    assert np.abs(walk.quantile(0.5) - 500.0).max() < 8.0
