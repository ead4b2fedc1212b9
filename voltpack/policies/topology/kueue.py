"""Kueue's topology-aware placement (TAS), re-implemented as a baseline.

Reproduces `findTopologyAssignment` of kubernetes-sigs/kueue v0.19.2
(`pkg/cache/scheduler/tas_flavor_snapshot.go`, commit 8eab68778fc1) for one pod set of identical
pods, without slices, leaders, node affinity or the alpha balanced placement, under its
default feature gates. The Kueue topology is taken to be voltpack's levels with
`kubernetes.io/hostname` below them, so Kueue assigns pods to nodes; level `level_count` here is
that host level (one node per domain).

1. Mode. A required level: only that level. A preferred level: that level first, then one
   level up at a time while no single domain holds the gang; at the top level, as many domains
   as needed. Neither (Kueue's "unconstrained", also what it implies for a pod set without a
   topology request): the host level, as many nodes as needed, never climbing.
2. Algorithm (the profile; Kueue's default, "mixed", is BestFit for required and preferred,
   LeastFreeCapacity for unconstrained). BestFit: domains by free slots descending (ties by
   their label values), take them in turn, but the one that completes the gang is replaced by
   the first domain, from there on, with the fewest slots that still hold what remains.
   LeastFreeCapacity: ascending, the first single domain that fits, else in turn from the
   smallest. MostFreeCapacity (gate removed after v0.12): descending, no replacement.
3. Descent. The children of all chosen domains are pooled, sorted the same way and chosen the
   same way for the whole gang (Kueue does not split the count per parent above the slice
   level), level by level down to nodes.
4. Rank order. Kueue lists the chosen nodes sorted by their label values (level values from
   the top, then the hostname) and its ungater gives ranks in that order.

Nodes missing a level's label are not in a Kueue topology (`NodeMatchesFlavor`): they are never
used here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from voltpack.model.domain_tree import DomainTree, NodeCounts
from voltpack.model.topology import IntArray

KueueProfile = Literal["mixed", "best_fit", "least_free_capacity", "most_free_capacity"]
"""Kueue's TAS profiles: the default (mixed) and the ones older releases had behind gates."""

BoolArray = npt.NDArray[np.bool_]
StrArray = npt.NDArray[np.str_]

_BEST_FIT = "BestFit"
_LEAST_FREE = "LeastFreeCapacity"
_MOST_FREE = "MostFreeCapacity"


@dataclass(frozen=True)
class HostLevels:
    """The tree's levels plus a host level, over the nodes a label-based scheduler sees.

    Level `l` in `0 .. level_count - 1` is the topology's; level `level_count` is the host
    level, where each node is a domain of its own (domain number = node row).
    """

    node_domain: tuple[IntArray, ...]
    """Per level, each node's domain."""
    parent: tuple[IntArray, ...]
    """Per level, each domain's parent at the level above (-1 at level 0)."""
    label: tuple[StrArray, ...]
    """Per level, each domain's own label value (the node name at the host level)."""
    present: tuple[BoolArray, ...]
    """Per level, whether the domain holds at least one node that is seen."""
    capacity: tuple[IntArray, ...]
    """Per level, the slots of the seen nodes, summed."""
    slots: IntArray
    """Per node, its slots; 0 for a node that is not seen."""

    @property
    def host_level(self) -> int:
        """Index of the host level (= the topology's level count)."""
        return len(self.node_domain) - 1

    def level_name(self, tree: DomainTree, level: int) -> str:
        """The level's node label (`kubernetes.io/hostname` for the host level)."""
        if level >= tree.topology.level_count:
            return "kubernetes.io/hostname"
        return tree.topology.levels[level].node_label


