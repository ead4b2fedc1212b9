"""The low-priority router's consolidation policy and its causal replay in the row simulator."""

from __future__ import annotations

import numpy as np
import pytest

from voltpack.perf.llm_inference import default_inference_profile
from voltpack.policies.power.consolidation import (
    ActiveSet,
    ConsolidationParams,
    PoolDemand,
    next_active_set,
    routing_weights,
    servers_needed,
)
from voltpack.sim.power_routing import route_pool
from voltpack.sim.traces.azure_llm import LlmRequests


def test_servers_needed_is_set_by_the_tighter_of_prefill_and_decode() -> None:
    params = ConsolidationParams(max_prefill_share=0.25, max_decode_sequences=10)
    assert servers_needed(PoolDemand(1.0, 5.0), params) == 4
    assert servers_needed(PoolDemand(0.1, 35.0), params) == 4
    assert servers_needed(PoolDemand(0.0, 0.0), params) == 1


def test_the_active_set_grows_at_once_and_shrinks_only_after_the_hold() -> None:
    params = ConsolidationParams(max_prefill_share=0.5, shrink_hold_s=600)
    state = ActiveSet(2, 0.0)
    state = next_active_set(state, PoolDemand(2.0, 0.0), 10, 60.0, params)
    assert state.active == 4
    low = PoolDemand(0.4, 0.0)
    state = next_active_set(state, low, 10, 120.0, params)
    assert state.active == 4 and state.shrink_candidate_s == 120.0
    state = next_active_set(state, low, 10, 600.0, params)
    assert state.active == 4
    state = next_active_set(state, low, 10, 720.0, params)
    assert state.active == 1
    assert next_active_set(state, PoolDemand(100.0, 0.0), 10, 780.0, params).active == 10


def test_a_rise_during_the_hold_cancels_the_shrink() -> None:
    params = ConsolidationParams(max_prefill_share=0.5, shrink_hold_s=600)
    state = next_active_set(ActiveSet(4, 0.0), PoolDemand(0.4, 0.0), 10, 60.0, params)
    state = next_active_set(state, PoolDemand(2.0, 0.0), 10, 120.0, params)
    assert state.shrink_candidate_s is None
    state = next_active_set(state, PoolDemand(0.4, 0.0), 10, 700.0, params)
    assert state.active == 4


def test_routing_weights() -> None:
    assert routing_weights(2, 4).tolist() == [0.5, 0.5, 0.0, 0.0]
    with pytest.raises(ValueError, match=r"active must lie in 1\.\.4"):
        routing_weights(0, 4)


def _streams(servers: int, rate_per_s: float, duration_s: int, seed: int) -> list[LlmRequests]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(servers):
        count = rng.poisson(rate_per_s * duration_s)
        arrival = np.sort(rng.uniform(0, duration_s, count))
        out.append(LlmRequests(arrival, rng.integers(200, 2000, count),
                               rng.integers(20, 400, count)))  # fmt: skip
    return out


def test_routing_keeps_every_request_and_uses_only_what_the_past_shows() -> None:
    profile = default_inference_profile()
    streams = _streams(8, 0.3, 3600, 1)
    params = ConsolidationParams(max_prefill_share=0.4, max_decode_sequences=64)
    pool = route_pool(streams, 3600, profile, params)
    total = sum(s.arrival_s.size for s in streams)
    assert sum(s.arrival_s.size for s in pool.streams) == total
    assert pool.active_per_window[0] == 8
    assert pool.active_per_window[-1] < 8
    # Requests after minute 30 changed: the first 30 minutes' routing is unchanged (causal).
    later = [
        LlmRequests(s.arrival_s, np.where(s.arrival_s > 1800, 8000, s.prompt_tokens),
                    s.output_tokens)
        for s in streams
    ]  # fmt: skip
    changed = route_pool(later, 3600, profile, params)
    assert (changed.active_per_window[:31] == pool.active_per_window[:31]).all()
    assert changed.active_per_window[-1] > pool.active_per_window[-1]


def test_unrouted_pool_is_round_robin_over_all_servers() -> None:
    streams = _streams(4, 0.5, 600, 2)
    pool = route_pool(streams, 600, default_inference_profile(), None)
    counts = [s.arrival_s.size for s in pool.streams]
    assert max(counts) - min(counts) <= 1
    assert (pool.active_per_window == 4).all()
