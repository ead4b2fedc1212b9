"""Which request rate to plan an inference service for: forecast-driven or reactive, and
when a new plan is worth its churn (hysteresis).

Forecast-driven scaling plans the next interval for an upper quantile of the forecast
request rate (the forecaster's quantile, not its mean), so the fleet is in place before the
load arrives; reactive scaling plans for the rate just measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voltpack.forecast.registry import make_forecaster
from voltpack.forecast.series import TimeSeries
from voltpack.model.errors import ForecastError, InvalidRequestError

DEFAULT_PLANNING_QUANTILE = 0.9
"""Quantile of the forecast rate a forecast-driven plan covers."""
DEFAULT_REPLAN_RATE_CHANGE = 0.1
"""Relative change of the planning rate below which a running plan is kept."""


@dataclass(frozen=True)
class PlanningRate:
    """The rate to plan for and where it came from."""

    rate_per_s: float
    source: str
    """`forecast q0.9 of <model> over the next N steps`, `measured`, or `fallback: ...`."""


def forecast_planning_rate(
    history: TimeSeries,
    horizon_steps: int,
    forecaster: str,
    quantile: float = DEFAULT_PLANNING_QUANTILE,
) -> PlanningRate:
    """The largest `quantile` forecast of the request rate over the next `horizon_steps`
    samples of `history` (requests per second per sample). Falls back to the last measured
    rate, saying so, when the forecaster cannot use the history."""
    if horizon_steps < 1 or not 0.5 <= quantile < 1.0:
        raise InvalidRequestError("horizon_steps must be >= 1 and quantile in [0.5, 1)")
    finite = history.values[np.isfinite(history.values)]
    if finite.size == 0:
        raise InvalidRequestError(f"request-rate history {history.name} has no measured sample")
    try:
        model = make_forecaster(forecaster)
        model.fit_many([history])
        forecast = model.predict_many(horizon_steps, [quantile])[0]
    except ForecastError as exc:
        return PlanningRate(float(finite[-1]), f"fallback to the last measured rate: {exc}")
    upper = float(np.max(forecast.values[:, 0]))
    return PlanningRate(
        max(upper, 0.0),
        f"forecast q{quantile:g} of {forecaster} over the next {horizon_steps} steps",
    )


def should_replan(
    current_rate_per_s: float | None,
    new_rate_per_s: float,
    relative_change: float = DEFAULT_REPLAN_RATE_CHANGE,
) -> bool:
    """Whether the planning rate moved enough to re-plan: always when there is no plan,
    else when it changed by more than `relative_change` of the planned rate (hysteresis:
    noise around the planned rate does not churn replicas)."""
    if current_rate_per_s is None or current_rate_per_s <= 0:
        return True
    return abs(new_rate_per_s - current_rate_per_s) > relative_change * current_rate_per_s


def peak_window_rate_per_s(
    arrival_s: np.ndarray, window_s: float = 60.0, quantile: float = 0.99
) -> float:
    """The `quantile` of the request rate over consecutive windows of `window_s` (requests
    per second): what a fleet must serve during the busy minutes of a bursty trace, not on
    average (the Azure code trace's busiest minute holds four times its mean)."""
    arrivals = np.asarray(arrival_s, dtype=np.float64)
    if arrivals.size == 0 or window_s <= 0 or not 0 < quantile <= 1:
        raise InvalidRequestError("need arrivals, window_s > 0 and quantile in (0, 1]")
    start = arrivals.min()
    counts = np.bincount(((arrivals - start) // window_s).astype(np.int64))
    return float(np.quantile(counts, quantile) / window_s)


def backlog_planning_rate_per_s(
    arrival_s: np.ndarray,
    prompt_tokens: np.ndarray,
    wait_s: float,
    quantile: float = 0.99,
) -> float:
    """The smallest request rate R such that a fleet draining prompt tokens at R times the
    mean prompt (tokens per second, first come first served, as a fluid) starts `quantile`
    of the requests within `wait_s` of their arrival.

    Counted per request, as SLO attainment is: a burst holds more requests than its share of
    the time, so a quantile of windowed rates (`peak_window_rate_per_s`) under-plans a
    bursty trace. The fluid backlog at arrival i is `X_i - min_{j<=i} X_j` with
    `X_i = (prompt tokens before i) - mu t_i` (Lindley's recursion in closed form); the rate
    is found by bisection. With `wait_s` the TTFT SLO this covers the trace's bursts; the
    capacity model's queueing term covers the randomness within the planned rate.
    """
    arrivals = np.asarray(arrival_s, dtype=np.float64)
    prompts = np.asarray(prompt_tokens, dtype=np.float64)
    if arrivals.size == 0 or arrivals.shape != prompts.shape:
        raise InvalidRequestError("need one prompt size per arrival, and some arrivals")
    if not (wait_s > 0 and 0 < quantile < 1):
        raise InvalidRequestError("need wait_s > 0 and quantile in (0, 1)")
    order = np.argsort(arrivals, kind="stable")
    times = arrivals[order] - arrivals.min()
    tokens = prompts[order]
    before = np.concatenate(([0.0], np.cumsum(tokens)[:-1]))
    mean_prompt = float(tokens.mean())

    def wait_quantile_s(rate: float) -> float:
        drain = rate * mean_prompt
        backlog = before - drain * times
        return float(np.quantile(backlog - np.minimum.accumulate(backlog), quantile) / drain)

    low = 1e-9
    # at `high` the whole trace drains within `wait_s` of its first arrival
    high = max(float(tokens.sum()) / mean_prompt / wait_s, 1e-6)
    for _ in range(60):
        middle = (low * high) ** 0.5
        if wait_quantile_s(middle) <= wait_s:
            high = middle
        else:
            low = middle
        if high - low <= 1e-4 * high:
            break
    return high
