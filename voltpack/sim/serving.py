"""Request-level simulation of an LLM serving plan: what each request of a trace experiences.

`simulate_serving` replays requests (arrival time, prompt and output tokens, e.g. the Azure
LLM trace) against the fleet a `ServingPlan` describes and reports TTFT, TPOT, SLO
attainment, energy and utilisation. It checks an inference planner's choice by running it,
not by the planner's own arithmetic.

Routing (`voltpack.policies.inference.routing`): each request's bucket (its position in
`plan.mix`) selects a front group (unified or prefill) at random in proportion to the
groups' planned `bucket_rates_per_s`, and for a prefill group also a decode group the same
way (seeded, so the same seed gives the same result); only groups whose context class covers
the request (prompt + output tokens, `ReplicaGroup.context`) take it, so a request never
runs on a replica sized for shorter ones. At its arrival the request starts on
another group of the same role that can serve its bucket within the SLO when that group's
least-loaded replica would start it sooner (fewer queued prompt tokens times the time per
prompt token, a free batch slot, room for its KV cache): the router sends a request where it
meets the SLO, not only where the plan expected it. Inside a group the request goes to the
replica with the least outstanding work at the moment it arrives: for prefill replicas the
prompt tokens not yet prefilled; for unified and decode replicas the requests outstanding
there (queued, prefilling, running or with KV cache in flight), ties broken by prompt tokens
not yet prefilled, then by replica order. A decode replica is chosen when the KV transfer
starts. Replicas run iteration by iteration (`voltpack.perf.serving_replica`): each group's
replicas run at most its `max_batch` sequences at once, and a unified group with
`prefill_chunk_tokens` runs chunked prefill (decode steps carrying up to that many prompt
tokens) instead of prefill priority; the chunk is ignored for prefill and decode groups.

A request counts as unserved (and failing the SLO) when no group serves its bucket or covers
its context, when its bucket's prefill group has no decode group, or when it needs more KV
cache than one replica of its group holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.serving_capacity import mean_tpot_s, tpot_met
from voltpack.perf.serving_replica import (
    DEFAULT_PREFILL_TOKEN_BUDGET,
    PoolSpec,
    ReplicaUsage,
    RequestPlan,
    ServingEngine,
)
from voltpack.policies.inference.plan import ReplicaGroup, ServingPlan
from voltpack.policies.inference.routing import route_requests
from voltpack.sim.traces.azure_llm import LlmRequests, trace_rate_per_s

DEFAULT_KV_LINK_BYTES_PER_S_PER_GPU = 50e9
"""One 400 Gb/s NIC per GPU carries KV caches from prefill to decode replicas."""
ROLES = ("unified", "prefill", "decode")


@dataclass(frozen=True)
class GroupUsage:
    """How busy one replica group was over the simulated duration."""

    label: str
    role: str
    replicas: int
    requests: int
    """Requests that started here (unified, prefill) or decoded here (decode)."""
    prefill_share: float
    """Share of the group's replica-time spent prefilling."""
    decode_share: float
    """Share of the group's replica-time spent decoding."""
    energy_j: float

    @property
    def utilisation(self) -> float:
        """Share of the group's replica-time spent busy."""
        return self.prefill_share + self.decode_share


@dataclass(frozen=True, eq=False)
class ServingResult:
    """What the requests experienced; per-request arrays are in the input's order (NaN
    latencies for unserved requests). Percentiles cover served requests (NaN if none)."""

    ttft_s: NDArray[np.float64]
    tpot_s: NDArray[np.float64]
    """(last token - first token) / (output tokens - 1); 0 for one-token outputs."""
    met_slo: NDArray[np.bool_]
    served: NDArray[np.bool_]
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_p99_s: float
    slo_attainment_pct: float
    """Share of all requests (served or not) within both the TTFT and the TPOT SLO (with a
    mean-TPOT SLO: the share within the TTFT SLO when the mean TPOT is within its SLO, else
    0, `perf.serving_capacity.tpot_met`)."""
    cost_per_hour: float
    gpus_by_type: dict[str, int]
    energy_j: float
    mean_power_w: float
    groups: tuple[GroupUsage, ...]
    requests_served: int
    requests_unrouted: int
    """Requests whose bucket no group (or no decode group after a prefill group) serves, or
    whose context no such group's class covers."""
    requests_too_large: int
    """Requests that need more KV cache than one replica of their group holds."""
    duration_s: float
    """From the first arrival to the later of the last arrival and the last token."""
    offered_rate_per_s: float
    tpot_mean_s: float = float("nan")
    """Mean TPOT over the served requests of two or more output tokens (what a mean-TPOT SLO
    judges; NaN if none)."""

    @property
    def requests_unserved(self) -> int:
        """Requests not served, for either reason."""
        return self.requests_unrouted + self.requests_too_large

    def summary(self) -> str:
        """One line: attainment, latency percentiles, power."""
        return (
            f"{self.slo_attainment_pct:.1f}% within SLO, TTFT p50/p99 "
            f"{self.ttft_p50_s * 1000:.0f}/{self.ttft_p99_s * 1000:.0f} ms, TPOT p50/p99 "
            f"{self.tpot_p50_s * 1000:.1f}/{self.tpot_p99_s * 1000:.1f} ms, "
            f"{self.requests_unserved} unserved, {self.mean_power_w / 1000:.1f} kW, "
            f"${self.cost_per_hour:.2f}/h"
        )


