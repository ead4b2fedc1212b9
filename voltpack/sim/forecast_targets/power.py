"""Power targets: a simulated row of servers, and GPU power derived from a measured duty cycle."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from voltpack.forecast.series import TimeSeries
from voltpack.perf.gpu_power import power_model_for
from voltpack.sim.forecast_targets.windows import (
    SECONDS_PER_DAY,
    FloatArray,
    instant_means,
    sampling_interval_s,
    seasons_for,
    step_label,
    window_count,
)
from voltpack.sim.power_row import RowScenario, build_workload, run_row
from voltpack.sim.traces.azure_llm import LlmRequests
from voltpack.sim.traces.genai import load_duty_cycle

FAMILY = "power"
UNIT = "watts"
DUTY_CYCLE_SKU = "A100-80GB"
"""GPU assumed behind the GenAI trace's pods (the trace does not name it): the best-calibrated
model in `voltpack/perf/gpu_power.yaml`, and the GPU of the simulated row."""


def _series(source: str, key: str, step_s: float, start_s: float, values: FloatArray) -> TimeSeries:
    return TimeSeries(
        name=f"{source}/{FAMILY}/{key}/{step_label(step_s)}", family=FAMILY, step_s=step_s,
        start_s=start_s, values=values, unit=UNIT, seasons=seasons_for(step_s, values.size),
    )  # fmt: skip


def duty_cycle_power_w(duty_pct: FloatArray, sku: str = DUTY_CYCLE_SKU) -> FloatArray:
    """Power of one GPU busy `duty_pct` percent of the time: idle power plus the duty share of
    the dynamic power of sustained work at max clock (100 % busy = TDP)."""
    gpu = power_model_for(sku)
    activity = np.clip(duty_pct, 0.0, 100.0) / 100.0 * gpu.sustained_tdp_activity
    return gpu.power_w(activity, gpu.max_clock_mhz)


def genai_gpu_power(
    path: Path, step_s: float, sku: str = DUTY_CYCLE_SKU, source: str = "genai"
) -> TimeSeries:
    """Power of the GPUs of all pods in the duty-cycle file, one GPU per pod (`sku`), per
    window: the pods' summed power at each scrape, averaged over the window's scrapes (NaN
    for a window without a scrape). A pod counts only at the scrapes that report it."""
    samples = load_duty_cycle(path)
    period_s = sampling_interval_s(samples.time_s)
    start_s = math.floor(float(samples.time_s.min()) / step_s) * step_s
    windows = window_count(start_s, float(samples.time_s.max()) + period_s, step_s)
    power = duty_cycle_power_w(samples.duty_pct, sku)
    values = instant_means(samples.time_s, power, start_s, step_s, windows)
    return _series(source, "gpus", step_s, start_s, values)


def row_power(
    trace: LlmRequests, servers: int, days: float, step_s: float, training_share: float = 0.1,
    seed: int = 0, source: str = "row-sim",
) -> tuple[TimeSeries, float]:  # fmt: skip
    """Power of one uncapped row of eight-GPU A100 servers (`voltpack.sim.power_row`: Azure
    LLM requests replayed with a diurnal rate, a `training_share` of training servers), per
    window; and the row's budget (W) in the simulator's default scenario."""
    scenario = RowScenario(
        servers=servers, training_share=training_share,
        duration_s=round(days * SECONDS_PER_DAY), seed=seed,
    )  # fmt: skip
    run = run_row(build_workload(scenario, trace), None)
    windows = run.row_power_w.size // round(step_s)
    per_second = run.row_power_w[: windows * round(step_s)]
    values = per_second.reshape(windows, round(step_s)).mean(axis=1)
    key = f"{servers}servers-{round(100 * training_share)}pct-training"
    return _series(source, key, step_s, 0.0, np.asarray(values, dtype=np.float64)), run.budget_w
