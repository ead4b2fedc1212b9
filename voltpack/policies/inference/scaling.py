"""Which request rate to plan an inference service for: forecast-driven or reactive, and
when a new plan is worth its churn (hysteresis).

Forecast-driven scaling plans the next interval for an upper quantile of the forecast
request rate (the forecaster's quantile, not its mean), so the fleet is in place before the
load arrives; reactive scaling plans for the rate just measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from voltpack.forecast.registry import make_forecaster
from voltpack.forecast.series import TimeSeries
from voltpack.model.errors import ForecastError, InvalidRequestError

DEFAULT_PLANNING_QUANTILE = 0.9
"""Quantile of the forecast rate a forecast-driven plan covers."""
DEFAULT_REPLAN_RATE_CHANGE = 0.1
"""Relative change of the planning rate below which a running plan is kept."""
MIN_BACKTEST_REQUESTS = 100
"""Requests each half of a window needs before its self-backtest counts: at the default
quantile (0.99) fewer hold no late request to measure."""


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

    # at the upper bound the whole trace drains within `wait_s` of its first arrival
    high = max(float(tokens.sum()) / mean_prompt / wait_s, 1e-6)
    return _smallest_rate(lambda rate: wait_quantile_s(rate) <= wait_s, high, 60)


def _smallest_rate(meets: Callable[[float], bool], high: float, iterations: int) -> float:
    """The smallest rate in (0, `high`] that `meets` the goal (monotone in the rate), by
    geometric bisection to 1e-4 relative."""
    low = 1e-9
    for _ in range(iterations):
        middle = (low * high) ** 0.5
        if meets(middle):
            high = middle
        else:
            low = middle
        if high - low <= 1e-4 * high:
            break
    return high


def slot_backlog_planning_rate_per_s(
    counts: np.ndarray,
    slot_s: float,
    wait_s: float,
    quantile: float = 0.99,
    prompt_tokens: np.ndarray | None = None,
) -> float:
    """`backlog_planning_rate_per_s` from requests counted per slot instead of per request.

    `counts[k]` requests (and `prompt_tokens[k]` prompt tokens; default: every request the
    mean prompt) arrived in the k-th consecutive slot of `slot_s` seconds. The smallest rate
    R such that a fluid fleet draining prompt tokens at R times the mean prompt (first come
    first served) starts `quantile` of the requests within `wait_s` of their arrival.

    What the slot resolution loses: inside a slot the requests are taken as spread evenly,
    so a burst shorter than a slot is smoothed over it, and a slot's prompts all weigh its
    mean prompt. With slots much shorter than `wait_s` the rate is close to the per-request
    one; with slots much longer it tends to the `quantile` of the per-slot rates (requests
    weighted), which under-plans bursts inside a slot. Per slot the backlog is piecewise
    linear (inflow and drain constant), so the late share of each slot is exact for the
    evened-out arrivals; the rate is found by bisection. No request: 0.
    """
    arrived = np.asarray(counts, dtype=np.float64)
    if arrived.ndim != 1 or not np.all(np.isfinite(arrived)) or np.any(arrived < 0):
        raise InvalidRequestError("counts must be one finite non-negative count per slot")
    if not (slot_s > 0 and wait_s > 0 and 0 < quantile < 1):
        raise InvalidRequestError("need slot_s > 0, wait_s > 0 and quantile in (0, 1)")
    total = float(arrived.sum())
    if total <= 0:
        return 0.0
    if prompt_tokens is None:
        tokens = arrived.copy()
    else:
        tokens = np.asarray(prompt_tokens, dtype=np.float64)
        if tokens.shape != arrived.shape or not np.all(np.isfinite(tokens)) or np.any(tokens < 0):
            raise InvalidRequestError("prompt_tokens must be one non-negative count per slot")
        if tokens.sum() <= 0:
            tokens = arrived.copy()
    mean_prompt = float(tokens.sum()) / total
    allowed_late = (1.0 - quantile) * total

    def late_requests(rate: float) -> float:
        drain = rate * mean_prompt  # tokens per second
        net = tokens - drain * slot_s
        level = np.concatenate(([0.0], np.cumsum(net)[:-1]))
        backlog = level - np.minimum(np.minimum.accumulate(level), 0.0)  # at each slot start
        limit = drain * wait_s  # a backlog above this starts later than wait_s
        slope = tokens / slot_s - drain
        with np.errstate(divide="ignore", invalid="ignore"):
            rising = slot_s - np.clip((limit - backlog) / slope, 0.0, slot_s)
            falling = np.clip((backlog - limit) / -slope, 0.0, slot_s)
        flat = np.where(backlog > limit, slot_s, 0.0)
        late_s = np.where(slope > 0, rising, np.where(slope < 0, falling, flat))
        return float(np.sum(arrived * late_s / slot_s))

    high = max(total / wait_s, 1e-6)  # drains every token of the window within wait_s
    return _smallest_rate(lambda rate: late_requests(rate) <= allowed_late, high, 80)


@dataclass(frozen=True)
class BacktestedRate:
    """A burst-aware planning rate with the headroom the window's own backtest asks for."""

    rate_per_s: float
    """`window_rate_per_s` x `headroom`: what to plan for."""
    window_rate_per_s: float
    """The burst-aware rate of the whole window."""
    headroom: float
    """max(1, the rate the window's second half needed / the rate its first half gave); 1
    when a half holds fewer than MIN_BACKTEST_REQUESTS requests."""


