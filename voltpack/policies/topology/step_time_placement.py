"""voltpack's gang placement: candidate domains scored by predicted step time, then packing.

The tree's slots are counted in placement units (a tensor-parallel group, or a pod when a pod
holds a whole group), so a group never straddles two nodes. Candidates are generated from the
lowest level up (a single node, then each switch level): at every level the few domains that
hold the gang with the least room to spare, ties going to the domain whose parent (then
grandparent) has the least room: hierarchical best fit, so that big domains stay whole for big
gangs. Inside a domain the gang takes the fewest children, largest first, the last one the
tightest that fits (Kueue's BestFit descent), down to nodes. The score is the predicted step
time; among candidates within `STEP_TOLERANCE` of the fastest, the first generated wins, i.e.
the lowest level and the tightest fit.

With the running gangs' traffic known (`DomainTree.link_busy`, from a contention-aware step
model), equally tight domains are ordered quietest uplink first, both among the candidates
and inside a domain (among children of equal room), so the scored candidates include the
placements that share the least with others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from voltpack.model.domain_tree import DomainTree, NodeCounts
from voltpack.model.topology import FloatArray, IntArray

STEP_TOLERANCE = 0.01
"""Candidates within 1% of the fastest predicted step are taken as equally fast."""
CANDIDATES_PER_LEVEL = 3


@dataclass(frozen=True)
class Candidate:
    """One way to place the gang: inside `domain` of `level` (level_count = a single node)."""

    level: int
    domain: int
    counts: NodeCounts
    step_s: float | None = None


def place_by_step_time(
    tree: DomainTree,
    units: int,
    required_level: int | None = None,
    preferred_level: int | None = None,
    step_time_of: Callable[[NodeCounts], float] | None = None,
) -> tuple[Candidate, list[Candidate]] | str:
    """The chosen candidate and all those compared, or the reason none fits.

    `units` is the gang size in the tree's units; `required_level` (an index) bounds the
    domains to that level or deeper; `preferred_level` restricts to it when something fits.
    """
    highest = required_level if required_level is not None else 0
    candidates = _candidates(tree, units, highest, allow_root=required_level is None)
    if not candidates:
        return _no_fit_reason(tree, units, required_level)
    if preferred_level is not None:
        preferred = [c for c in candidates if c.level >= preferred_level]
        candidates = preferred or candidates
    if step_time_of is not None:
        candidates = [
            Candidate(c.level, c.domain, c.counts, step_time_of(c.counts)) for c in candidates
        ]
        fastest = min(c.step_s for c in candidates if c.step_s is not None)
        limit = fastest * (1.0 + STEP_TOLERANCE)
        chosen = next(c for c in candidates if c.step_s is not None and c.step_s <= limit)
    else:
        chosen = candidates[0]
    return chosen, candidates


def _candidates(tree: DomainTree, units: int, highest: int, allow_root: bool) -> list[Candidate]:
    topology = tree.topology
    found: list[Candidate] = []
    host = topology.level_count
    nodes = np.flatnonzero(tree.slots >= units)
    for node in _tightest(tree, host, nodes, tree.slots[nodes]):
        found.append(Candidate(host, int(node), NodeCounts((int(node),), (units,))))
    for level in range(topology.level_count - 1, highest - 1, -1):
        capacity = tree.capacity[level]
        domains = np.flatnonzero(capacity >= units)
        if domains.size == 0:
            continue
        for domain in _tightest(tree, level, domains, capacity[domains]):
            rows: list[int] = []
            pods: list[int] = []
            _fill(tree, level, int(domain), units, rows, pods)
            found.append(Candidate(level, int(domain), NodeCounts(tuple(rows), tuple(pods))))
    spans_top = allow_root and not any(c.level == 0 for c in found)
    if spans_top and topology.level_count and int(tree.capacity[0].sum()) >= units:
        # across top-level domains: the whole cluster is the last candidate
        rows, pods = [], []
        _fill(tree, -1, 0, units, rows, pods)
        found.append(Candidate(-1, 0, NodeCounts(tuple(rows), tuple(pods))))
    return found


def _tightest(tree: DomainTree, level: int, members: IntArray, room: IntArray) -> IntArray:
    """Up to CANDIDATES_PER_LEVEL of `members` (domains of `level`, or nodes at the host level)
    with the least room, ties broken by the parents' room, top-most last."""
    if members.size == 0:
        return members
    topology = tree.topology
    keys: list[npt.NDArray[Any]] = [room]  # most significant first; the index last
    busy = _busy(tree, level, members)
    if busy is not None:  # equally tight: the quieter uplink (or NICs) first
        keys.append(busy)
    for parent_level in range(min(level, topology.level_count) - 1, -1, -1):
        if level == topology.level_count:
            parent_domain = topology.domain[parent_level, members]
        else:
            parent_domain = _ancestor(tree, level, members, parent_level)
        keys.append(tree.capacity[parent_level][parent_domain])
    keys.append(members)
    order = np.lexsort(tuple(reversed(keys)))
    return members[order[:CANDIDATES_PER_LEVEL]]


