"""The single-series protocol for a batch forecaster: one series is a batch of one."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from voltpack.forecast.series import FloatArray, QuantileForecast, TimeSeries
from voltpack.model.errors import ForecastError


class SingleFromBatch(ABC):
    """Base of batch forecasters: `fit`/`update`/`predict` act on a batch of one series."""

    name: str

    def check_update_count(self, updates: int, fitted: int) -> None:
        """`update_many` takes one array per fitted series, in the order they were fitted."""
        if updates != fitted:
            raise ForecastError(f"{self.name}: {updates} updates for {fitted} series")

    @abstractmethod
    def fit_many(self, histories: Sequence[TimeSeries]) -> None: ...

    @abstractmethod
    def update_many(self, new_values: Sequence[FloatArray]) -> None: ...

    @abstractmethod
    def predict_many(self, horizon: int, quantiles: Sequence[float]) -> list[QuantileForecast]: ...

    def fit(self, history: TimeSeries) -> None:
        """Fit on one history."""
        self.fit_many([history])

    def update(self, new_values: FloatArray) -> None:
        """Append samples to the one series."""
        self.update_many([new_values])

    def predict(self, horizon: int, quantiles: Sequence[float]) -> QuantileForecast:
        """Quantiles of the one series."""
        return self.predict_many(horizon, quantiles)[0]
