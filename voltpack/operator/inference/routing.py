"""Power-aware routing of a low-priority InferenceService: the router weights it publishes.

The decision is the core's (`voltpack.policies.power.consolidation`, the code the row simulator
runs): from the pool's measured demand, keep an `ActiveSet` of the service's unified replicas
and give new requests to those only, so the others drain and idle. The operator measures the
demand, keeps the active set in the service's status (a new leader carries on), and publishes
the weights twice: `status.routing` and the `voltpack.io/router-weight` annotation of each
replica pod (docs/power.md, "Energy: routing and phase-aware clocks in the operator").

Demand: the measured request rate (the `voltpack.io/observed-rate-per-second` annotation, or
the replicas' vLLM counters) times what one request costs a replica at max clock, from the
spec's request sizes and the serving profile the plan uses (`request_cost`): prefill seconds
per second and sequences decoding at once. The busiest sample of the last `lookback_s` counts.

Fail safe: no measured rate, incomplete counts, an unreadable `status.routing`, or a history
shorter than the lookback (a new leader) never consolidates further: every replica gets an
equal weight (or, with too short a history, the active set can only grow). No weight set is
ever all zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from voltpack.model.resources.inferenceservice import (
    InferenceServiceSpec,
    PlannedGroup,
    ServiceRouting,
)
from voltpack.operator.inference.plans import group_key
from voltpack.operator.inference.pods import GROUP_LABEL
from voltpack.operator.kube.conventions import ROUTER_WEIGHT_ANNOTATION
from voltpack.operator.kube.timestamps import kube_time_s, rfc3339
from voltpack.perf.inference_profile import ProfileBook, ServingProfile
from voltpack.policies.power.consolidation import (
    ActiveSet,
    ConsolidationParams,
    PoolDemand,
    next_active_set,
    routing_weights,
)

__all__ = ["ROUTER_WEIGHT_ANNOTATION", "decide_routing", "pool_pods", "request_cost"]
TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class RequestCost:
    """What one request of the service's mix costs a replica at max clock."""

    prefill_s: float
    """Mean prefill seconds per request."""
    decode_s: float
    """Mean seconds a request spends decoding (output tokens x step time at the packed
    batch)."""

    def demand(self, rate_per_s: float) -> PoolDemand:
        """The pool's load at `rate_per_s` requests per second."""
        return PoolDemand(rate_per_s * self.prefill_s, rate_per_s * self.decode_s)


def profile_cost(spec: InferenceServiceSpec, profile: ServingProfile, batch: float) -> RequestCost:
    """Mean prefill and decode seconds of one request of the spec's size mix on `profile`,
    decoding in a batch of `batch` sequences (each holding its prompt and half its output)."""
    total = sum(size.share for size in spec.request_sizes)
    prefill = decode = 0.0
    for size in spec.request_sizes:
        weight = size.share / total
        prefill += weight * profile.prefill_s([size.prompt_tokens])
        context = batch * (size.prompt_tokens + size.output_tokens / 2)
        decode += weight * size.output_tokens * profile.decode_step_s(batch, context)
    return RequestCost(prefill, decode)


def request_cost(
    spec: InferenceServiceSpec,
    groups: Sequence[PlannedGroup],
    book: ProfileBook,
    params: ConsolidationParams,
) -> RequestCost | None:
    """The cost of a request on the slowest of the plan's unified groups (the conservative
    side: more servers), decoding at the packing limit `max_decode_sequences` (or the group's
    batch cap, if lower); None without a unified group."""
    costs = []
    for group in groups:
        if group.role != "unified" or group.replicas < 1:
            continue
        profile = book.profile(spec.model, group.gpu_type, group.tensor_parallel)
        batch = min(params.max_decode_sequences, float(group.max_batch or math.inf))
        costs.append(profile_cost(spec, profile, max(1.0, batch)))
    if not costs:
        return None
    return RequestCost(max(c.prefill_s for c in costs), max(c.decode_s for c in costs))


@dataclass
class RateWindow:
    """The measured rates of one service since this leader began watching it."""

    first_s: float | None = None
    samples: list[tuple[float, float]] = field(default_factory=list)

    def observe(self, now_s: float, rate_per_s: float, keep_s: float) -> None:
        """Record a measurement; samples older than `keep_s` go."""
        if self.first_s is None or (self.samples and now_s < self.samples[-1][0]):
            self.first_s, self.samples = now_s, []  # first, or a clock that went back
        self.samples.append((now_s, rate_per_s))
        self.samples = [(t, r) for t, r in self.samples if t >= now_s - keep_s]

    def busiest(self, now_s: float, lookback_s: float) -> tuple[float, bool]:
        """The highest rate of the last `lookback_s`, and whether the history covers it."""
        recent = [r for t, r in self.samples if t >= now_s - lookback_s]
        covered = self.first_s is not None and now_s - self.first_s >= lookback_s
        return max(recent, default=0.0), covered


