"""Forecasters by name, each with a one-sentence summary (what a config or the API selects)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from voltpack.forecast.batch import PerSeries
from voltpack.forecast.ensemble import Ensemble
from voltpack.forecast.ets import ExponentialSmoothing
from voltpack.forecast.global_gbm import GlobalBoost
from voltpack.forecast.protocol import BatchForecaster
from voltpack.forecast.seasonal_naive import SeasonalNaive
from voltpack.forecast.select import TailSelect
from voltpack.model.errors import ForecastError

_SUMMARIES = {
    "naive": "Repeats the last value; quantiles are the conformal quantiles of the rule's own "
    "past errors at each horizon.",
    "seasonal_naive": "Repeats the last season; quantiles are the conformal quantiles of the "
    "rule's own past errors at each horizon (naive when shorter than a season).",
    "ets": "statsmodels exponential smoothing (additive error and season) with its Gaussian "
    "prediction intervals, one model per series.",
    "global_gbm": "One LightGBM direct multi-horizon model trained across all series on "
    "normalised lags, seasonal lags and calendar features, with split-conformal quantiles.",
    "ensemble": "The mean of the ets and global_gbm medians, with quantiles re-calibrated by "
    "split conformal on each series' own recent forecast errors.",
    "auto": "Per series, whichever of naive, seasonal_naive, ets and global_gbm had the lowest "
    "pinball loss forecasting the series' own recent past (walked through its last origins).",
}


def forecaster_names() -> dict[str, str]:
    """Every registered forecaster name with its one-sentence summary."""
    return dict(_SUMMARIES)


def make_forecaster(name: str, **params: Any) -> BatchForecaster:
    """A fresh forecaster; `params` are the model's keyword arguments (see its class)."""
    builders: dict[str, Callable[[], BatchForecaster]] = {
        "naive": lambda: PerSeries(lambda: SeasonalNaive(**{"season": 1, **params})),
        "seasonal_naive": lambda: PerSeries(lambda: SeasonalNaive(**params)),
        "ets": lambda: PerSeries(lambda: ExponentialSmoothing(**params)),
        "global_gbm": lambda: GlobalBoost(**params),
        "ensemble": lambda: Ensemble(**params),
        "auto": lambda: TailSelect(
            lambda inner, kwargs: make_forecaster(inner, **kwargs), **params
        ),
    }
    if name not in builders:
        raise ForecastError(f"unknown forecaster {name!r}; known: {sorted(builders)}")
    try:
        return builders[name]()
    except TypeError as exc:
        raise ForecastError(f"forecaster {name!r}: bad parameters {params}: {exc}") from exc