def scale_to_rate(requests: LlmRequests, rate_per_s: float) -> LlmRequests:
    """The same requests with arrival times compressed or stretched so that the mean rate
    (over the trace's span, `trace_rate_per_s`) is `rate_per_s`."""
    if not (np.isfinite(rate_per_s) and rate_per_s > 0):
        raise InvalidRequestError(f"rate_per_s must be positive, got {rate_per_s}")
    if requests.arrival_s.size == 0:
        raise InvalidRequestError("the trace holds no requests to rescale")
    factor = _mean_rate_per_s(requests.arrival_s) / rate_per_s
    first_s = float(requests.arrival_s.min())
    return LlmRequests(
        arrival_s=first_s + (requests.arrival_s - first_s) * factor,
        prompt_tokens=requests.prompt_tokens,
        output_tokens=requests.output_tokens,
    )


def simulate_serving(
    plan: ServingPlan,
    requests: LlmRequests,
    *,
    seed: int = 0,
    kv_link_bytes_per_s_per_gpu: float = DEFAULT_KV_LINK_BYTES_PER_S_PER_GPU,
    prefill_token_budget: int = DEFAULT_PREFILL_TOKEN_BUDGET,
) -> ServingResult:
    """Replay `requests` against `plan`'s replicas and report what they experienced.

    `prefill_token_budget` bounds a prefill batch of prefill-priority unified and of prefill
    replicas; chunked unified replicas take their group's `prefill_chunk_tokens` instead.

    Raises InvalidRequestError for an empty plan, a negative rate, a bucket outside the
    plan's mix, a group's `max_batch` or `prefill_chunk_tokens` below 1, mismatched or invalid
    request arrays, or a non-positive link speed or budget.
    """
    arrival_s, prompts, outputs = _checked_requests(requests)
    _check_plan(plan)
    if not (np.isfinite(kv_link_bytes_per_s_per_gpu) and kv_link_bytes_per_s_per_gpu > 0):
        raise InvalidRequestError(
            f"kv_link_bytes_per_s_per_gpu must be positive, got {kv_link_bytes_per_s_per_gpu}"
        )
    if prefill_token_budget < 1:
        raise InvalidRequestError(
            f"prefill_token_budget must be at least 1, got {prefill_token_budget}"
        )
    order = np.argsort(arrival_s, kind="stable")
    arrival_s, prompts, outputs = arrival_s[order], prompts[order], outputs[order]
    groups = plan.groups
    routes = route_requests(plan, prompts, outputs, seed)
    front, decode, unrouted, too_large = (
        routes.front,
        routes.decode,
        routes.unrouted,
        routes.too_large,
    )

    engine = ServingEngine(
        [
            PoolSpec(g.profile, g.role, g.replicas, g.max_batch, g.prefill_chunk_tokens)
            for g in groups
        ],
        RequestPlan(
            arrival_s,
            prompts,
            outputs,
            front,
            decode,
            routes.alternatives,
            routes.decode_alternatives,
        ),
        prefill_token_budget=prefill_token_budget,
        link_bytes_per_s_per_gpu=kv_link_bytes_per_s_per_gpu,
    )
    outcome = engine.run()

    served = front >= 0
    ttft = outcome.first_token_s - arrival_s
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(
            outputs > 1,
            (outcome.last_token_s - outcome.first_token_s) / np.maximum(outputs - 1, 1),
            np.where(served, 0.0, np.nan),
        )
    met = served & (ttft <= plan.slo.ttft_s) & tpot_met(tpot, outputs, served, plan.slo)
    start_s = float(arrival_s.min())
    end_s = max(float(arrival_s.max()), float(np.nanmax(outcome.last_token_s, initial=start_s)))
    duration_s = end_s - start_s
    usage = _group_usage(groups, outcome.replicas, duration_s)
    energy_j = sum(u.energy_j for u in usage)
    idle_power_w = sum(g.replicas * g.profile.power_w(0.0, 0.0) for g in groups)

    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    ttft_p = _percentiles(ttft[served])
    tpot_p = _percentiles(tpot[served])
    return ServingResult(
        ttft_s=ttft[inverse],
        tpot_s=tpot[inverse],
        met_slo=met[inverse],
        served=served[inverse],
        ttft_p50_s=ttft_p[0],
        ttft_p90_s=ttft_p[1],
        ttft_p99_s=ttft_p[2],
        tpot_p50_s=tpot_p[0],
        tpot_p90_s=tpot_p[1],
        tpot_p99_s=tpot_p[2],
        slo_attainment_pct=100.0 * float(met.mean()),
        cost_per_hour=plan.cost_per_hour,
        gpus_by_type=plan.gpus_by_type(),
        energy_j=energy_j,
        mean_power_w=energy_j / duration_s if duration_s > 0 else idle_power_w,
        groups=usage,
        requests_served=int(served.sum()),
        requests_unrouted=int(unrouted.sum()),
        requests_too_large=int(too_large.sum()),
        duration_s=duration_s,
        offered_rate_per_s=_mean_rate_per_s(arrival_s),
        tpot_mean_s=mean_tpot_s(tpot, outputs, served),
    )