def host_levels(tree: DomainTree, seen: BoolArray) -> HostLevels:
    """Per level (host level included) domains, parents, labels and slots of `seen` nodes."""
    topology = tree.topology
    slots = np.where(seen, np.maximum(tree.slots, 0), 0).astype(np.int64)
    node_domain: list[IntArray] = []
    parent: list[IntArray] = []
    label: list[StrArray] = []
    for level in range(topology.level_count):
        node_domain.append(topology.domain[level])
        parent.append(topology.parent[level])
        label.append(
            np.array(
                [topology.domain_label(level, d) for d in range(topology.domain_count(level))],
                dtype=np.str_,
            )
        )
    node_domain.append(np.arange(topology.node_count, dtype=np.int64))
    parent.append(topology.domain[topology.level_count - 1])
    label.append(np.array(topology.node_names, dtype=np.str_))
    present = tuple(
        np.bincount(d, weights=seen, minlength=len(names)) > 0
        for d, names in zip(node_domain, label, strict=True)
    )
    capacity = tuple(
        np.bincount(d, weights=slots, minlength=len(names)).astype(np.int64)
        for d, names in zip(node_domain, label, strict=True)
    )
    return HostLevels(
        node_domain=tuple(node_domain),
        parent=tuple(parent),
        label=tuple(label),
        present=present,
        capacity=capacity,
        slots=slots,
    )


def labelled_nodes(tree: DomainTree) -> BoolArray:
    """Nodes that carry every level's label (the only ones a Kueue or KAI topology holds)."""
    seen = np.ones(tree.topology.node_count, dtype=np.bool_)
    seen[list(tree.topology.unlabelled_nodes)] = False
    return seen


def _value_order(levels: HostLevels) -> tuple[IntArray, ...]:
    """Per level, each domain's rank when domains are compared by their label values.

    Kueue compares two domains by the list of their level values from the top (byte-wise, as
    Go's `strings.Compare`; code-point order here, which is the same for UTF-8).
    """
    ranks: list[IntArray] = []
    for level, names in enumerate(levels.label):
        _, own = np.unique(names, return_inverse=True)
        if level == 0:
            order = np.argsort(own, kind="stable")
        else:
            order = np.lexsort((own, ranks[level - 1][levels.parent[level]]))
        rank = np.empty(len(names), dtype=np.int64)
        rank[order] = np.arange(len(names), dtype=np.int64)
        ranks.append(rank)
    return tuple(ranks)


def _sorted(
    domains: IntArray, capacity: IntArray, value_rank: IntArray, algorithm: str
) -> IntArray:
    """Kueue's `sortedDomains`: by free slots (ascending for LeastFreeCapacity, else
    descending), then by pods ascending (the same number without slices), then by values."""
    caps = capacity[domains]
    primary = caps if algorithm == _LEAST_FREE else -caps
    return domains[np.lexsort((value_rank[domains], caps, primary))]


def _greedy(
    order: IntArray, caps: IntArray, count: int, algorithm: str
) -> tuple[IntArray, IntArray] | None:
    """Kueue's `updateCountsToMinimum` over domains in `order` (their slots `caps`).

    The domains taken and how many pods each gets, or None when they cannot hold `count`.
    """
    if int(caps.sum()) < count:
        return None
    remaining_before = count - np.concatenate(([0], np.cumsum(caps)[:-1]))
    last = int(np.argmax(caps >= remaining_before))
    remaining = int(remaining_before[last])
    chosen = order[: last + 1].copy()
    counts = np.append(caps[:last], remaining).astype(np.int64)
    if algorithm == _BEST_FIT:
        chosen[last] = order[last + _best_fit_index(caps[last:], remaining)]
    keep = counts > 0
    return chosen[keep], counts[keep]


def _best_fit_index(caps: IntArray, needed: int) -> int:
    """Kueue's `findBestFitDomain`: the first of the domains with the fewest slots >= needed."""
    fits = caps >= needed
    tightest = int(caps[fits].min())
    return int(np.argmax(fits & (caps == tightest)))


