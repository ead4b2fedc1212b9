"""The SLO attainment a plan is predicted to reach: a short request-level check by the core.

The capacity model sizes every bucket for its TTFT and TPOT SLO at the planning rate, so its
own arithmetic says every plan meets the SLO. This check runs the plan instead: requests
drawn from the plan's size mix arrive as a Poisson process at the planning rate, are routed
as the serving simulator routes them (`routing.py`), and run iteration by iteration through
the plan's replicas (`voltpack.perf.serving_replica`, the engine the simulator uses). The
share of them within both SLOs is the prediction. It does not see a real trace's bursts
beyond Poisson arrivals, nor sizes spread inside a bucket (each request takes its bucket's
mean prompt and output).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.serving_capacity import tpot_met
from voltpack.perf.serving_replica import PoolSpec, RequestPlan, ServingEngine
from voltpack.policies.inference.buckets import RequestMix
from voltpack.policies.inference.plan import ServingPlan
from voltpack.policies.inference.routing import route_requests

CHECK_REQUESTS = 3000
"""Requests the check replays (a 99% attainment rests on about 30 misses or fewer)."""
WARMUP_SHARE = 0.1
"""Share of the first requests left out of the count: the replicas start empty."""


@dataclass(frozen=True)
class PredictedAttainment:
    """Share of the checked requests within both SLOs, and how it was obtained."""

    ratio: float
    requests: int
    ttft_misses: int
    tpot_misses: int
    basis: str


def predicted_attainment(
    plan: ServingPlan, requests: int = CHECK_REQUESTS, seed: int = 0
) -> PredictedAttainment:
    """Replay `requests` Poisson arrivals at `plan.rate_per_s` with the plan's size mix
    through the plan (seeded: the same plan gives the same prediction), its KV transfers at
    the link the plan was sized with. Raises
    InvalidRequestError for a plan without groups or fewer than 100 requests."""
    if not plan.groups:
        raise InvalidRequestError("a plan without replica groups has no attainment to predict")
    if requests < 100:
        raise InvalidRequestError(f"requests must be at least 100, got {requests}")
    rng = np.random.default_rng(seed)
    prompts, outputs = draw_sizes(plan.mix, requests, rng)
    arrival_s = np.cumsum(rng.exponential(1.0 / plan.rate_per_s, requests))
    # the router's draws must not be the uniforms that drew the sizes (one seed would send
    # every request of a bucket the same way)
    ttft_ok, tpot_ok = _replay(plan, arrival_s, prompts, outputs, int(rng.integers(2**32)))
    counted = slice(int(requests * WARMUP_SHARE), None)
    return _attainment(
        ttft_ok[counted],
        tpot_ok[counted],
        f"{requests - int(requests * WARMUP_SHARE)} requests of the size mix arriving as a "
        f"Poisson process at {plan.rate_per_s:.4g}/s, replayed through the plan's replicas",
    )


def draw_sizes(
    mix: RequestMix, count: int, rng: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """`count` request sizes (prompt, output tokens) drawn from `mix` by its shares, each its
    bucket's mean size."""
    shares = np.array([bucket.share for bucket in mix.buckets])
    drawn = rng.choice(len(mix.buckets), size=count, p=shares / shares.sum())
    prompts = np.array([max(1, round(b.size.prompt_tokens)) for b in mix.buckets])[drawn]
    outputs = np.array([max(1, round(b.size.output_tokens)) for b in mix.buckets])[drawn]
    return prompts.astype(np.int64), outputs.astype(np.int64)


def window_attainment(
    plan: ServingPlan,
    arrival_s: NDArray[np.float64],
    prompt_tokens: NDArray[np.int64],
    output_tokens: NDArray[np.int64],
    seed: int = 0,
) -> PredictedAttainment:
    """The share of a window of real requests (as they arrived, with their own sizes) that
    the plan serves within both SLOs, its replicas starting empty. Raises
    InvalidRequestError for a plan without groups, no requests or mismatched arrays."""
    if not plan.groups:
        raise InvalidRequestError("a plan without replica groups has no attainment to predict")
    arrivals = np.asarray(arrival_s, dtype=np.float64)
    prompts = np.asarray(prompt_tokens, dtype=np.int64)
    outputs = np.asarray(output_tokens, dtype=np.int64)
    if arrivals.size == 0 or not arrivals.shape == prompts.shape == outputs.shape:
        raise InvalidRequestError("a window needs requests, with one prompt and output each")
    order = np.argsort(arrivals, kind="stable")
    ttft_ok, tpot_ok = _replay(plan, arrivals[order], prompts[order], outputs[order], seed)
    return _attainment(
        ttft_ok,
        tpot_ok,
        f"the window's {arrivals.size} requests as they arrived, replayed through the plan's "
        "replicas",
    )


def _replay(
    plan: ServingPlan,
    arrival_s: NDArray[np.float64],
    prompts: NDArray[np.int64],
    outputs: NDArray[np.int64],
    route_seed: int,
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Per request (sorted by arrival): whether its TTFT and its TPOT met the plan's SLO
    (an unserved request meets neither)."""
    routes = route_requests(plan, prompts, outputs, route_seed)
    engine = ServingEngine(
        [
            PoolSpec(g.profile, g.role, g.replicas, g.max_batch, g.prefill_chunk_tokens)
            for g in plan.groups
        ],
        RequestPlan(
            arrival_s,
            prompts.astype(np.int64),
            outputs.astype(np.int64),
            routes.front,
            routes.decode,
            routes.alternatives,
            routes.decode_alternatives,
        ),
        link_bytes_per_s_per_gpu=plan.kv_link_bytes_per_s_per_gpu,
    )
    outcome = engine.run()
    ttft = outcome.first_token_s - arrival_s
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(
            outputs > 1,
            (outcome.last_token_s - outcome.first_token_s) / np.maximum(outputs - 1, 1),
            0.0,
        )
    served = routes.front >= 0
    ttft_ok = served & (ttft <= plan.slo.ttft_s)  # NaN (not served) compares False
    tpot_ok = tpot_met(tpot, outputs, served, plan.slo)
    return np.asarray(ttft_ok, dtype=np.bool_), np.asarray(tpot_ok, dtype=np.bool_)


def _attainment(
    ttft_ok: NDArray[np.bool_], tpot_ok: NDArray[np.bool_], basis: str
) -> PredictedAttainment:
    met = ttft_ok & tpot_ok
    return PredictedAttainment(
        ratio=float(met.mean()),
        requests=int(met.size),
        ttft_misses=int((~ttft_ok).sum()),
        tpot_misses=int((~tpot_ok).sum()),
        basis=basis,
    )
