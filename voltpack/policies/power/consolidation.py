"""Power-aware routing of low-priority inference: serve a pool's requests on as few servers as
keep their latency goals, so the rest of the pool idles (DynamoLLM, HPCA'25; TAPAS, ASPLOS'25).

A decoding server draws nearly the same power at batch 1 and batch 16 (Splitwise's measured
BLOOM-176B profile: 0.63-0.66 x TDP per A100), and an idle DGX-A100 draws about 2 kW of its
4-5 kW busy power, so packing a pool's decode onto fewer servers does the same work for much
less energy. What limits packing is latency: prefill takes the GPUs first, so a server's decode
slows by `1 / (1 - prefill share)`, and each extra sequence in a batch adds to the token time.
The router therefore sizes the active set by two loads measured over the recent past: the
prefill seconds per second the pool's arrivals bring (at most `max_prefill_share` per active
server) and the sequences decoding at once (at most `max_decode_sequences` per server). It grows
at once when either is exceeded and shrinks only after the smaller set has sufficed for
`shrink_hold_s` (a shrink drains no work: requests already on a server finish there).

Pure: inputs are demand figures and the current active count; the simulator and the operator
turn the count into router weights (`routing_weights`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from voltpack.policies.power.ladder import FloatArray


class ConsolidationParams(BaseModel):
    """How hard a low-priority pool may be packed, and how fast the router reacts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window_s: float = Field(default=60.0, gt=0, description="how often the active set is chosen")
    lookback_s: float = Field(
        default=300.0, gt=0, description="past whose busiest window sizes the active set"
    )
    max_prefill_share: float = Field(
        default=0.2, gt=0, lt=1, description="prefill share of GPU time per active server"
    )
    max_decode_sequences: float = Field(
        default=16.0, gt=0, description="sequences decoding at once per active server"
    )
    shrink_hold_s: float = Field(default=600.0, ge=0)
    min_active: int = Field(default=1, ge=1)


@dataclass(frozen=True)
class PoolDemand:
    """A pool's recent load: the busiest window of the lookback, per second."""

    prefill_s_per_s: float
    """Prefill seconds (at max clock) the arrivals bring per second."""
    decode_sequences: float
    """Sequences decoding at once (arrivals per second x decode duration at max clock)."""


@dataclass(frozen=True)
class ActiveSet:
    """The router's state: how many of the pool's servers take new requests, since when."""

    active: int
    since_s: float
    shrink_candidate_s: float | None = None
    """When the demand first fitted a smaller set (None: it does not)."""


def servers_needed(demand: PoolDemand, params: ConsolidationParams) -> int:
    """The fewest servers that carry `demand` within the packing limits."""
    by_prefill = demand.prefill_s_per_s / params.max_prefill_share
    by_decode = demand.decode_sequences / params.max_decode_sequences
    return max(params.min_active, math.ceil(max(by_prefill, by_decode) - 1e-9))


def next_active_set(
    state: ActiveSet, demand: PoolDemand, servers: int, now_s: float, params: ConsolidationParams
) -> ActiveSet:
    """Grow at once to what `demand` needs; shrink only after it has fitted for a hold."""
    needed = min(servers, servers_needed(demand, params))
    if needed >= state.active:
        return ActiveSet(needed, now_s if needed > state.active else state.since_s)
    candidate = state.shrink_candidate_s if state.shrink_candidate_s is not None else now_s
    if now_s - candidate >= params.shrink_hold_s:
        return ActiveSet(needed, now_s)
    return ActiveSet(state.active, state.since_s, candidate)


def routing_weights(active: int, servers: int) -> FloatArray:
    """Router weights over the pool's servers: equal on the first `active`, 0 on the rest."""
    if not 0 < active <= servers:
        raise ValueError(f"active must lie in 1..{servers}, got {active}")
    weights = np.zeros(servers)
    weights[:active] = 1.0 / active
    return weights