def _checked_requests(
    requests: LlmRequests,
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]:
    arrival_s = np.asarray(requests.arrival_s, dtype=np.float64)
    prompts = np.asarray(requests.prompt_tokens)
    outputs = np.asarray(requests.output_tokens)
    shapes = {arrival_s.shape, prompts.shape, outputs.shape}
    if len(shapes) != 1 or arrival_s.ndim != 1:
        raise InvalidRequestError(
            "requests: arrival_s, prompt_tokens and output_tokens must be 1-D arrays of one "
            f"length, got shapes {arrival_s.shape}, {prompts.shape}, {outputs.shape}"
        )
    if arrival_s.size == 0:
        raise InvalidRequestError("requests: no requests to replay")
    if not np.all(np.isfinite(arrival_s)):
        raise InvalidRequestError("requests: arrival_s must be finite")
    for name, tokens in (("prompt_tokens", prompts), ("output_tokens", outputs)):
        if not np.issubdtype(tokens.dtype, np.integer):
            raise InvalidRequestError(f"requests: {name} must be integers, got {tokens.dtype}")
        if tokens.min() < 1:
            raise InvalidRequestError(
                f"requests: every request needs {name} >= 1, found {int(tokens.min())}"
            )
    return arrival_s, prompts.astype(np.int64), outputs.astype(np.int64)


def _check_plan(plan: ServingPlan) -> None:
    if not plan.groups:
        raise InvalidRequestError(f"plan {plan.formulation!r}: has no replica groups to simulate")
    buckets = len(plan.mix.buckets)
    for group in plan.groups:
        if group.role not in ROLES:
            raise InvalidRequestError(
                f"group {group.label}: role must be one of {', '.join(ROLES)}"
            )
        if group.replicas < 1:
            raise InvalidRequestError(
                f"group {group.label}: replicas must be at least 1, got {group.replicas}"
            )
        if not _is_count(group.max_batch):
            raise InvalidRequestError(
                f"group {group.label}: max_batch must be an integer >= 1, got {group.max_batch}"
            )
        chunk = group.prefill_chunk_tokens
        if chunk is not None and not _is_count(chunk):
            raise InvalidRequestError(
                f"group {group.label}: prefill_chunk_tokens must be None or an integer >= 1, "
                f"got {chunk}"
            )
        for bucket, rate in group.bucket_rates_per_s.items():
            if not 0 <= bucket < buckets:
                raise InvalidRequestError(
                    f"group {group.label}: bucket {bucket} is not in the plan's mix "
                    f"(positions 0-{buckets - 1})"
                )
            if not (np.isfinite(rate) and rate >= 0):
                raise InvalidRequestError(
                    f"group {group.label}: bucket_rates_per_s[{bucket}] = {rate} must be a "
                    "finite rate >= 0"
                )


def _is_count(value: object) -> bool:
    """Whether `value` is an integer (not a bool) of at least 1."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and bool(value >= 1)


def _group_usage(
    groups: Sequence[ReplicaGroup], replicas: Sequence[ReplicaUsage], duration_s: float
) -> tuple[GroupUsage, ...]:
    """Busy shares and energy per group: each replica at `power_w` of its prefill and decode
    shares over the duration (a mixed iteration's chunk share counts as prefill, the rest as
    decode)."""
    usage = []
    for index, group in enumerate(groups):
        members = [r for r in replicas if r.pool == index]
        prefill_s = sum(r.prefill_busy_s for r in members)
        decode_s = sum(r.decode_busy_s for r in members)
        energy_j = 0.0
        if duration_s > 0:
            energy_j = sum(
                group.profile.power_w(r.prefill_busy_s / duration_s, r.decode_busy_s / duration_s)
                * duration_s
                for r in members
            )
        replica_s = group.replicas * duration_s
        usage.append(
            GroupUsage(
                label=group.label,
                role=group.role,
                replicas=group.replicas,
                requests=sum(r.requests for r in members),
                prefill_share=prefill_s / replica_s if replica_s > 0 else 0.0,
                decode_share=decode_s / replica_s if replica_s > 0 else 0.0,
                energy_j=energy_j,
            )
        )
    return tuple(usage)


def _mean_rate_per_s(arrival_s: NDArray[np.float64]) -> float:
    """`trace_rate_per_s` of arrivals that need not start at 0 nor be sorted."""
    relative_s = np.sort(arrival_s) - arrival_s.min()
    empty = np.zeros(relative_s.size, dtype=np.int64)
    return trace_rate_per_s(LlmRequests(relative_s, empty, empty))


def _percentiles(values: NDArray[np.float64]) -> tuple[float, float, float]:
    if values.size == 0:
        return (float("nan"),) * 3
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return float(p50), float(p90), float(p99)
