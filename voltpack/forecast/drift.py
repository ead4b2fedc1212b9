"""Refit on measured drift in accuracy, not on a timer, and what that saves.

`walk_forward` steps through a series one sample at a time: forecast, score the one-step-ahead
forecast against the sample that arrives, then either `update()` the model with that sample or
refit it on everything seen so far. With a `DriftPolicy`, it refits only when the mean error of
the last `window_steps` one-step forecasts exceeds `threshold` times the *baseline*: the mean
error of the first `window_steps` forecasts after the last fit (floored at `floor_fraction` of
the history's mean absolute one-step change, so a near-perfect fit does not make noise look
like drift). With no policy it refits every step. The error is the mean pinball loss over
0.5/0.9/0.99. Compute time is measured with the `clock` the caller passes (the forecast package
reads no clock itself).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from voltpack.forecast.metrics import pinball_loss
from voltpack.forecast.protocol import Forecaster
from voltpack.forecast.series import TimeSeries
from voltpack.model.errors import ForecastError

LEVELS = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class DriftPolicy:
    """Refit when recent one-step error > `threshold` x the error right after the last fit."""

    window_steps: int = 48
    threshold: float = 2.0
    floor_fraction: float = 0.1

    def __post_init__(self) -> None:
        if self.window_steps < 1 or self.threshold <= 1.0 or self.floor_fraction < 0:
            raise ForecastError(
                "drift policy: window_steps must be >= 1, threshold > 1 and floor_fraction >= 0"
            )


@dataclass
class DriftMonitor:
    """Errors since the last fit and the decision whether to refit now.

    The baseline is the mean error of the first `window_steps` forecasts after a fit. A refit
    made in the middle of a change may itself start badly; its baseline is then not accepted
    when it is more than `threshold` x the previous one (the previous one stays), so the
    monitor keeps asking for refits until the model is as good as before the change; it already
    asks after a quarter of the window if the new fit's errors so far are that bad."""

    policy: DriftPolicy
    floor: float
    errors: list[float] = field(default_factory=list)
    baseline: float | None = None
    _accepted: bool = False

    def observe(self, error: float) -> bool:
        """Record one forecast error; True when the model should be refitted now."""
        self.errors.append(error)
        size = self.policy.window_steps
        probation = max(1, size // 4)
        on_probation = not self._accepted and self.baseline is not None
        if on_probation and len(self.errors) >= probation:
            assert self.baseline is not None
            if float(np.mean(self.errors)) > self.policy.threshold * self.baseline:
                return True
        if len(self.errors) < size:
            return False
        if not self._accepted:
            measured = max(float(np.mean(self.errors[:size])), self.floor, 1e-12)
            self._accepted = True
            if self.baseline is None or measured <= self.policy.threshold * self.baseline:
                self.baseline = measured
            else:
                return True
        assert self.baseline is not None
        recent = float(np.mean(self.errors[-size:]))
        return recent > self.policy.threshold * self.baseline

    def reset(self) -> None:
        """Start measuring a new fit (the accepted baseline is kept for comparison)."""
        self.errors.clear()
        self._accepted = False


@dataclass(frozen=True)
class WalkReport:
    """What one walk over a series cost and how accurate it was."""

    policy: str
    steps: int
    fits: int  # including the first one
    refit_steps: tuple[int, ...]  # indices (into the series) where a refit happened
    fit_s: float
    update_s: float
    predict_s: float
    mean_pinball: float  # one step ahead, averaged over 0.5/0.9/0.99 and all steps

    @property
    def compute_s(self) -> float:
        return self.fit_s + self.update_s + self.predict_s


def walk_forward(
    make: Callable[[], Forecaster],
    series: TimeSeries,
    start: int,
    policy: DriftPolicy | None,
    clock: Callable[[], float],
) -> WalkReport:
    """Forecast each sample from `start` to the end one step ahead (see the module doc)."""
    if not 2 <= start < len(series):
        raise ForecastError(f"series {series.name}: walk start {start} outside 2..{len(series)}")
    values = series.values
    fit_s = update_s = predict_s = 0.0
    began = clock()
    model = make()
    model.fit(series.head(start))
    fit_s += clock() - began
    fits, refits, losses = 1, [], []
    steps = np.abs(np.diff(values[:start]))
    floor = 0.0 if policy is None else policy.floor_fraction * float(np.nanmean(steps))
    monitor = DriftMonitor(policy or DriftPolicy(), floor)
    for index in range(start, len(values)):
        began = clock()
        forecast = model.predict(1, LEVELS).values[0]
        predict_s += clock() - began
        actual = values[index : index + 1]
        error = float(np.mean([pinball_loss(actual, forecast[j : j + 1], q)
                               for j, q in enumerate(LEVELS)]))  # fmt: skip
        if np.isfinite(error):
            losses.append(error)
        drifted = np.isfinite(error) and monitor.observe(error)
        if index == len(values) - 1:
            break
        began = clock()
        if policy is None or drifted:
            model = make()
            model.fit(series.head(index + 1))
            fit_s += clock() - began
            fits += 1
            refits.append(index + 1)
            monitor.reset()
        else:
            model.update(actual)
            update_s += clock() - began
    name = "refit every step" if policy is None else (
        f"refit on drift (x{policy.threshold:g} over {policy.window_steps} steps)"
    )  # fmt: skip
    mean_loss = float(np.mean(losses)) if losses else float("nan")
    return WalkReport(
        name, len(values) - start, fits, tuple(refits), fit_s, update_s, predict_s, mean_loss
    )


def compare_refit_policies(
    make: Callable[[], Forecaster],
    series: TimeSeries,
    start: int,
    policy: DriftPolicy,
    clock: Callable[[], float],
) -> tuple[WalkReport, WalkReport]:
    """(drift-triggered, refit-every-step) walks over the same samples."""
    return (
        walk_forward(make, series, start, policy, clock),
        walk_forward(make, series, start, None, clock),
    )


def saving(drift: WalkReport, every_step: WalkReport) -> dict[str, float]:
    """How much fitting the drift policy avoided, and what it cost in accuracy."""
    return {
        "fits_drift": float(drift.fits),
        "fits_every_step": float(every_step.fits),
        "compute_s_drift": drift.compute_s,
        "compute_s_every_step": every_step.compute_s,
        "compute_saved_ratio": 1.0 - drift.compute_s / every_step.compute_s
        if every_step.compute_s > 0
        else float("nan"),
        "mean_pinball_drift": drift.mean_pinball,
        "mean_pinball_every_step": every_step.mean_pinball,
    }
