"""Power and progress of low-priority, synchronous data-parallel training on 8-GPU servers.

Each iteration is a compute phase (GPUs at their power limit, compute-bound, stretches with
max_clock / clock) followed by a communication phase (all-reduce and synchronisation: low
GPU power, not clock-bound). All GPUs of the job move in lockstep, so server power drops at
every iteration boundary. Progress is a fluid: in a bin at clock f the job advances
`bin_s / iteration_s(f)` iterations; the phase position within an iteration decides how much
of the bin is compute and how much communication, so a few-second iteration shows its drops
at 1 s resolution. Arrays over bins may carry a leading server axis: `[server, bin]`; a
per-server `iteration_s` lets jobs of different iteration times drift in phase.

Under a per-GPU power cap the compute phase runs at the clock the cap allows:
`iteration_slowdown`, `energy_per_iteration_j` and `knee_power_limit_w` (the lowest cap
within a given slowdown) read the trade-off off the same model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from numpy.typing import ArrayLike

from voltpack.perf.gpu_power import (
    FloatArray,
    GpuPowerModel,
    ServerPowerModel,
    server_power_model_for,
)
from voltpack.perf.links import PerfModelError


@dataclass(frozen=True)
class TrainingProfile:
    """One training job's iteration on one server. Sources, per field:

    - iteration_s 3.0, compute_share 0.8: scenario values, not calibrated. POLCA and the
      Azure power-stabilisation study (Choukse et al., arXiv 2508.14318) show synchronous
      training power swinging between a compute-heavy and a communication-heavy phase every
      iteration; 3 s is in the "few seconds" range those traces show, and a 20 %
      communication phase is typical of data-parallel LLM training on DGX-A100.
    - compute_activity None (= the GPU's `sustained_tdp_activity`): the compute phase holds
      the GPUs at their 400 W limit, which with the dgx-a100 server model gives
      ~97 % of the 6.5 kW provisioned power, POLCA's training anchor.
    - communication_activity 0.35: estimate; GPUs mostly wait on NCCL transfers (about
      180 W per A100, 45 % of TDP).
    - compute_bound_share 0.9: estimate; dense GEMMs dominate LLM training compute, so the
      compute phase slows nearly in proportion to the clock. It decides the efficiency knee
      (`knee_power_limit_w`): with 0.9 a per-GPU cap at 90 / 80 / 70 % of TDP slows an
      iteration 3.7 / 8.2 / 13.7 % and saves 3.4 / 6.7 / 9.8 % of the server's energy per
      iteration (5.2 / 10.6 / 16.1 % of the GPUs'): no free knee. Zeus (NSDI'23) saves more
      by also tuning the batch size, and Perseus (SOSP'24) up to 30 % with negligible loss by
      slowing only non-critical pipeline stages (imbalance this one-job-per-server model does
      not have); no published A100 measurement used here pins the share, so it stays.
    - non_gpu_load_coupling 0.59: fitted to POLCA's training anchor: a training server
      peaks at ~97 % of the 6.5 kW provisioned power (6305 W) with its 8 GPUs held at the
      400 W limit, so non-GPU power at full load is 3105 W; over the 1500 W non-GPU idle
      that is (3105 - 1500) / (8 x (400 - 60)) = 0.59 W per W of GPU power above idle
      (CPUs feeding data, NICs and NVSwitches carrying gradients, fans, PSU losses).
    - server: dgx-a100 in gpu_power.yaml.
    """

    name: str
    server: ServerPowerModel
    iteration_s: float = 3.0
    compute_share: float = 0.8
    compute_activity: float | None = None
    communication_activity: float = 0.35
    compute_bound_share: float = 0.9
    non_gpu_load_coupling: float = 0.59

    def compute_activity_for(self, gpu: GpuPowerModel) -> float:
        """Activity of the compute phase on `gpu` (TDP at max clock unless set)."""
        if self.compute_activity is not None:
            return self.compute_activity
        return gpu.sustained_tdp_activity

    def iteration_time_s(
        self, clock_mhz: ArrayLike, gpu: GpuPowerModel, iteration_s: ArrayLike | None = None
    ) -> FloatArray:
        """Duration (s) of one iteration at `clock_mhz`.

        `iteration_s`: the iteration's duration at max clock (default: the profile's
        `iteration_s`), broadcast against `clock_mhz`; the compute and communication shares
        are the profile's.
        """
        base_s = self.iteration_s if iteration_s is None else np.asarray(iteration_s, np.float64)
        compute_s = base_s * self.compute_share
        communication_s = base_s - compute_s
        return np.asarray(
            compute_s * gpu.time_factor(clock_mhz, self.compute_bound_share) + communication_s,
            dtype=np.float64,
        )


@cache
def default_training_profile() -> TrainingProfile:
    """Synchronous LLM training on a DGX-A100, the profile documented on TrainingProfile."""
    return TrainingProfile(name="llm-training-dgx-a100", server=server_power_model_for("dgx-a100"))


def _per_server(iteration_s: ArrayLike | None) -> FloatArray | None:
    """Per-server iteration times with a trailing bin axis added (None stays None)."""
    if iteration_s is None:
        return None
    values = np.asarray(iteration_s, dtype=np.float64)
    if np.any(~np.isfinite(values)) or np.any(values <= 0):
        raise PerfModelError(
            f"training iteration_s must be finite and above 0 s (got {values}); pass the "
            "iteration time at max clock in seconds"
        )
    return values[..., np.newaxis] if values.ndim else values


def training_progress(
    clock_mhz_per_bin: ArrayLike,
    bin_s: float,
    profile: TrainingProfile,
    gpu_model: GpuPowerModel,
    power_limit_w_per_bin: ArrayLike | None = None,
    iteration_s: ArrayLike | None = None,
) -> FloatArray:
    """Iterations completed in each bin (fractional); sum them for throughput.

    A power limit lowers the compute phase's clock to what the limit allows at its activity;
    the communication phase does not depend on the clock. `iteration_s` (default: the
    profile's) is each server's iteration time at max clock: a scalar, or an array over the
    server axis (`clock_mhz_per_bin` is then `[server, bin]`).
    """
    clock = np.asarray(clock_mhz_per_bin, dtype=np.float64)
    compute_clock = gpu_model.effective_clock_mhz(
        clock, profile.compute_activity_for(gpu_model), power_limit_w_per_bin
    )
    duration_s = profile.iteration_time_s(compute_clock, gpu_model, _per_server(iteration_s))
    return np.asarray(bin_s / duration_s, dtype=np.float64)


def _compute_covered(position: FloatArray, compute_fraction: FloatArray) -> FloatArray:
    """Iteration units in [0, position) that fall in compute phases [n, n + fraction)."""
    whole = np.floor(position)
    return np.asarray(
        whole * compute_fraction + np.minimum(position - whole, compute_fraction), dtype=np.float64
    )


def training_power_w(
    n_bins: int,
    clock_mhz_per_bin: ArrayLike,
    bin_s: float,
    profile: TrainingProfile,
    gpu_model: GpuPowerModel,
    power_limit_w_per_bin: ArrayLike | None = None,
    start_phase: ArrayLike = 0.0,
    iteration_s: ArrayLike | None = None,
) -> FloatArray:
    """Mean server power (W) per bin of a server running the training job.

    `clock_mhz_per_bin` is a scalar or an array ending in `n_bins`; `start_phase` (0..1, per
    server if an array) is where in its iteration the job is at time 0 (0 = compute starts);
    `iteration_s` (default: the profile's; per server if an array) is the iteration time at
    max clock, so jobs with different iteration times drift in phase against each other.
    """
    clock = np.asarray(clock_mhz_per_bin, dtype=np.float64)
    clock = np.broadcast_to(clock, (*clock.shape[:-1], n_bins) if clock.ndim else (n_bins,))
    compute_activity = profile.compute_activity_for(gpu_model)
    compute_clock = gpu_model.effective_clock_mhz(clock, compute_activity, power_limit_w_per_bin)
    communication_clock = gpu_model.effective_clock_mhz(
        clock, profile.communication_activity, power_limit_w_per_bin
    )
    base_s = _per_server(iteration_s)
    duration_s = profile.iteration_time_s(compute_clock, gpu_model, base_s)
    communication_s = (profile.iteration_s if base_s is None else base_s) * (
        1.0 - profile.compute_share
    )
    compute_fraction = 1.0 - communication_s / duration_s
    advance = bin_s / duration_s
    phase = np.asarray(start_phase, dtype=np.float64)
    if phase.ndim:
        phase = phase[..., np.newaxis]
    end = phase + np.cumsum(advance, axis=-1)
    start = end - advance
    compute_time_share = (
        _compute_covered(end, compute_fraction) - _compute_covered(start, compute_fraction)
    ) / advance
    gpu_w = compute_time_share * gpu_model.power_w(compute_activity, compute_clock) + (
        1.0 - compute_time_share
    ) * gpu_model.power_w(profile.communication_activity, communication_clock)
    return profile.server.power_w(gpu_w, gpu_model, profile.non_gpu_load_coupling)


KNEE_SEARCH_RESOLUTION_W = 0.01
"""`knee_power_limit_w` bisects the per-GPU limit to this resolution (W)."""


def _phase_clocks_mhz(
    profile: TrainingProfile, gpu: GpuPowerModel, power_limit_w: float | None
) -> tuple[float, float]:
    """Clocks of the compute and the communication phase at max clock under the limit."""
    compute = gpu.effective_clock_mhz(
        gpu.max_clock_mhz, profile.compute_activity_for(gpu), power_limit_w
    )
    communication = gpu.effective_clock_mhz(
        gpu.max_clock_mhz, profile.communication_activity, power_limit_w
    )
    return float(compute), float(communication)


def iteration_slowdown(
    profile: TrainingProfile, gpu: GpuPowerModel, power_limit_w: float | None
) -> float:
    """Iteration time under a per-GPU power limit / uncapped iteration time, minus 1.

    0.02 means 2 % slower: 2 % fewer iterations per second. `power_limit_w` None: no cap (0).
    """
    compute_clock, _ = _phase_clocks_mhz(profile, gpu, power_limit_w)
    capped_s = float(profile.iteration_time_s(compute_clock, gpu))
    return capped_s / float(profile.iteration_time_s(gpu.max_clock_mhz, gpu)) - 1.0


def energy_per_iteration_j(
    profile: TrainingProfile,
    gpu: GpuPowerModel,
    power_limit_w: float | None,
    whole_server: bool = True,
) -> float:
    """Energy (J) of one iteration on one server with every GPU under `power_limit_w`.

    `whole_server` True: the server's power (GPUs plus the non-GPU part, which keeps drawing
    its idle floor while a slower iteration lasts longer); False: the 8 GPUs only (what
    Zeus and Perseus measure). `power_limit_w` None: uncapped, at max clock.
    """
    compute_clock, communication_clock = _phase_clocks_mhz(profile, gpu, power_limit_w)
    compute_s = profile.iteration_s * profile.compute_share
    compute_s *= float(gpu.time_factor(compute_clock, profile.compute_bound_share))
    communication_s = profile.iteration_s * (1.0 - profile.compute_share)
    gpu_w = np.array(
        [
            gpu.power_w(profile.compute_activity_for(gpu), compute_clock),
            gpu.power_w(profile.communication_activity, communication_clock),
        ]
    )
    if whole_server:
        phase_w = profile.server.power_w(gpu_w, gpu, profile.non_gpu_load_coupling)
    else:
        phase_w = profile.server.gpus_per_server * gpu_w
    return float(phase_w[0] * compute_s + phase_w[1] * communication_s)


def knee_power_limit_w(profile: TrainingProfile, gpu: GpuPowerModel, max_slowdown: float) -> float:
    """The lowest per-GPU power limit whose iteration slowdown stays within `max_slowdown`.

    Searched between the compute phase's power at the GPU's min clock (no lower limit can
    slow it further) and at max clock (no higher limit slows it at all), by bisection to
    `KNEE_SEARCH_RESOLUTION_W`; the slowdown falls as the limit rises.
    """
    if not np.isfinite(max_slowdown) or max_slowdown < 0:
        raise PerfModelError(
            f"max_slowdown={max_slowdown} must be a finite share >= 0 (0.02: 2 % slower)"
        )
    activity = profile.compute_activity_for(gpu)
    low = float(gpu.power_w(activity, gpu.min_clock_mhz))
    high = float(gpu.power_w(activity, gpu.max_clock_mhz))
    if iteration_slowdown(profile, gpu, low) <= max_slowdown:
        return low
    while high - low > KNEE_SEARCH_RESOLUTION_W:
        middle = (low + high) / 2.0
        if iteration_slowdown(profile, gpu, middle) <= max_slowdown:
            high = middle
        else:
            low = middle
    return high
