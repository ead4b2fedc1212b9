"""Forecasters by name, each with a one-sentence summary (what a config or the API selects)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from voltpack.forecast.batch import PerSeries
from voltpack.forecast.models.seasonal_naive import SeasonalNaive
from voltpack.forecast.names import forecaster_names
from voltpack.forecast.protocol import BatchForecaster
from voltpack.forecast.select import TailSelect
from voltpack.model.errors import ForecastError

__all__ = ["forecaster_names", "make_forecaster"]


def make_forecaster(name: str, **params: Any) -> BatchForecaster:
    """A fresh forecaster; `params` are the model's keyword arguments (see its class).

    The models built on statsmodels and LightGBM are imported when first made: a process that
    never forecasts with them (the operator scheduling pods) does not pay a second of imports."""
    # imported here, not at the top: see the docstring
    from voltpack.forecast.models.ensemble import Ensemble  # noqa: PLC0415
    from voltpack.forecast.models.ets import ExponentialSmoothing  # noqa: PLC0415
    from voltpack.forecast.models.global_gbm import GlobalBoost  # noqa: PLC0415

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