def pool_pods(pods: Sequence[dict[str, Any]], groups: Sequence[PlannedGroup]) -> list[str]:
    """The routed pool: the live replicas of the plan's unified groups, Running ones first
    (then by name), so the active set is the replicas that can serve."""
    unified = {group_key(g) for g in groups if g.role == "unified"}
    pool = []
    for pod in pods:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        if (meta.get("labels") or {}).get(GROUP_LABEL) not in unified:
            continue
        running = (pod.get("status") or {}).get("phase") == "Running"
        pool.append((not running, meta["name"]))
    return [name for _, name in sorted(pool)]


def active_set_of(routing: Any, servers: int) -> ActiveSet | None:
    """The active set a status recorded (None: none recorded). ValueError when it is
    unreadable (the caller fails safe)."""
    if routing is None:
        return None
    try:
        recorded = ServiceRouting.model_validate(routing)
    except ValidationError as exc:
        raise ValueError(f"status.routing is unreadable: {exc.errors()[0]['msg']}") from None
    since = kube_time_s(recorded.since)
    candidate = (
        kube_time_s(recorded.shrink_candidate_since) if recorded.shrink_candidate_since else 0.0
    )
    if since is None or candidate is None:
        raise ValueError("status.routing has an unreadable time")
    if not recorded.shrink_candidate_since:
        candidate = None
    return ActiveSet(min(recorded.active_replicas, servers), since, candidate)


@dataclass(frozen=True)
class RoutingDecision:
    """What to publish: `status.routing` and each pool pod's weight."""

    status: dict[str, Any]
    weights: dict[str, float]


def equal_routing(pool: Sequence[str], now_s: float, reason: str, message: str) -> RoutingDecision:
    """Every replica of the pool an equal share (the fail-safe: no consolidation)."""
    weights = dict(zip(pool, routing_weights(len(pool), len(pool)).tolist(), strict=True))
    status = ServiceRouting(
        active_replicas=len(pool),
        replicas=len(pool),
        weights=weights,
        since=rfc3339(now_s),
        reason=reason,
        message=message,
    )
    return RoutingDecision(
        status.model_dump(mode="json", by_alias=True, exclude_none=True), weights
    )


def decide_routing(
    pool: Sequence[str],
    recorded: Any,
    rate_per_s: float | None,
    window: RateWindow,
    cost: RequestCost | None,
    params: ConsolidationParams,
    now_s: float,
) -> RoutingDecision:
    """The pool's weights this cycle (`pool` non-empty, in `pool_pods` order; `recorded`: the
    status's `routing`; `rate_per_s`: the latest complete measurement, None when there is
    none or it is incomplete)."""
    servers = len(pool)
    if rate_per_s is None:
        window.first_s, window.samples = None, []
        return equal_routing(
            pool, now_s, "NoMeasuredRate", "no complete measured request rate: equal shares"
        )
    if cost is None:
        return equal_routing(
            pool, now_s, "NotRoutable", "the plan has no unified replicas to route over"
        )
    window.observe(now_s, rate_per_s, params.lookback_s)
    try:
        state = active_set_of(recorded, servers)
    except ValueError as exc:
        return equal_routing(
            pool, now_s, "StatusUnreadable", f"{exc}; equal shares, starting again"
        )
    if state is None:
        state = ActiveSet(servers, now_s)
    busiest, covered = window.busiest(now_s, params.lookback_s)
    demand = cost.demand(busiest)
    proposed = next_active_set(state, demand, servers, now_s, params)
    if not covered and proposed.active <= state.active:
        proposed = ActiveSet(state.active, state.since_s)  # a short history never shrinks
    active = proposed.active
    weights = dict(zip(pool, routing_weights(active, servers).tolist(), strict=True))
    said = (
        f"busiest rate of the last {params.lookback_s:g} s {busiest:.4g}/s: "
        f"{demand.prefill_s_per_s:.3g} prefill s/s (at most {params.max_prefill_share:g} per "
        f"replica), {demand.decode_sequences:.3g} sequences decoding (at most "
        f"{params.max_decode_sequences:g} per replica): {active} of {servers} replicas take "
        "new requests"
    )
    if not covered:
        said += f" (history shorter than {params.lookback_s:g} s: not shrinking yet)"
    status = ServiceRouting(
        active_replicas=active,
        replicas=servers,
        weights=weights,
        since=rfc3339(proposed.since_s),
        shrink_candidate_since=(
            rfc3339(proposed.shrink_candidate_s)
            if proposed.shrink_candidate_s is not None
            else None
        ),
        reason="Consolidated" if active < servers else "AllReplicas",
        message=said,
    )
    return RoutingDecision(
        status.model_dump(mode="json", by_alias=True, exclude_none=True), weights
    )


def weight_annotation(weight: float) -> str:
    """A weight as the annotation carries it: thousandths, at least 1 when above 0."""
    if weight <= 0:
        return "0"
    return str(max(1, round(weight * 1000)))
