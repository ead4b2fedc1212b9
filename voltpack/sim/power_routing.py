"""Route a row's low-priority requests through the consolidation policy, causally.

The low-priority servers' request streams are pooled; every `window_s` the router chooses the
active set from the busiest window of the past `lookback_s` (`next_active_set`, the same code
the operator runs) and deals the next window's arrivals round-robin over the active servers.
Decisions use only arrivals already seen, so assigning every request before the row is
stepped is exactly what an online router would do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voltpack.perf.llm_inference import InferenceProfile
from voltpack.policies.power.consolidation import (
    ActiveSet,
    ConsolidationParams,
    PoolDemand,
    next_active_set,
)
from voltpack.sim.traces.azure_llm import LlmRequests


@dataclass(frozen=True)
class RoutedPool:
    """Each server's requests after routing, and the active count per routing window."""

    streams: list[LlmRequests]
    active_per_window: np.ndarray


def _window_demand(
    arrival_s: np.ndarray, prefill_s: np.ndarray, decode_s: np.ndarray, window_s: float,
    windows: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per routing window: prefill seconds per second and decoding sequences."""
    index = np.minimum((arrival_s // window_s).astype(np.int64), windows - 1)
    prefill = np.bincount(index, weights=prefill_s, minlength=windows) / window_s
    decode = np.bincount(index, weights=decode_s, minlength=windows) / window_s
    return prefill, decode


def route_pool(
    streams: list[LlmRequests],
    duration_s: float,
    profile: InferenceProfile,
    params: ConsolidationParams | None,
) -> RoutedPool:
    """Deal the pooled requests of `streams` over the servers the policy keeps active
    (`params` None: over all of them, the round-robin router a pool has without
    consolidation)."""
    servers = len(streams)
    if servers == 0:
        return RoutedPool([], np.zeros(0, dtype=np.int64))
    arrival = np.concatenate([s.arrival_s for s in streams])
    prompt = np.concatenate([s.prompt_tokens for s in streams])
    output = np.concatenate([s.output_tokens for s in streams])
    order = np.argsort(arrival, kind="stable")
    arrival, prompt, output = arrival[order], prompt[order], output[order]
    prefill_s = profile.prefill_time_s(prompt)
    decode_s = output * profile.time_per_token_s(profile.reference_batch)
    window_s = params.window_s if params is not None else 60.0
    windows = max(1, int(np.ceil(duration_s / window_s)))
    if params is None:
        return _deal(arrival, prompt, output, np.full(windows, servers), window_s, servers)
    prefill_rate, decode_sequences = _window_demand(
        arrival, prefill_s, decode_s, params.window_s, windows
    )
    lookback = max(1, round(params.lookback_s / params.window_s))
    state = ActiveSet(servers, 0.0)
    active = np.empty(windows, dtype=np.int64)
    for w in range(windows):
        if w > 0:
            past = slice(max(0, w - lookback), w)
            demand = PoolDemand(
                float(prefill_rate[past].max()), float(decode_sequences[past].max())
            )
            state = next_active_set(state, demand, servers, w * params.window_s, params)
        active[w] = state.active
    return _deal(arrival, prompt, output, active, params.window_s, servers)


def _deal(
    arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, active: np.ndarray,
    window_s: float, servers: int,
) -> RoutedPool:  # fmt: skip
    """Round-robin each window's arrivals (in time order) over its first `active` servers."""
    windows = active.size
    window_of = np.minimum((arrival // window_s).astype(np.int64), windows - 1)
    target = np.empty(arrival.size, dtype=np.int64)
    turn = 0
    for w in range(windows):
        lo, hi = np.searchsorted(window_of, [w, w + 1])
        count = hi - lo
        target[lo:hi] = (turn + np.arange(count)) % active[w]
        turn = int((turn + count) % active[w])
    routed = [
        LlmRequests(arrival[target == s], prompt[target == s], output[target == s])
        for s in range(servers)
    ]
    return RoutedPool(routed, active)
