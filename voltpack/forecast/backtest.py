"""Rolling-origin backtests (per-window metrics) for any batch forecaster.

At each origin of `splits.rolling_origins` the model is fitted on every series' history up to
that origin (at most `max_train` samples of it) in one `fit_many` call, predicts `horizon`
samples, and each (series, window) gets MASE, sMAPE, pinball loss at 0.5/0.9/0.99 and their
mean, and the coverage of the central 80% and 98% intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from voltpack.forecast.metrics import coverage, mase, pinball_loss, seasonal_naive_scale, smape
from voltpack.forecast.protocol import BatchForecaster
from voltpack.forecast.series import QuantileForecast, TimeSeries
from voltpack.forecast.splits import rolling_origins

EVAL_QUANTILES = (0.01, 0.1, 0.5, 0.9, 0.99)
PINBALL_LEVELS = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class WindowMetrics:
    """Errors of one forecast of one series over one test window."""

    series: str
    family: str
    model: str
    horizon: int
    origin: int
    mase: float
    smape_pct: float
    pinball_50: float
    pinball_90: float
    pinball_99: float
    mean_pinball: float
    coverage_80: float
    coverage_98: float
    notes: tuple[str, ...]


def score_window(
    history: TimeSeries, actual: np.ndarray, forecast: QuantileForecast
) -> WindowMetrics:
    """Metrics of `forecast` (made from `history`) against the next `actual` samples."""
    median = forecast.quantile(0.5)
    season = min(history.seasons, default=1)
    pinballs = [pinball_loss(actual, forecast.quantile(q), q) for q in PINBALL_LEVELS]
    return WindowMetrics(
        series=history.name,
        family=history.family,
        model=forecast.model,
        horizon=forecast.horizon,
        origin=len(history),
        mase=mase(actual, median, seasonal_naive_scale(history.values, season)),
        smape_pct=smape(actual, median),
        pinball_50=pinballs[0],
        pinball_90=pinballs[1],
        pinball_99=pinballs[2],
        mean_pinball=float(np.mean(pinballs)),
        coverage_80=coverage(actual, forecast.quantile(0.1), forecast.quantile(0.9)),
        coverage_98=coverage(actual, forecast.quantile(0.01), forecast.quantile(0.99)),
        notes=forecast.notes,
    )


def training_window(series: TimeSeries, origin: int, max_train: int | None) -> TimeSeries:
    """The history before `origin`, at most its last `max_train` samples."""
    first = 0 if max_train is None else max(0, origin - max_train)
    return TimeSeries(
        series.name, series.family, series.step_s, series.time_s(first),
        series.values[first:origin], series.unit, series.seasons, series.nonnegative,
    )  # fmt: skip


def backtest(
    make: Callable[[], BatchForecaster],
    histories: Sequence[TimeSeries],
    horizons: Iterable[int],
    windows: int,
    min_train: int,
    max_train: int | None = None,
) -> list[WindowMetrics]:
    """Per-window metrics of a fresh model from `make` at every (horizon, window)."""
    results: list[WindowMetrics] = []
    for horizon in horizons:
        origins = [rolling_origins(len(s), horizon, windows, min_train) for s in histories]
        for window in range(windows):
            heads = [
                training_window(s, o[window], max_train)
                for s, o in zip(histories, origins, strict=True)
            ]
            model = make()
            model.fit_many(heads)
            forecasts = model.predict_many(horizon, EVAL_QUANTILES)
            for series, head, forecast, o in zip(histories, heads, forecasts, origins, strict=True):
                actual = series.values[o[window] : o[window] + horizon]
                scored = score_window(head, actual, forecast)
                results.append(_with_origin(scored, o[window]))
    return results


def _with_origin(metrics: WindowMetrics, origin: int) -> WindowMetrics:
    fields = asdict(metrics)
    fields["origin"] = origin
    return WindowMetrics(**fields)


def summarise(metrics: Sequence[WindowMetrics]) -> dict[str, float]:
    """Means over windows (NaN coverage of an all-missing window is left out)."""
    names = ("mase", "smape_pct", "pinball_50", "pinball_90", "pinball_99", "mean_pinball",
             "coverage_80", "coverage_98")  # fmt: skip
    out: dict[str, float] = {"windows": float(len(metrics))}
    for name in names:
        values = np.array([getattr(m, name) for m in metrics], dtype=np.float64)
        out[name] = float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
    return out
