"""Phase-aware clocks: the perf model's phase sensitivity against Splitwise's measured
power-capped H100, and the policy's choice of clock by phase mix."""

from __future__ import annotations

import numpy as np

from voltpack.perf.gpu_power import power_model_for
from voltpack.perf.inference_measurements import default_measurements_path, load_measurements
from voltpack.perf.llm_inference import default_inference_profile
from voltpack.policies.power.phase_clocks import (
    PhaseClockParams,
    phase_clock_rungs,
    phase_mix_slowdown,
)

LOCKS_MHZ = (1260, 1125, 975)


def _ratio(points: list, field: str) -> float:
    """Mean over matching (prompt, batch, output) settings of capped / uncapped `field`."""
    by_key = {}
    for point in points:
        key = (point.key.model, point.prompt_tokens, point.batch_size, point.output_tokens)
        by_key.setdefault(key, {})[point.key.power_cap_ratio] = getattr(point, field)
    ratios = [v[0.7] / v[1.0] for v in by_key.values() if 0.7 in v and 1.0 in v]
    return float(np.mean(ratios))


def test_the_model_is_phase_aware_as_splitwise_measured_under_a_cap() -> None:
    """Splitwise's H100 capped at 70 % of TDP: prefill (compute-bound) slows, decode
    (memory-bound) does not. The model, at the same cap: decode runs below the cap and keeps
    its clock; prefill slows by a comparable factor."""
    points = [
        p for p in load_measurements(default_measurements_path())
        if p.key.model == "bloom-176b" and p.key.gpu_type == "H100-SXM"
    ]  # fmt: skip
    measured_prefill = _ratio(points, "prompt_time_s")
    measured_decode = _ratio(points, "token_time_s")
    assert measured_prefill > 1.2 and abs(measured_decode - 1.0) < 0.02
    gpu = power_model_for("H100-SXM")
    profile = default_inference_profile()
    cap_w = 0.7 * gpu.tdp_w
    prefill = gpu.time_factor(
        gpu.effective_clock_mhz(gpu.max_clock_mhz, profile.prefill_activity, cap_w),
        profile.prefill_compute_share,
    )
    decode = gpu.time_factor(
        gpu.effective_clock_mhz(gpu.max_clock_mhz, profile.decode_activity, cap_w),
        profile.decode_compute_share,
    )
    assert float(decode) == 1.0
    assert abs(float(prefill) - measured_prefill) < 0.15


def test_decode_heavy_servers_get_the_deepest_lock_within_the_slowdown() -> None:
    gpu, profile = power_model_for("A100-80GB"), default_inference_profile()
    params = PhaseClockParams(max_slowdown=0.08)
    prefill = np.array([0.0, 0.05, 0.7, 0.0])
    decode = np.array([0.9, 0.8, 0.2, 0.0])
    rung = phase_clock_rungs(prefill, decode, LOCKS_MHZ, gpu, profile, params)
    # decode only: 975 MHz stretches decode 0.25 x (1410/975 - 1) = 11 %: too much; 1125: 6 %
    assert rung.tolist()[0] == 2
    assert rung.tolist()[2] == 0  # mostly prefill: even 1260 MHz stretches the mix 9 %
    slowdown = phase_mix_slowdown(prefill, decode, LOCKS_MHZ[rung[1] - 1], gpu, profile)
    assert slowdown[1] <= 0.08
    assert rung.tolist()[3] == 3  # idle: no work to slow


def test_a_looser_slowdown_allows_deeper_locks() -> None:
    gpu, profile = power_model_for("A100-80GB"), default_inference_profile()
    prefill, decode = np.array([0.1]), np.array([0.8])
    tight = phase_clock_rungs(
        prefill, decode, LOCKS_MHZ, gpu, profile, PhaseClockParams(max_slowdown=0.02)
    )
    loose = phase_clock_rungs(
        prefill, decode, LOCKS_MHZ, gpu, profile, PhaseClockParams(max_slowdown=0.2)
    )
    assert tight[0] < loose[0]
