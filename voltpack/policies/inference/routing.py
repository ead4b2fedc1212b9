"""How a plan's router sends requests to its replica groups (shared by the serving simulator
and the planner's own check of a plan, `attainment.py`).

Each request's bucket (its position in `plan.mix`) selects a front group (unified or prefill)
at random in proportion to the groups' planned `bucket_rates_per_s`, and for a prefill group
also a decode group the same way (seeded). Only groups whose context class covers the
request (prompt + output tokens, `ReplicaGroup.covers`) take it: a request longer than every
group planned for its bucket (a request longer than its bucket held when the plan was made)
goes to the groups of the role that can serve its bucket within the SLO and cover it, else
to any group of the role that covers it (in proportion to replicas). At run time the engine
may start a request on another able group of its front role that would start it sooner, and
send a prefilled request's KV cache to another able decode group whose batch has more room
(`Routes`). A request is unrouted
when no group serves its bucket or covers it, or its prefill group has no decode group that
does, and too large
when it needs more KV cache than one replica of its group holds.
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
    group's role that serve its bucket or can serve it within the SLO (`capacity_per_s`)
    and whose context class covers it: the engine starts it there instead when a replica
    there would start it sooner (a router that sends a request where it meets the SLO, not
    only where the plan expected it)."""

    front: NDArray[np.int64]
    decode: NDArray[np.int64]
    unrouted: NDArray[np.bool_]
    too_large: NDArray[np.bool_]
    alternatives: list[tuple[int, ...]]
    decode_alternatives: list[tuple[int, ...]]
    """The same for its decode group: other decode groups the engine sends its KV cache to
    instead when a replica there has more room (`ServingEngine.decode_target`)."""


def route_requests(
    plan: ServingPlan, prompts: NDArray[np.int64], outputs: NDArray[np.int64], seed: int
) -> Routes:
    """The routes of `prompts`/`outputs` through `plan` (seeded draws)."""
    front, decode, unrouted = _route(plan, prompts, outputs, seed)
    large = too_large(plan.groups, front, decode, prompts, outputs)
    front = np.where(large, -1, front)
    decode = np.where(large, -1, decode)
    buckets = plan.mix.serving_bucket_of(prompts, outputs)
    covered = coverage(plan.groups, prompts + outputs)
    return Routes(
        front,
        decode,
        unrouted,
        large,
        _alternatives(plan, buckets, front, covered),
        _alternatives(plan, buckets, decode, covered),
    )


def _alternatives(
    plan: ServingPlan,
    buckets: NDArray[np.int64],
    chosen: NDArray[np.int64],
    covered: NDArray[np.bool_],
) -> list[tuple[int, ...]]:
    """Per request, the groups other than its `chosen` one (-1: none) of the same role that
    serve its bucket or can serve it within the SLO and whose context class covers it."""
    serving: dict[tuple[int, int, bytes], tuple[int, ...]] = {}
    alternatives: list[tuple[int, ...]] = []
    for request, (bucket, group) in enumerate(zip(buckets.tolist(), chosen.tolist(), strict=True)):
        if group < 0:
            alternatives.append(())
            continue
        key = (bucket, group, covered[request].tobytes())
        if key not in serving:
            role = plan.groups[group].role
            serving[key] = tuple(
                index
                for index, other in enumerate(plan.groups)
                if index != group
                and other.role == role
                and covered[request, index]
                and (
                    other.bucket_rates_per_s.get(bucket, 0.0) > 0
                    or other.capacity_per_s.get(bucket, 0.0) > 0
                )
            )
        alternatives.append(serving[key])
    return alternatives


def coverage(groups: Sequence[ReplicaGroup], contexts: NDArray[np.int64]) -> NDArray[np.bool_]:
    """[request, group]: whether the group's context class takes the request's context."""
    if not groups:
        return np.zeros((contexts.size, 0), dtype=np.bool_)
    return np.stack([group.covers(contexts) for group in groups], axis=1)


def _route(
    plan: ServingPlan, prompts: NDArray[np.int64], outputs: NDArray[np.int64], seed: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """Per request, its front group, its decode group (after a prefill group, else -1), and
    whether it is unrouted (then both are -1)."""
    buckets = plan.mix.serving_bucket_of(prompts, outputs)
    draws = np.random.default_rng(seed).random((2, prompts.size))
    covered = coverage(plan.groups, prompts + outputs)
    front = choose_groups(plan.groups, ("unified", "prefill"), buckets, draws[0], covered)
    decode = choose_groups(plan.groups, ("decode",), buckets, draws[1], covered)
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
    covered: NDArray[np.bool_] | None = None,
) -> NDArray[np.int64]:
    """Per request, a group of `roles` that covers it (`covered[request, group]`, default:
    every group covers every request), picked by the uniform draw in proportion to the
    rates planned for its bucket; when none of those covers it, in proportion to the
    capacities for its bucket (`capacity_per_s`); failing that, to the replicas of any
    group of `roles`. -1 where no group of `roles` is planned for its bucket (or it is
    outside the mix) or none covers it."""
    chosen = np.full(buckets.size, -1, dtype=np.int64)
    if covered is None:
        covered = np.ones((buckets.size, len(groups)), dtype=np.bool_)
    members_of_role = [index for index, group in enumerate(groups) if group.role in roles]
    if not members_of_role:
        return chosen
    candidates = np.array(members_of_role)
    replicas = np.array([float(groups[i].replicas) for i in members_of_role])
    for bucket in np.unique(buckets[buckets >= 0]):
        members = np.flatnonzero(buckets == bucket)
        planned = np.array(
            [groups[i].bucket_rates_per_s.get(int(bucket), 0.0) for i in members_of_role]
        )
        if not (planned > 0).any():
            continue
        capacity = np.array(
            [groups[i].capacity_per_s.get(int(bucket), 0.0) for i in members_of_role]
        )
        takes = covered[np.ix_(members, candidates)]
        weights = np.zeros(takes.shape)
        for tier in (planned, capacity, replicas):
            pending = weights.sum(axis=1) <= 0
            if not pending.any():
                break
            weights[pending] = takes[pending] * np.maximum(tier, 0.0)[None, :]
        total = weights.sum(axis=1)
        routed = total > 0
        bounds = np.cumsum(weights[routed], axis=1) / total[routed, None]
        picks = (bounds <= draws[members[routed], None]).sum(axis=1)
        # never past the last group with weight (a draw at the top of the range)
        last = weights.shape[1] - 1 - np.argmax(weights[routed][:, ::-1] > 0, axis=1)
        chosen[members[routed]] = candidates[np.minimum(picks, last)]
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