def backtest_headroom(first_half_rate_per_s: float, second_half_rate_per_s: float) -> float:
    """How much more the later half of a window needed than a plan made from the earlier
    half gave (at least 1)."""
    if first_half_rate_per_s <= 0 or not np.isfinite(second_half_rate_per_s):
        return 1.0
    return max(1.0, second_half_rate_per_s / first_half_rate_per_s)


def backtested_planning_rate_per_s(
    arrival_s: np.ndarray,
    prompt_tokens: np.ndarray,
    wait_s: float,
    quantile: float = 0.99,
) -> BacktestedRate:
    """`backlog_planning_rate_per_s` of the window, raised by its own backtest.

    A plan lives on requests it never saw: bursts grow with the time watched, so the window's
    worst burst understates the next window's. The window is cut in two equal spans of time;
    the rate its first half asks for is checked against the rate its second half needed,
    and the plan for the next window carries that ratio (never below 1): the same
    out-of-sample check the plan itself will face, made inside the data it is fitted on.
    """
    arrivals = np.asarray(arrival_s, dtype=np.float64)
    prompts = np.asarray(prompt_tokens, dtype=np.float64)
    whole = backlog_planning_rate_per_s(arrivals, prompts, wait_s, quantile)
    middle_s = (float(arrivals.min()) + float(arrivals.max())) / 2.0
    first = arrivals < middle_s
    second = ~first
    if min(int(first.sum()), int(second.sum())) < MIN_BACKTEST_REQUESTS:
        return BacktestedRate(whole, whole, 1.0)
    headroom = backtest_headroom(
        backlog_planning_rate_per_s(arrivals[first], prompts[first], wait_s, quantile),
        backlog_planning_rate_per_s(arrivals[second], prompts[second], wait_s, quantile),
    )
    return BacktestedRate(whole * headroom, whole, headroom)


def backtested_slot_planning_rate_per_s(
    counts: np.ndarray,
    slot_s: float,
    wait_s: float,
    quantile: float = 0.99,
    prompt_tokens: np.ndarray | None = None,
) -> BacktestedRate:
    """`slot_backlog_planning_rate_per_s` of the slots, raised by their own backtest (the
    first half of the slots against the second, as `backtested_planning_rate_per_s`)."""
    arrived = np.asarray(counts, dtype=np.float64)
    whole = slot_backlog_planning_rate_per_s(arrived, slot_s, wait_s, quantile, prompt_tokens)
    half = arrived.size // 2
    early, late = arrived[:half], arrived[half:]
    if half == 0 or min(float(early.sum()), float(late.sum())) < MIN_BACKTEST_REQUESTS:
        return BacktestedRate(whole, whole, 1.0)
    tokens = None if prompt_tokens is None else np.asarray(prompt_tokens, dtype=np.float64)
    headroom = backtest_headroom(
        slot_backlog_planning_rate_per_s(
            early, slot_s, wait_s, quantile, None if tokens is None else tokens[:half]
        ),
        slot_backlog_planning_rate_per_s(
            late, slot_s, wait_s, quantile, None if tokens is None else tokens[half:]
        ),
    )
    return BacktestedRate(whole * headroom, whole, headroom)
