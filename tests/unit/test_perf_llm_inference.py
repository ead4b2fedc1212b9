"""LLM inference server model: work conservation, power vs clock and cap, latency, anchors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.model import InvalidRequestError
from voltpack.perf import (
    InferenceLoad,
    bin_requests,
    default_inference_profile,
    inference_busy,
    power_from_busy_w,
    power_model_for,
    request_latency_breakdown,
    request_latency_s,
    server_power_w,
)
from voltpack.sim.traces.azure_llm import (
    CONVERSATION_TRACE,
    LlmRequests,
    azure_llm_dir,
    diurnal_request_stream,
    load_azure_llm_trace,
)

PROFILE = default_inference_profile()
A100 = power_model_for("A100-80GB")
HOUR_S = 3600
PEAK_RATE_PER_S = 0.8
"""A heavily loaded server: 0.8 requests/s of the conversation trace, above the diurnal peak of
the rate calibrated to POLCA's row anchor (~0.36/s mean, ~0.48/s at the peak with the default
2:1 swing; `voltpack.sim.power_calibration`)."""


@pytest.fixture(scope="module")
def conversation() -> LlmRequests:
    return load_azure_llm_trace(azure_llm_dir() / CONVERSATION_TRACE)


def busy_hour(trace: LlmRequests, seed: int) -> LlmRequests:
    """One hour of one server at the peak rate (flat curve: peak_to_trough=1)."""
    rng = np.random.default_rng([seed, 1])
    return diurnal_request_stream(trace, HOUR_S, PEAK_RATE_PER_S, rng, peak_to_trough=1.0)


def test_prefill_and_decode_speeds_match_the_splitwise_profile() -> None:
    # splitwise-sim profile, BLOOM-176B on 8x A100-80GB: 540 ms for 2048 prompt tokens,
    # 3600 ms for 8192; 48.7 ms per token at batch 1, 65.7 ms at batch 32
    assert PROFILE.prefill_time_s([2048, 8192]) == pytest.approx([0.54, 3.6], rel=0.08)
    assert PROFILE.time_per_token_s([1, 32]) == pytest.approx([0.0487, 0.0657], rel=0.03)
    assert PROFILE.time_per_token_s(1000) == PROFILE.time_per_token_s(PROFILE.max_batch)


def test_bin_requests_conserves_work() -> None:
    arrival = np.array([0.2, 0.7, 5.5, 11.0])
    prompt = np.array([1000, 2000, 500, 100])
    output = np.array([10, 20, 30, 5])
    load = bin_requests(arrival, prompt, output, 1.0, 10.0)
    assert load.n_bins == 10
    assert load.arrivals.tolist() == [2, 0, 0, 0, 0, 1, 0, 0, 0, 0]
    kept = slice(0, 3)
    assert load.prefill_work_s.sum() == pytest.approx(PROFILE.prefill_time_s(prompt[kept]).sum())
    per_token_s = float(PROFILE.time_per_token_s(PROFILE.reference_batch))
    assert load.decode_seq_s.sum() == pytest.approx(output[kept].sum() * per_token_s)
    assert np.all(load.decode_seq_s <= 2.0 + 1e-12)


def test_bin_requests_rejects_bad_arguments() -> None:
    with pytest.raises(InvalidRequestError, match="same length"):
        bin_requests([0.0, 1.0], [1], [1], 1.0, 10.0)
    with pytest.raises(InvalidRequestError, match="positive"):
        bin_requests([0.0], [1], [1], 0.0, 10.0)


def test_empty_server_sits_at_its_idle_floor() -> None:
    load = bin_requests(np.array([]), np.array([]), np.array([]), 1.0, 30.0)
    power = server_power_w(load, 1410.0, PROFILE, A100)
    assert power == pytest.approx(np.full(30, PROFILE.server.idle_w(A100)))


def test_a_long_prompt_spikes_above_the_decode_level() -> None:
    load = bin_requests([0.0], [8000], [200], 1.0, 30.0)
    power = server_power_w(load, 1410.0, PROFILE, A100)
    prefill_second, decode_second = power[0], power[10]
    # the server's worst second (all GPUs prefilling at the transient peak) is its nameplate
    assert prefill_second == pytest.approx(PROFILE.server.provisioned_w, rel=0.01)
    assert PROFILE.server.idle_w(A100) < decode_second < prefill_second


def test_lower_clock_lowers_power_but_keeps_gpus_busy_longer(conversation: LlmRequests) -> None:
    load = bin_requests(*busy_hour(conversation, 1), 1.0, HOUR_S)
    fast = inference_busy(load, 1410.0, PROFILE, A100)
    slow = inference_busy(load, 1100.0, PROFILE, A100)
    assert slow.prefill_share.mean() > fast.prefill_share.mean() * 1.15
    busy_fast = fast.prefill_share + fast.decode_share
    assert np.mean(slow.prefill_share + slow.decode_share) > busy_fast.mean()
    assert slow.concurrency.mean() > fast.concurrency.mean()
    fast_w = server_power_w(load, 1410.0, PROFILE, A100)
    slow_w = server_power_w(load, 1100.0, PROFILE, A100)
    assert slow_w.max() < fast_w.max()
    assert slow_w.mean() < fast_w.mean()
    # the same prefill work is served either way (bar what is still queued at the end)
    served_fast = fast.prefill_share.sum() / 1.0
    served_slow = slow.prefill_share.sum() / float(slow.prefill_time_factor[0])
    assert served_slow == pytest.approx(served_fast, rel=0.02)


def test_power_cap_holds_power_and_throttles_prefill_more(conversation: LlmRequests) -> None:
    load = bin_requests(*busy_hour(conversation, 2), 1.0, HOUR_S)
    capped = inference_busy(load, 1410.0, PROFILE, A100, power_limit_w_per_bin=250.0)
    assert np.all(capped.prefill_clock_mhz < capped.decode_clock_mhz + 1e-9)
    assert np.all(capped.decode_clock_mhz < 1410.0)
    power = server_power_w(load, 1410.0, PROFILE, A100, power_limit_w_per_bin=250.0)
    ceiling = PROFILE.server.power_w(250.0, A100, PROFILE.non_gpu_load_coupling)
    assert np.all(power <= ceiling + 1e-6)
    assert power.max() < server_power_w(load, 1410.0, PROFILE, A100).max()


def test_several_servers_at_once_match_one_by_one(conversation: LlmRequests) -> None:
    loads = [bin_requests(*busy_hour(conversation, seed), 1.0, 600.0) for seed in (3, 4)]
    clocks = np.array([[1410.0] * 600, [1200.0] * 600])
    together = server_power_w(InferenceLoad.stack(loads), clocks, PROFILE, A100)
    for i, load in enumerate(loads):
        assert together[i] == pytest.approx(server_power_w(load, clocks[i], PROFILE, A100))


def test_chunked_run_matches_one_shot(conversation: LlmRequests) -> None:
    load = InferenceLoad.stack(
        [bin_requests(*busy_hour(conversation, s), 1.0, 600.0) for s in (5, 6)]
    )
    clocks = np.where(np.arange(600) < 300, 1410.0, 1000.0)
    whole = inference_busy(load, clocks, PROFILE, A100)
    first = inference_busy(load.bins(0, 250), clocks[:250], PROFILE, A100)
    second = inference_busy(
        load.bins(250, 600),
        clocks[250:],
        PROFILE,
        A100,
        initial_backlog_s=first.backlog_end_s,
        previous_prefill_share=first.prefill_share,
    )
    for field in ("prefill_share", "decode_share", "concurrency", "backlog_start_s"):
        joined = np.concatenate([getattr(first, field), getattr(second, field)], axis=-1)
        assert joined == pytest.approx(getattr(whole, field))
    assert power_from_busy_w(second, PROFILE, A100) == pytest.approx(
        server_power_w(load, clocks, PROFILE, A100)[:, 250:]
    )


def test_latency_grows_when_clocks_drop(conversation: LlmRequests) -> None:
    requests = busy_hour(conversation, 7)
    fast = request_latency_s(*requests, np.full(HOUR_S, 1410.0), 1.0, PROFILE, A100)
    slow = request_latency_s(*requests, np.full(HOUR_S, 1100.0), 1.0, PROFILE, A100)
    assert np.all(slow >= fast - 1e-9)
    for q in (50, 99):
        assert np.percentile(slow, q) > np.percentile(fast, q) * 1.05
    # plausible magnitudes: a conversation reply of ~130 tokens at ~55-75 ms per token
    assert 5.0 < np.percentile(fast, 50) < 15.0


def test_decode_is_less_clock_sensitive_than_prefill(conversation: LlmRequests) -> None:
    requests = busy_hour(conversation, 8)
    fast = request_latency_breakdown(*requests, np.full(HOUR_S, 1410.0), 1.0, PROFILE, A100)
    slow = request_latency_breakdown(*requests, np.full(HOUR_S, 1100.0), 1.0, PROFILE, A100)
    prefill_ratio = slow.prefill_s.sum() / fast.prefill_s.sum()
    assert prefill_ratio == pytest.approx(float(A100.time_factor(1100.0, 0.9)))
    per_token = A100.time_factor(1100.0, PROFILE.decode_compute_share)
    assert per_token < prefill_ratio


def test_queueing_grows_with_load(conversation: LlmRequests) -> None:
    waits = []
    for rate in (0.3, 0.8, 1.6):
        requests = diurnal_request_stream(
            conversation, HOUR_S, rate, np.random.default_rng(9), peak_to_trough=1.0
        )
        parts = request_latency_breakdown(*requests, np.full(HOUR_S, 1410.0), 1.0, PROFILE, A100)
        waits.append(float(np.mean(parts.queue_s)))
    assert waits[0] < waits[1] < waits[2]


def test_latency_rejects_arrivals_outside_the_clock_horizon() -> None:
    with pytest.raises(InvalidRequestError, match="arrival_s"):
        request_latency_s([5.0], [10], [10], np.full(5, 1410.0), 1.0, PROFILE, A100)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 59.9), st.integers(1, 8000), st.integers(1, 500)), max_size=40),
    st.floats(A100.min_clock_mhz, A100.max_clock_mhz),
)
def test_any_load_stays_between_idle_and_provisioned(
    requests: list[tuple[float, int, int]], clock: float
) -> None:
    arrival, prompt, output = (
        (np.array(column) for column in zip(*requests, strict=True))
        if requests
        else (np.array([]),) * 3
    )
    load = bin_requests(arrival, prompt, output, 1.0, 60.0)
    power = server_power_w(load, clock, PROFILE, A100)
    assert np.all(power >= PROFILE.server.idle_w(A100) - 1e-9)
    assert np.all(power <= PROFILE.server.provisioned_w + 1.0)
    latency = request_latency_s(arrival, prompt, output, np.full(60, clock), 1.0, PROFILE, A100)
    assert np.all(latency >= PROFILE.prefill_time_s(prompt) - 1e-9)


# --- calibration against POLCA ---------------------------------------------------------------


def test_loaded_server_peaks_at_its_nameplate_and_well_below_on_average(
    conversation: LlmRequests,
) -> None:
    """One server's peak second reaches the 6.5 kW nameplate (a long prompt on all GPUs);
    POLCA's ~79 % is a row-level figure (tests/unit/test_power_calibration.py)."""
    for seed in (11, 12, 13):
        power = server_power_w(
            bin_requests(*busy_hour(conversation, seed), 1.0, HOUR_S), 1410.0, PROFILE, A100
        )
        assert power.max() / PROFILE.server.provisioned_w == pytest.approx(1.0, abs=0.01)
        # ... and well below it on average: the headroom oversubscription uses
        assert power.mean() / PROFILE.server.provisioned_w < 0.80


def test_a_row_of_inference_servers_peaks_lower_than_one_server(conversation: LlmRequests) -> None:
    loads = [bin_requests(*busy_hour(conversation, 20 + i), 1.0, HOUR_S) for i in range(20)]
    power = server_power_w(InferenceLoad.stack(loads), 1410.0, PROFILE, A100)
    row_peak = power.sum(axis=0).max() / (20 * PROFILE.server.provisioned_w)
    assert 0.55 < row_peak < power.max() / PROFILE.server.provisioned_w
