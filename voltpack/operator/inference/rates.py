"""The request rate an InferenceService is planned for.

Until a rate is measured it is the spec's `ratePerSecond`. A metrics adapter (anything that
can read the service's request rate, e.g. from Prometheus, and annotate an object) reports the
measured rate in the `voltpack.io/observed-rate-per-second` annotation; the operator samples
it every cycle into a short history per service (one value per `scaling.sampleSeconds` slot,
the latest in a slot wins; two days at most) and derives the planning rate from it:
`reactive` takes the latest measurement, `forecast` the `scaling.quantile` of the forecast over
the next `scaling.horizonMinutes` (voltpack.policies.inference.scaling), `burst` the
burst-aware rate of the last `scaling.burstWindowMinutes` (`slot_backlog_planning_rate_per_s`:
the rate that starts `scaling.burstQuantile` of the requests within the TTFT SLO). With
`scaling.rateSource: vllm` the history is the replicas' own request counts per slot
(inference/vllm.py) instead of the annotation. The history lives in the operator's memory:
after a restart or failover it starts again, and a forecast falls back to the latest
measurement (saying so) until it has two samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from voltpack.forecast.series import TimeSeries
from voltpack.model.errors import InvalidRequestError
from voltpack.model.resources.inferenceservice import (
    OBSERVED_RATE_ANNOTATION,
    InferenceServiceSpec,
    ServiceScaling,
)
from voltpack.policies.inference.scaling import (
    PlanningRate,
    backtested_slot_planning_rate_per_s,
    forecast_planning_rate,
)

HISTORY_S = 2 * 86_400.0
"""How much measured-rate history the operator keeps per service."""
SEASON_S = 86_400.0
"""The season a forecaster is told about (daily traffic)."""
MIN_PLANNING_RATE_PER_S = 0.01
"""Floor of a measured planning rate: a service is never planned down to no replica."""


def parse_observed_rate(annotations: dict[str, str]) -> float | None:
    """The measured rate in the service's annotation; None when absent. InvalidRequestError
    naming the annotation when it is not a non-negative number."""
    text = annotations.get(OBSERVED_RATE_ANNOTATION)
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise InvalidRequestError(
            f"annotation {OBSERVED_RATE_ANNOTATION}={text!r} is not a request rate; write a "
            "non-negative number of requests per second"
        )
    return value


@dataclass
class RateHistory:
    """Measured rates on a regular grid of `step_s` slots (Unix time // step), oldest first."""

    step_s: float
    max_samples: int
    slots: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    version: int = 0
    """Bumped on every change: a forecast is recomputed only when it moves."""

    def observe(self, now_s: float, rate_per_s: float) -> None:
        """Record the measurement at `now_s` (the latest one in a slot wins)."""
        slot = int(now_s // self.step_s)
        if self.slots and slot < self.slots[-1]:
            return  # a clock that went back: keep the history as it is
        if self.slots and slot == self.slots[-1]:
            if self.values[-1] == rate_per_s:
                return
            self.values[-1] = rate_per_s
        else:
            self.slots.append(slot)
            self.values.append(rate_per_s)
            while self.slots and self.slots[-1] - self.slots[0] >= self.max_samples:
                del self.slots[0], self.values[0]
        self.version += 1

    def series(self, name: str) -> TimeSeries:
        """The history as a regular series (NaN in slots without a measurement)."""
        first = self.slots[0]
        values = np.full(self.slots[-1] - first + 1, np.nan)
        values[np.array(self.slots) - first] = self.values
        season = round(SEASON_S / self.step_s)
        return TimeSeries(
            name=name,
            family="request_rate",
            step_s=self.step_s,
            start_s=first * self.step_s,
            values=values,
            unit="requests_per_s",
            seasons=(season,) if season >= 2 else (),
        )


def floored(rate: PlanningRate) -> PlanningRate:
    """The rate, raised to MIN_PLANNING_RATE_PER_S (saying so) when below it."""
    if rate.rate_per_s >= MIN_PLANNING_RATE_PER_S:
        return rate
    return PlanningRate(
        MIN_PLANNING_RATE_PER_S,
        f"{rate.source}, raised to the floor of {MIN_PLANNING_RATE_PER_S:g}/s",
    )


def burst_counts(history: RateHistory, spec: InferenceServiceSpec) -> np.ndarray:
    """Requests per slot of the history's last `scaling.burstWindowMinutes` (a slot without a
    measurement counts no request)."""
    window = max(1, math.ceil(spec.scaling.burst_window_minutes * 60.0 / history.step_s - 1e-9))
    values = history.series("burst").values[-window:]
    return np.asarray(np.nan_to_num(values, nan=0.0) * history.step_s, dtype=np.float64)


def burst_rate(history: RateHistory, spec: InferenceServiceSpec, label: str) -> PlanningRate:
    """The burst-aware planning rate of the history's last `scaling.burstWindowMinutes`
    (`burst_counts`), for the spec's TTFT SLO, and never below the window's mean rate."""
    scaling = spec.scaling
    counts = burst_counts(history, spec)
    wait_s = spec.slo.ttft_ms / 1000.0
    backtested = backtested_slot_planning_rate_per_s(
        counts, history.step_s, wait_s, scaling.burst_quantile
    )
    # never below the window's mean: a slower fleet falls behind without end, which the
    # window's end would hide (a backlog still growing when the window closes is not counted)
    mean_per_s = float(counts.sum()) / (counts.size * history.step_s)
    rate = max(backtested.rate_per_s, mean_per_s)
    headroom = (
        f", x {backtested.headroom:.2f} (the window's second half needed that much more than "
        "its first half gave)"
        if backtested.headroom > 1.0
        else ""
    )
    coarse = (
        f"; slots of {history.step_s:g} s are not well below the TTFT SLO: bursts inside a "
        "slot are smoothed"
        if history.step_s > wait_s
        else ""
    )
    return PlanningRate(
        rate,
        f"burst-aware ({label}): starts {scaling.burst_quantile:g}"
        f" of the requests of the last {counts.size} slots of {history.step_s:g} s within the "
        f"TTFT SLO of {wait_s:g} s{headroom}{coarse}",
    )


@dataclass
class _Forecast:
    version: int
    scaling: ServiceScaling
    rate: PlanningRate


class RateTracker:
    """Measured-rate histories of every service and the planning rate each one leads to."""

    def __init__(self, history_s: float = HISTORY_S) -> None:
        self.history_s = history_s
        self._histories: dict[str, RateHistory] = {}
        self._forecasts: dict[str, _Forecast] = {}
        self._windows: dict[str, tuple[np.ndarray, float]] = {}

    def planning_rate(
        self, key: str, spec: InferenceServiceSpec, observed_per_s: float | None, now_s: float
    ) -> PlanningRate:
        """The rate to plan service `key` for, given its latest measurement (None: none
        reported) at `now_s`, and where that rate comes from."""
        if observed_per_s is None:
            self.forget_service(key)
            return PlanningRate(
                spec.rate_per_second, "spec.ratePerSecond, no measured rate reported"
            )
        scaling = spec.scaling
        history = self._histories.get(key)
        if history is None or history.step_s != scaling.sample_seconds:
            history = RateHistory(
                scaling.sample_seconds, max(2, int(self.history_s // scaling.sample_seconds))
            )
            self._histories[key] = history
        history.observe(now_s, observed_per_s)
        latest = PlanningRate(observed_per_s, f"measured ({OBSERVED_RATE_ANNOTATION})")
        return self._rate_by_mode(key, spec, history, latest, latest.source, "")

    def counted_planning_rate(
        self,
        key: str,
        spec: InferenceServiceSpec,
        first_slot: int,
        counts: list[float],
        version: int,
    ) -> PlanningRate:
        """The rate to plan service `key` for from its requests counted per complete slot of
        `spec.scaling.sampleSeconds` (`counts[i]` in slot `first_slot + i`, at least one),
        e.g. from the replicas' vLLM counters; `version` changes whenever the counts do."""
        scaling = spec.scaling
        step_s = scaling.sample_seconds
        history = RateHistory(step_s, len(counts))
        history.slots = list(range(first_slot, first_slot + len(counts)))
        history.values = [count / step_s for count in counts]
        history.version = version
        label = "vLLM request counters (vllm:request_success_total + in flight)"
        latest = PlanningRate(history.values[-1], f"measured, {label}, latest {step_s:g} s slot")
        return self._rate_by_mode(key, spec, history, latest, label, f", from {label}")

    def _rate_by_mode(
        self,
        key: str,
        spec: InferenceServiceSpec,
        history: RateHistory,
        latest: PlanningRate,
        label: str,
        forecast_suffix: str,
    ) -> PlanningRate:
        """`scaling.mode`'s rate from `history`: `latest` (reactive), the burst-aware rate
        (its source naming `label`), or the forecast (its source plus `forecast_suffix`);
        floored."""
        if spec.scaling.mode == "reactive":
            return floored(latest)
        if spec.scaling.mode == "burst":
            self._windows[key] = (burst_counts(history, spec), history.step_s)
            return floored(burst_rate(history, spec, label))
        self._windows.pop(key, None)
        forecast = self._forecast(key, history, spec.scaling)  # cached: the same object
        if forecast_suffix:
            forecast = PlanningRate(forecast.rate_per_s, forecast.source + forecast_suffix)
        return floored(forecast)

    def _forecast(self, key: str, history: RateHistory, scaling: ServiceScaling) -> PlanningRate:
        cached = self._forecasts.get(key)
        if cached is not None and cached.version == history.version and cached.scaling == scaling:
            return cached.rate
        horizon_steps = max(1, math.ceil(scaling.horizon_minutes * 60.0 / history.step_s))
        result = forecast_planning_rate(
            history.series(key), horizon_steps, scaling.forecaster, scaling.quantile
        )
        rate = PlanningRate(result.rate_per_s, f"measured rate, {result.source}")
        self._forecasts[key] = _Forecast(history.version, scaling, rate)
        return rate

    def burst_window(self, key: str) -> tuple[np.ndarray, float] | None:
        """The requests per slot (and the slot in seconds) the latest burst-mode rate of
        service `key` was computed from; None when its latest rate was not burst-aware."""
        return self._windows.get(key)

    def forget_annotation(self, key: str) -> None:
        """Drop one service's annotation history (its rate is measured otherwise now)."""
        self._histories.pop(key, None)

    def forget_service(self, key: str) -> None:
        """Drop one service's history."""
        self._histories.pop(key, None)
        self._forecasts.pop(key, None)
        self._windows.pop(key, None)

    def keep_only(self, keys: set[str]) -> None:
        """Drop the histories of services that are gone."""
        for key in (set(self._histories) | set(self._forecasts) | set(self._windows)) - keys:
            self.forget_service(key)
