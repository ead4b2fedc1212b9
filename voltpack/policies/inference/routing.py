"""How a plan's router sends requests to its replica groups (shared by the serving simulator
and the planner's own check of a plan, `attainment.py`).

Each request's bucket (its position in `plan.mix`) selects a front group (unified or prefill)
at random in proportion to the groups' planned `bucket_rates_per_s`, and for a prefill group
also a decode group the same way (seeded). A request is unrouted when no group serves its
bucket or its prefill group has no decode group, and too large when it needs more KV cache
than one replica of its group holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from voltpack.policies.inference.plan import ReplicaGroup, ServingPlan


@dataclass(frozen=True)
class Routes:
    """Per request: its planned front and decode group (-1 where none or not served), whether
    it is unrouted or too large (both groups then -1), and the other groups of its front
    group's role that serve its bucket or can serve it within the SLO (`capacity_per_s`):
    the engine starts it there instead when a replica there would start it sooner (a router
    that sends a request where it meets the SLO, not only where the plan expected it)."""

    front: NDArray[np.int64]
    decode: NDArray[np.int64]
    unrouted: NDArray[np.bool_]
    too_large: NDArray[np.bool_]
    alternatives: list[tuple[int, ...]]


def route_requests(
    plan: ServingPlan, prompts: NDArray[np.int64], outputs: NDArray[np.int64], seed: int
) -> Routes:
    """The routes of `prompts`/`outputs` through `plan` (seeded draws)."""
    front, decode, unrouted = _route(plan, prompts, outputs, seed)
    large = too_large(plan.groups, front, decode, prompts, outputs)
    front = np.where(large, -1, front)
    decode = np.where(large, -1, decode)
    buckets = plan.mix.bucket_of(prompts, outputs)
    serving: dict[tuple[int, int], tuple[int, ...]] = {}
    alternatives: list[tuple[int, ...]] = []
    for bucket, group in zip(buckets.tolist(), front.tolist(), strict=True):
        if group < 0:
            alternatives.append(())
            continue
        key = (bucket, group)
        if key not in serving:
            role = plan.groups[group].role
            serving[key] = tuple(
                index
                for index, other in enumerate(plan.groups)
                if index != group
                and other.role == role
                and (
                    other.bucket_rates_per_s.get(bucket, 0.0) > 0
                    or other.capacity_per_s.get(bucket, 0.0) > 0
                )
            )
        alternatives.append(serving[key])
    return Routes(front, decode, unrouted, large, alternatives)


def _route(
    plan: ServingPlan, prompts: NDArray[np.int64], outputs: NDArray[np.int64], seed: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """Per request, its front group, its decode group (after a prefill group, else -1), and
    whether it is unrouted (then both are -1)."""
    buckets = plan.mix.bucket_of(prompts, outputs)
    draws = np.random.default_rng(seed).random((2, prompts.size))
    front = choose_groups(plan.groups, ("unified", "prefill"), buckets, draws[0])
    decode = choose_groups(plan.groups, ("decode",), buckets, draws[1])
    prefill_group = np.array([group.role == "prefill" for group in plan.groups])
    via_prefill = prefill_group[front.clip(0)] & (front >= 0)
    unrouted = (front < 0) | (via_prefill & (decode < 0))
    front = np.where(unrouted, -1, front)
    decode = np.where(via_prefill & ~unrouted, decode, -1)
    return front, decode, np.asarray(unrouted, dtype=np.bool_)


def choose_groups(
    groups: Sequence[ReplicaGroup],
    roles: tuple[str, ...],
    buckets: NDArray[np.int64],
    draws: NDArray[np.float64],
) -> NDArray[np.int64]:
    """Per request, a group of `roles` serving its bucket, picked in proportion to the planned
    rates by the uniform draw; -1 where none serves it."""
    chosen = np.full(buckets.size, -1, dtype=np.int64)
    for bucket in np.unique(buckets[buckets >= 0]):
        options = [
            (index, group.bucket_rates_per_s.get(int(bucket), 0.0))
            for index, group in enumerate(groups)
            if group.role in roles
        ]
        options = [(index, rate) for index, rate in options if rate > 0]
        if not options:
            continue
        members = buckets == bucket
        rates = np.array([rate for _, rate in options])
        bounds = np.cumsum(rates) / rates.sum()
        pick = np.minimum(np.searchsorted(bounds, draws[members], side="right"), len(options) - 1)
        chosen[members] = np.array([index for index, _ in options])[pick]
    return chosen


def too_large(
    groups: Sequence[ReplicaGroup],
    front: NDArray[np.int64],
    decode: NDArray[np.int64],
    prompts: NDArray[np.int64],
    outputs: NDArray[np.int64],
) -> NDArray[np.bool_]:
    """Requests whose KV footprint exceeds one replica of their front or decode group:
    prompt + output tokens on a unified or decode replica, the prompt on a prefill replica."""
    capacity = np.array([g.profile.kv_capacity_tokens for g in groups], dtype=np.int64)
    prefill = np.array([g.role == "prefill" for g in groups])
    front_need = np.where(prefill[front.clip(0)], prompts, prompts + outputs)
    too_large = (front >= 0) & (front_need > capacity[front.clip(0)])
    too_large |= (decode >= 0) & (prompts + outputs > capacity[decode.clip(0)])
    return np.asarray(too_large, dtype=np.bool_)
