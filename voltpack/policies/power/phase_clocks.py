"""Phase-aware clocks: lock a server whose GPUs mostly decode at a lower clock.

Decode is memory-bound: a lower SM clock stretches it little while its power falls with the
clock (`voltpack.perf.llm_inference`: decode's compute-bound share 0.25, prefill's 0.9;
Splitwise's measured H100 profile shows decode token time unchanged under a 70 % power cap
while prefill slows 30 %, `tests/unit/test_phase_clocks.py` checks the model against it).
So the clock a server can run at for a latency cost of at most `max_slowdown` depends on its
phase mix: the busy-time-weighted stretch of its prefill and decode at that clock. Each
interval the policy picks, per server, the lowest clock lock of its ladder within that cost
for the phase mix it measured over the last `window_s`; prefill-heavy servers keep full
clocks. The controller takes the result as a floor (`PowerController.step(floor_rung=...)`):
budget shedding may lock deeper, never shallower.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from voltpack.perf.gpu_power import GpuPowerModel
from voltpack.perf.llm_inference import InferenceProfile
from voltpack.policies.power.ladder import FloatArray, IntArray


class PhaseClockParams(BaseModel):
    """How much latency the efficiency clocks may cost, and how the phase mix is measured."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_slowdown: float = Field(
        default=0.08, ge=0, lt=1, description="largest stretch of a request's GPU time"
    )
    window_s: float = Field(default=60.0, gt=0, description="past the phase mix is measured on")


def phase_mix_slowdown(
    prefill_share: FloatArray,
    decode_share: FloatArray,
    clock_mhz: float,
    gpu: GpuPowerModel,
    profile: InferenceProfile,
) -> FloatArray:
    """Busy-time-weighted stretch of the work at `clock_mhz` (0: none; idle servers: 0)."""
    prefill_stretch = float(gpu.time_factor(clock_mhz, profile.prefill_compute_share)) - 1.0
    decode_stretch = float(gpu.time_factor(clock_mhz, profile.decode_compute_share)) - 1.0
    busy = prefill_share + decode_share
    with np.errstate(divide="ignore", invalid="ignore"):
        mix = (prefill_share * prefill_stretch + decode_share * decode_stretch) / busy
    return np.asarray(np.where(busy > 0, mix, 0.0), dtype=np.float64)


def phase_clock_rungs(
    prefill_share: FloatArray,
    decode_share: FloatArray,
    lock_clocks_mhz: Sequence[int],
    gpu: GpuPowerModel,
    profile: InferenceProfile,
    params: PhaseClockParams,
) -> IntArray:
    """Per server, the deepest clock-lock rung (1..k, 0: none) whose stretch at the server's
    phase mix stays within `max_slowdown` (`lock_clocks_mhz` descending, as on the ladder)."""
    rung = np.zeros(np.shape(prefill_share), dtype=np.int64)
    for index, clock in enumerate(lock_clocks_mhz, start=1):
        fits = phase_mix_slowdown(prefill_share, decode_share, clock, gpu, profile) <= (
            params.max_slowdown
        )
        rung = np.where(fits, index, rung)
    return rung
