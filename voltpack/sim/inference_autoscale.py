"""A day of an inference service under scaling policies: forecast-driven against reactive.

Time is cut into planning intervals. At the start of each, a policy picks the request rate to
plan for; the planner (`plan_service`) turns it into a fleet, which takes `startup_s` to come
up (model load), so the interval's first `startup_s` is still served by the previous fleet.

- reactive: plan for the rate measured over the interval that just ended;
- forecast: plan for the forecaster's upper quantile of the rate over the next intervals
  (`voltpack.policies.inference.scaling.forecast_planning_rate`), fitted on the measured
  history (earlier days included).

Both multiply their mean rate by the same burst factor (the p99 10-second rate over the mean
rate, measured on the history), so they differ only in which mean they plan for. Each segment
(interval x fleet) is replayed in the serving simulator; queues do not carry over from one
segment to the next (a simplification that favours neither policy).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from voltpack.forecast.series import TimeSeries
from voltpack.model.errors import InvalidRequestError
from voltpack.perf.serving_capacity import ServingSlo
from voltpack.policies.inference.buckets import RequestMix
from voltpack.policies.inference.mix_planner import PlanRequest, plan_service
from voltpack.policies.inference.plan import ServingPlan
from voltpack.policies.inference.prices import PriceList
from voltpack.policies.inference.scaling import (
    DEFAULT_PLANNING_QUANTILE,
    forecast_planning_rate,
    peak_window_rate_per_s,
)
from voltpack.sim.serving import simulate_serving
from voltpack.sim.traces.azure_llm import LlmRequests

BURST_WINDOW_S = 10.0
RATE_RESOLUTION = 0.05
"""Planning rates are rounded up to this relative step, so similar rates share one plan."""


@dataclass(frozen=True)
class AutoscaleSetup:
    """The service and the day being simulated."""

    model: str
    mix: RequestMix
    slo: ServingSlo
    prices: PriceList
    interval_s: float = 900.0
    startup_s: float = 300.0
    forecaster: str = "ets"
    quantile: float = DEFAULT_PLANNING_QUANTILE
    horizon_intervals: int = 2
    gpu_types: tuple[str, ...] = ()


@dataclass
class PolicyOutcome:
    """What one policy did over the day."""

    name: str
    requests: int = 0
    met_slo: int = 0
    cost_usd: float = 0.0
    gpu_hours: float = 0.0
    planning_rates_per_s: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def slo_attainment_pct(self) -> float:
        """Share of the day's requests within both SLOs."""
        return 100.0 * self.met_slo / self.requests if self.requests else math.nan


def interval_rates(
    arrival_s: np.ndarray, start_s: float, intervals: int, interval_s: float
) -> np.ndarray:
    """Mean request rate of each interval from `start_s`."""
    index = ((arrival_s - start_s) // interval_s).astype(np.int64)
    index = index[(index >= 0) & (index < intervals)]
    return np.bincount(index, minlength=intervals) / interval_s


def _slice(requests: LlmRequests, start_s: float, end_s: float) -> LlmRequests:
    chosen = (requests.arrival_s >= start_s) & (requests.arrival_s < end_s)
    return LlmRequests(
        requests.arrival_s[chosen], requests.prompt_tokens[chosen], requests.output_tokens[chosen]
    )


class _Planner:
    """Plans cached by rounded planning rate."""

    def __init__(self, setup: AutoscaleSetup) -> None:
        self.setup = setup
        self.cache: dict[float, ServingPlan] = {}

    def plan(self, rate_per_s: float) -> ServingPlan:
        step = math.log1p(RATE_RESOLUTION)
        rounded = math.exp(math.ceil(math.log(max(rate_per_s, 1e-3)) / step) * step)
        if rounded not in self.cache:
            setup = self.setup
            request = PlanRequest(
                setup.model, setup.mix, rounded, setup.slo, setup.prices, gpu_types=setup.gpu_types
            )
            self.cache[rounded] = plan_service(request)
        return self.cache[rounded]


def simulate_day(
    setup: AutoscaleSetup,
    history: LlmRequests,
    day: LlmRequests,
    day_start_s: float,
) -> dict[str, PolicyOutcome]:
    """Run the reactive and the forecast-driven policy over `day` (arrivals from
    `day_start_s` for one day), with `history` (earlier arrivals) as what was measured before."""
    if day.arrival_s.size == 0 or history.arrival_s.size == 0:
        raise InvalidRequestError("the day and its history need requests")
    intervals = round(86_400.0 / setup.interval_s)
    history_start = float(history.arrival_s.min())
    history_intervals = int((day_start_s - history_start) // setup.interval_s)
    measured = np.concatenate(
        [
            interval_rates(
                history.arrival_s,
                day_start_s - history_intervals * setup.interval_s,
                history_intervals,
                setup.interval_s,
            ),
            interval_rates(day.arrival_s, day_start_s, intervals, setup.interval_s),
        ]
    )
    burst = peak_window_rate_per_s(history.arrival_s, BURST_WINDOW_S) / max(
        float(measured[:history_intervals].mean()), 1e-9
    )
    season = intervals
    planner = _Planner(setup)

    def reactive(k: int) -> float:
        return float(measured[history_intervals + k - 1])

    def forecast(k: int) -> float:
        series = TimeSeries(
            name="request_rate",
            family="request_rate",
            step_s=setup.interval_s,
            start_s=0.0,
            values=measured[: history_intervals + k],
            unit="requests_per_s",
            seasons=(season,),
        )
        return forecast_planning_rate(
            series, setup.horizon_intervals, setup.forecaster, setup.quantile
        ).rate_per_s

    policies: dict[str, Callable[[int], float]] = {"reactive": reactive, "forecast": forecast}
    outcomes = {}
    for name, rate_for in policies.items():
        outcome = PolicyOutcome(name)
        previous = planner.plan(burst * reactive(0))
        for k in range(intervals):
            start = day_start_s + k * setup.interval_s
            mean_rate = rate_for(k)
            outcome.planning_rates_per_s.append(mean_rate)
            current = planner.plan(burst * mean_rate)
            for fleet, begin, end in (
                (previous, start, start + setup.startup_s),
                (current, start + setup.startup_s, start + setup.interval_s),
            ):
                segment = _slice(day, begin, end)
                hours = (end - begin) / 3600.0
                outcome.cost_usd += fleet.cost_per_hour * hours
                outcome.gpu_hours += sum(fleet.gpus_by_type().values()) * hours
                if segment.arrival_s.size == 0:
                    continue
                result = simulate_serving(fleet, segment)
                outcome.requests += segment.arrival_s.size
                outcome.met_slo += int(result.met_slo.sum())
            previous = current
        outcomes[name] = outcome
    return outcomes
