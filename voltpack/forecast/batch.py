"""Run a single-series forecaster over many series with the batch interface."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from voltpack.forecast.protocol import Forecaster
from voltpack.forecast.series import FloatArray, QuantileForecast, TimeSeries
from voltpack.forecast.single_from_batch import SingleFromBatch
from voltpack.model.errors import ForecastError


class PerSeries(SingleFromBatch):
    """One independent copy of a single-series model per series (no shared strength).

    The first series (in `fit`) is also served by the single-series protocol."""

    def __init__(self, factory: Callable[[], Forecaster]) -> None:
        self._factory = factory
        self.name = factory().name
        self._models: list[Forecaster] = []

    def fit_many(self, histories: Sequence[TimeSeries]) -> None:
        models = []
        for history in histories:
            model = self._factory()
            model.fit(history)
            models.append(model)
        self._models = models

    def update_many(self, new_values: Sequence[FloatArray]) -> None:
        self.check_update_count(len(new_values), len(self._models))
        for model, values in zip(self._models, new_values, strict=True):
            model.update(values)

    def predict_many(self, horizon: int, quantiles: Sequence[float]) -> list[QuantileForecast]:
        if not self._models:
            raise ForecastError(f"{self.name}: predict called before fit")
        return [model.predict(horizon, quantiles) for model in self._models]
