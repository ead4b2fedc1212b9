"""Max-min fair sharing of link bandwidth among flows (progressive filling, "water-filling").

The first building block of the flow-level network model (issue 32, item 1): given links with
capacities and flows that each cross a set of links (and may have a demand cap), every flow's
rate in the max-min fair allocation (Bertsekas & Gallager, *Data Networks*, 2nd ed., sec. 6.5.2):
all unfrozen flows are raised at the same pace; when a link saturates, the flows crossing it
freeze; a flow that reaches its demand freezes there. The result is the unique allocation in
which no flow can gain without taking from a flow that has no more than it.

Pure and vectorised: each round is a few numpy passes over the (flow, link) pairs, and every
round freezes at least one link or flow, so at most `links + flows` rounds.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np
import numpy.typing as npt

from voltpack.model.errors import InvalidRequestError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

SATURATION_TOLERANCE = 1e-9
"""A link counts as saturated when its spare capacity is at most this share of its capacity."""


def flow_link_pairs(
    flow_links: Sequence[Collection[int]], link_count: int
) -> tuple[IntArray, IntArray]:
    """The distinct (flow, link) pairs of `flow_links`, as two aligned arrays.

    A link listed twice for one flow counts once (a path crosses a link once); a link id
    outside `0 .. link_count - 1` raises, naming the flow.
    """
    lengths = np.fromiter(
        (len(links) for links in flow_links), dtype=np.int64, count=len(flow_links)
    )
    flows = np.repeat(np.arange(len(flow_links), dtype=np.int64), lengths)
    links = np.fromiter(
        (link for path in flow_links for link in path), dtype=np.int64, count=int(lengths.sum())
    )
    bad = (links < 0) | (links >= link_count)
    if bad.any():
        first = int(np.argmax(bad))
        raise InvalidRequestError(
            f"flow {int(flows[first])} crosses link {int(links[first])}, but the links are "
            f"numbered 0 .. {link_count - 1}"
        )
    pairs = np.unique(flows * max(link_count, 1) + links)
    return pairs // max(link_count, 1), pairs % max(link_count, 1)


def max_min_fair_rates_gbit_s(
    capacity_gbit_s: npt.ArrayLike,
    flow_links: Sequence[Collection[int]],
    demand_gbit_s: npt.ArrayLike | None = None,
    weight: npt.ArrayLike | None = None,
) -> FloatArray:
    """Each flow's rate (Gbit/s) in the max-min fair allocation of the links' capacities.

    `capacity_gbit_s[l]` is link `l`'s capacity; `flow_links[f]` the ids of the links flow `f`
    crosses; `demand_gbit_s[f]` the most flow `f` wants (`inf`: no cap; default: none capped).
    `weight[f]` (> 0, default 1) makes flow `f` count as that many equal flows on one path (an
    aggregate of parallel rings): it is raised `weight` times as fast (weighted max-min).
    A flow crossing no link gets its demand (`inf` when it has none).
    """
    capacity = np.asarray(capacity_gbit_s, dtype=np.float64).reshape(-1)
    flow_count = len(flow_links)
    if not np.all(np.isfinite(capacity)) or np.any(capacity < 0):
        raise InvalidRequestError("link capacity_gbit_s must be finite and >= 0 for every link")
    demand = (
        np.full(flow_count, math.inf)
        if demand_gbit_s is None
        else np.asarray(demand_gbit_s, dtype=np.float64).reshape(-1)
    )
    if demand.shape != (flow_count,):
        raise InvalidRequestError(
            f"demand_gbit_s has {demand.size} values for {flow_count} flows; give one per flow"
        )
    if np.any(np.isnan(demand)) or np.any(demand < 0):
        raise InvalidRequestError("demand_gbit_s must be >= 0 (inf: no cap) for every flow")
    weights = (
        np.ones(flow_count) if weight is None else np.asarray(weight, dtype=np.float64).reshape(-1)
    )
    if weights.shape != (flow_count,) or not np.all(np.isfinite(weights) & (weights > 0)):
        raise InvalidRequestError(f"weight must be one finite value > 0 per flow ({flow_count})")
    flows, links = flow_link_pairs(flow_links, capacity.size)
    return progressive_filling(capacity, demand, flows, links, weights)


def progressive_filling(
    capacity: FloatArray,
    demand: FloatArray,
    flows: IntArray,
    links: IntArray,
    weights: FloatArray,
) -> FloatArray:
    """The rates of `max_min_fair_rates_gbit_s`, given its checked arrays and the distinct
    (flow, link) pairs as two aligned arrays (the form callers with vectorised paths hold)."""
    link_count, flow_count = capacity.size, demand.size
    rate = np.zeros(flow_count)
    spare = capacity.copy()
    active = np.ones(flow_count, dtype=bool)
    link_open = np.ones(link_count, dtype=bool)
    tolerance = SATURATION_TOLERANCE * np.maximum(capacity, 1.0)
    finite_demand = np.where(np.isfinite(demand), demand, 0.0)
    demand_reached = demand - SATURATION_TOLERANCE * np.maximum(finite_demand, 1.0)
    while active.any():
        live = active[flows]
        sharing = np.bincount(links[live], weights=weights[flows[live]], minlength=link_count)
        loaded = sharing > 0
        step = math.inf
        if loaded.any():
            step = float(np.min(spare[loaded] / sharing[loaded]))
        step = min(step, float(np.min((demand[active] - rate[active]) / weights[active])))
        if math.isinf(step):  # the rest cross no link and want all they can get
            rate[active] = math.inf
            break
        rate[active] += step * weights[active]
        spare -= step * sharing
        saturated = loaded & (spare <= tolerance) & link_open
        spare[saturated] = 0.0
        link_open &= ~saturated
        blocked = np.zeros(flow_count, dtype=bool)
        blocked[flows[saturated[links]]] = True
        at_demand = rate >= demand_reached
        rate[at_demand & active] = demand[at_demand & active]
        active &= ~(blocked | at_demand)
    return rate