def _algorithm(profile: KueueProfile, unconstrained: bool) -> str:
    if profile == "least_free_capacity" or (profile == "mixed" and unconstrained):
        return _LEAST_FREE
    if profile == "most_free_capacity":
        return _MOST_FREE
    return _BEST_FIT


def _not_fit(fit: int, pods: int, where: str) -> str:
    if fit == 0:
        return f"topology doesn't allow to fit any of {pods} pod(s){where}"
    return f"topology allows to fit only {fit} out of {pods} pod(s){where}"


def kueue_best_fit(
    tree: DomainTree,
    pods: int,
    required_level: int | None,
    preferred_level: int | None,
    *,
    profile: KueueProfile = "mixed",
) -> NodeCounts | str:
    """Place `pods` identical pods as Kueue's TAS would; a str is why they cannot be placed.

    Levels are indices into the topology's levels, `level_count` meaning a single node. A
    required level wins over a preferred one (as in Kueue, which reads `required` first). The
    nodes come back in Kueue's rank order, each with its pod count.
    """
    host = tree.topology.level_count
    if pods <= 0:
        return NodeCounts((), (), "kueue: nothing to place")
    levels = host_levels(tree, labelled_nodes(tree))
    required = required_level is not None
    unconstrained = required_level is None and preferred_level is None
    start = required_level if required_level is not None else preferred_level
    if start is None:
        start = host
    if not 0 <= start <= host:
        return f"no requested topology level: {start} (levels are 0 to {host})"
    algorithm = _algorithm(profile, unconstrained)
    value_rank = _value_order(levels)

    # phase 2a: the level, and the domains there that hold the gang
    level = start
    while True:
        capacity = levels.capacity[level]
        domains = np.flatnonzero(levels.present[level])
        if len(domains) == 0:
            return f"no topology domains at level: {levels.level_name(tree, level)}"
        order = _sorted(domains, capacity, value_rank[level], algorithm)
        caps = capacity[order]
        fits = caps >= pods
        if fits.any():
            if algorithm == _LEAST_FREE:
                pick = order[int(np.argmax(fits))]
            elif algorithm == _BEST_FIT:
                pick = order[_best_fit_index(caps, pods)]
            else:
                pick = order[0]
            chosen, counts = np.array([pick]), np.array([pods])
            break
        if required:
            largest = order[int(np.argmax(caps))]
            name = (
                tree.topology.node_names[largest]
                if level == host
                else (tree.topology.domain_names[level][largest])
            )
            return _not_fit(
                int(caps.max()),
                pods,
                f' in one domain of level "{levels.level_name(tree, level)}" (largest: {name})',
            )
        if level > 0 and not unconstrained:
            level -= 1
            continue
        taken = _greedy(order, caps, pods, algorithm)
        if taken is None:
            return _not_fit(int(caps.sum()), pods, "")
        chosen, counts = taken
        break
    fit_level = level

    # phase 2b: down level by level, the pooled children of the chosen domains
    for below in range(fit_level + 1, host + 1):
        inside = np.isin(levels.parent[below], chosen) & levels.present[below]
        order = _sorted(
            np.flatnonzero(inside), levels.capacity[below], value_rank[below], algorithm
        )
        taken = _greedy(order, levels.capacity[below][order], pods, algorithm)
        if taken is None:  # cannot happen: children hold what their parents hold
            return _not_fit(int(levels.capacity[below][order].sum()), pods, "")
        chosen, counts = taken

    rank = np.argsort(value_rank[host][chosen], kind="stable")
    nodes, per_node = chosen[rank], counts[rank]
    mode = "required" if required else "unconstrained" if unconstrained else "preferred"
    where = "single node" if fit_level == host else f'level "{levels.level_name(tree, fit_level)}"'
    return NodeCounts(
        tuple(int(n) for n in nodes),
        tuple(int(c) for c in per_node),
        f"kueue {algorithm} ({mode}): placed at {where}",
    )