def _busy(tree: DomainTree, level: int, members: IntArray) -> FloatArray | None:
    """How busy the uplinks of `members` (domains of `level`, or nodes' NICs at the host
    level) are, rounded to tenths so that near-equal loads tie; None when unknown."""
    if tree.link_busy is None:
        return None
    index = tree.topology.level_count if level >= tree.topology.level_count else level
    return np.round(tree.link_busy[index][members], 1)


def _ancestor(tree: DomainTree, level: int, domains: IntArray, target: int) -> IntArray:
    current = domains
    for step in range(level, target, -1):
        current = tree.topology.parent[step][current]
    return current


def _fill(
    tree: DomainTree, level: int, domain: int, need: int, rows: list[int], pods: list[int]
) -> None:
    """Place `need` units inside one domain: fewest children, largest first, last tightest."""
    topology = tree.topology
    if level < 0:  # the whole cluster: its children are the top-level domains
        children = np.arange(topology.domain_count(0), dtype=np.int64)
    else:
        children = tree.children(level, domain)
    at_hosts = level + 1 >= topology.level_count
    room = tree.slots[children] if at_hosts else tree.capacity[level + 1][children]
    useful = room > 0
    children, room = children[useful], room[useful]
    busy = _busy(tree, level + 1 if not at_hosts else topology.level_count, children)
    order = np.lexsort((children, -room) if busy is None else (children, busy, -room))
    children, room = children[order], room[order]
    cumulative = np.cumsum(room)
    count = int(np.searchsorted(cumulative, need)) + 1
    taken = list(zip(children[: count - 1].tolist(), room[: count - 1].tolist(), strict=True))
    remaining = need - sum(r for _, r in taken)
    # the last child: the tightest of those not yet taken that holds what remains
    rest_children, rest_room = children[count - 1 :], room[count - 1 :]
    fits = np.flatnonzero(rest_room >= remaining)
    last = int(fits[np.argmin(rest_room[fits])])
    taken.append((int(rest_children[last]), remaining))
    for child, share in taken:
        if at_hosts:
            rows.append(child)
            pods.append(int(share))
        else:
            _fill(tree, level + 1, child, int(share), rows, pods)


def _no_fit_reason(tree: DomainTree, units: int, required_level: int | None) -> str:
    topology = tree.topology
    total = int(tree.slots.sum())
    if required_level is None or total < units:
        return f"needs {units} placement units, the cluster has room for {total}"
    level = topology.levels[required_level]
    capacity = tree.capacity[required_level]
    best = int(np.argmax(capacity))
    return (
        f"required level {level.display_name} ({level.node_label}): no domain holds "
        f"{units} placement units; the roomiest, "
        f"{topology.domain_label(required_level, best)}, has {int(capacity[best])}"
    )
