"""How little power a row can draw while its high-priority work runs untouched.

POLCA's constraints leave high priority within 1 % of its uncapped median latency, so its
power is, to within that 1 %, what it draws uncapped. Everything else can at most be slowed to
the cap floor. This module splits a row's uncapped power into its groups and computes two
floors per second:

- `frugal_w`: high priority uncapped, low-priority inference and training all at the cap
  floor all the time: no policy that leaves high priority alone draws less;
- `training_kept_w`: the same with training at full speed (what the row draws when training
  keeps its throughput and low-priority inference gives everything it can).

Their peak-hour means against the budget say whether a server count can fit at all, and how
much of training's power the peak hours must take (training may lose at most 5 % of its
iterations over the run). No policy is run: the models of `voltpack.perf` are evaluated
directly with every clock at max and the floor caps where stated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voltpack.perf.gpu_power import power_model_for
from voltpack.perf.llm_inference import inference_busy, power_from_busy_w
from voltpack.perf.training import training_power_w
from voltpack.policies.power.ladder import FloatArray
from voltpack.power.setup import default_actions
from voltpack.sim.power_row import GPU_SKU, RowWorkload

HOUR_S = 3600


@dataclass(frozen=True)
class RowPowerParts:
    """Per second (W): the row's groups uncapped, and the two floors."""

    budget_w: float
    high_w: FloatArray
    low_inference_w: FloatArray
    training_w: FloatArray
    frugal_w: FloatArray
    training_kept_w: FloatArray

    @property
    def uncapped_w(self) -> FloatArray:
        """The whole row uncapped."""
        return np.asarray(self.high_w + self.low_inference_w + self.training_w, dtype=np.float64)

    def peak_hour_share(self, power_w: FloatArray) -> float:
        """The largest mean over a whole clock hour, as a share of the budget."""
        hours = power_w.size // HOUR_S
        if hours == 0:
            return float(power_w.mean() / self.budget_w)
        hourly = power_w[: hours * HOUR_S].reshape(hours, HOUR_S).mean(axis=1)
        return float(hourly.max() / self.budget_w)

    def summary(self) -> dict[str, float]:
        """Shares of the budget: peak-hour means and peak seconds of each series."""
        out: dict[str, float] = {}
        for name, series in (
            ("uncapped", self.uncapped_w), ("high_priority", self.high_w),
            ("frugal", self.frugal_w), ("training_kept", self.training_kept_w),
        ):  # fmt: skip
            out[f"{name}_mean_share"] = float(series.mean() / self.budget_w)
            out[f"{name}_peak_hour_share"] = self.peak_hour_share(series)
            out[f"{name}_peak_second_share"] = float(series.max() / self.budget_w)
        out["training_kept_seconds_over_budget"] = float(
            np.sum(self.training_kept_w > self.budget_w)
        )
        return out


def row_power_parts(workload: RowWorkload) -> RowPowerParts:
    """Split the row's power by group, uncapped and at the floors (see the module doc)."""
    gpu = power_model_for(GPU_SKU)
    floor_w = default_actions(GPU_SKU, gpu).floor_power_w
    n_high, n_inf = workload.n_high, workload.n_inference
    duration = workload.scenario.duration_s
    shape = workload.load.prefill_work_s.shape
    clocks = np.full(shape, gpu.max_clock_mhz)
    profile = workload.inference_profile
    uncapped = power_from_busy_w(inference_busy(workload.load, clocks, profile, gpu), profile, gpu)
    limits = np.full(shape, np.inf)
    limits[n_high:] = floor_w
    floored = power_from_busy_w(
        inference_busy(workload.load, clocks, profile, gpu, limits), profile, gpu
    )
    zeros = np.zeros(duration)
    training_full, training_floor = zeros, zeros
    if workload.n_training:
        train_clocks = np.full((workload.n_training, duration), gpu.max_clock_mhz)
        args = (duration, train_clocks, 1.0, workload.training_profile, gpu)
        phase, iteration_s = workload.training_phase, workload.training_iteration_s
        training_full = training_power_w(*args, start_phase=phase, iteration_s=iteration_s).sum(
            axis=0
        )
        training_floor = training_power_w(
            *args, np.full_like(train_clocks, floor_w), start_phase=phase, iteration_s=iteration_s
        ).sum(axis=0)
    high = uncapped[:n_high].sum(axis=0) if n_high else zeros
    low = uncapped[n_high:n_inf].sum(axis=0) if n_inf > n_high else zeros
    low_floor = floored[n_high:n_inf].sum(axis=0) if n_inf > n_high else zeros
    return RowPowerParts(
        budget_w=workload.budget_w,
        high_w=np.asarray(high, dtype=np.float64),
        low_inference_w=np.asarray(low, dtype=np.float64),
        training_w=np.asarray(training_full, dtype=np.float64),
        frugal_w=np.asarray(high + low_floor + training_floor, dtype=np.float64),
        training_kept_w=np.asarray(high + low_floor + training_full, dtype=np.float64),
    )
