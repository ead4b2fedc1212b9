"""The optimum placement of one gang on a small cluster, by exhaustive search (a yardstick).

Every way to split the gang's units (tensor-parallel groups, or pods) over the nodes with room
is scored by the predicted step time that the mechanism's `step_time_of` gives for it; the
fastest wins (the first found among equals). Ranks go to nodes in topology order: nodes sorted
by their domain path from the top, so a leaf's nodes hold consecutive ranks.

Symmetric nodes are pruned: nodes under the same leaf with the same host layout, the same free
slots and the same number of free GPUs are taken as interchangeable, and only non-increasing
splits over them are tried. (Two such nodes can still differ in WHICH GPUs are free; the search
assumes the host's GPUs are alike for the network, as on a host with one NVLink domain and a NIC
per GPU pair. A finer host makes this an approximation.)

This is a yardstick for the heuristics, not a policy for production: the search grows
exponentially with the nodes, so it refuses trees with more than `max_nodes` nodes with room or
more than `max_evaluations` splits to score.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from voltpack.model.domain_tree import DomainTree, NodeCounts

MAX_NODES = 16
MAX_EVALUATIONS = 200_000


@dataclass(frozen=True)
class ExactResult:
    """The best split, its predicted step time, and how many splits were scored."""

    counts: NodeCounts
    step_s: float
    evaluated: int


def exact_best(
    tree: DomainTree,
    units: int,
    step_time_of: Callable[[NodeCounts], float],
    required_level: int | None = None,
    *,
    max_nodes: int = MAX_NODES,
    max_evaluations: int = MAX_EVALUATIONS,
) -> ExactResult | str:
    """The fastest split of `units` over the tree's nodes, or why there is none.

    With `required_level`, all the gang's nodes share one domain of that level.
    """
    if units < 1:
        return f"needs at least one placement unit, got {units}"
    topology = tree.topology
    roomy = np.flatnonzero(tree.slots > 0)
    if roomy.size > max_nodes:
        return (
            f"exact search covers up to {max_nodes} nodes with room; this cluster has {roomy.size}"
        )
    total = int(tree.slots[roomy].sum())
    if total < units:
        return f"needs {units} placement units, the cluster has room for {total}"
    if required_level is None:
        groups = [roomy]
    else:
        domains = topology.domain[required_level, roomy]
        groups = [roomy[domains == d] for d in np.unique(domains)]
    best: ExactResult | None = None
    evaluated = 0
    for members in groups:
        if int(tree.slots[members].sum()) < units:
            continue
        for counts in _splits(tree, members, units):
            evaluated += 1
            if evaluated > max_evaluations:
                return (
                    f"exact search stopped after {max_evaluations} splits; use a smaller "
                    "cluster or gang"
                )
            step_s = step_time_of(counts)
            if best is None or step_s < best.step_s:
                best = ExactResult(counts, step_s, 0)
    if best is None:
        level = topology.levels[required_level or 0]
        return f"no {level.display_name} domain has room for {units} placement units"
    return ExactResult(best.counts, best.step_s, evaluated)


def topology_order(tree: DomainTree, rows: np.ndarray) -> list[int]:
    """`rows` sorted by domain path from the top, symmetric nodes next to each other."""
    topology = tree.topology

    def key(row: int) -> tuple[object, ...]:
        path = tuple(
            topology.domain_names[level][int(topology.domain[level, row])]
            for level in range(topology.level_count)
        )
        return (path, -int(tree.slots[row]), -int(tree.free_gpus[row]), row)

    return sorted((int(r) for r in rows), key=key)


def _classes(tree: DomainTree, ordered: list[int]) -> list[list[int]]:
    """Runs of interchangeable nodes (same leaf, host layout, slots and free GPUs)."""
    topology = tree.topology
    leaf = topology.level_count - 1
    classes: list[list[int]] = []
    previous: tuple[int, int, int, int] | None = None
    for row in ordered:
        signature = (
            int(topology.domain[leaf, row]) if leaf >= 0 else -1,
            id(topology.hosts[row]),
            int(tree.slots[row]),
            int(tree.free_gpus[row]),
        )
        if signature == previous:
            classes[-1].append(row)
        else:
            classes.append([row])
        previous = signature
    return classes


def _splits(tree: DomainTree, members: np.ndarray, units: int) -> Iterator[NodeCounts]:
    """Every split of `units` over `members`, up to symmetric nodes, in topology order."""
    classes = _classes(tree, topology_order(tree, members))
    room = [int(tree.slots[c[0]]) * len(c) for c in classes]
    room_after = [sum(room[i + 1 :]) for i in range(len(classes))]
    chosen: list[list[int]] = []

    def walk(index: int, remaining: int) -> Iterator[NodeCounts]:
        if remaining == 0:
            rows: list[int] = []
            pods: list[int] = []
            for nodes, counts in zip(classes[:index], chosen, strict=True):
                for row, count in zip(nodes, counts, strict=True):
                    if count:
                        rows.append(row)
                        pods.append(count)
            yield NodeCounts(tuple(rows), tuple(pods))
            return
        if index == len(classes):
            return
        nodes = classes[index]
        cap = int(tree.slots[nodes[0]])
        least = max(0, remaining - room_after[index])
        for split in _non_increasing(len(nodes), cap, remaining, least):
            chosen.append(split)
            yield from walk(index + 1, remaining - sum(split))
            chosen.pop()

    yield from walk(0, units)


def _non_increasing(length: int, cap: int, most: int, least: int) -> Iterator[list[int]]:
    """Lists of `length` integers in [0, cap], non-increasing, summing to [least, most];
    largest sums first."""

    def build(prefix: list[int], left: int, bound: int, total: int) -> Iterator[list[int]]:
        if left == 0:
            if least <= total <= most:
                yield list(prefix)
            return
        # the rest can add at most left * bound
        for value in range(min(bound, most - total), -1, -1):
            if total + value + (left - 1) * value < least:
                break
            prefix.append(value)
            yield from build(prefix, left - 1, value, total + value)
            prefix.pop()

    yield from build([], length, cap, 0)


@dataclass(frozen=True)
class ExactPlacer:
    """The exhaustive search as a `TopologyPlacer` (for small clusters; a yardstick)."""

    name: str = "exact"
    keeps_groups_whole: bool = True
    max_nodes: int = MAX_NODES
    max_evaluations: int = MAX_EVALUATIONS

    def choose(
        self,
        tree: DomainTree,
        units: int,
        required_level: int | None,
        preferred_level: int | None,
        step_time_of: Callable[[NodeCounts], float] | None,
    ) -> NodeCounts | str:
        """The fastest split (`preferred_level` is ignored: the step time decides)."""
        del preferred_level
        if step_time_of is None:
            return "exact search needs a step-time model"
        result = exact_best(
            tree,
            units,
            step_time_of,
            required_level,
            max_nodes=self.max_nodes,
            max_evaluations=self.max_evaluations,
        )
        if isinstance(result, str):
            return result
        return NodeCounts(
            result.counts.nodes,
            result.counts.pods,
            f"optimum of {result.evaluated} splits",
        )
