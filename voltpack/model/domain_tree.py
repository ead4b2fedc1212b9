"""A topology's domains with the free capacity for one gang's pods, summed upward once.

Kueue's topology-aware scheduling builds such a tree once per cycle: per node, how many of the
gang's pods fit ("slots"), then per domain at every level the sum over its nodes. Placement
policies read it and answer with how many pods go to which node (`NodeCounts`); the mechanism
then picks GPUs inside each node and hands out ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voltpack.model.topology import ClusterTopology, FloatArray, IntArray


@dataclass
class DomainTree:
    """Per node the slots free for one pod shape, and per level each domain's total."""

    topology: ClusterTopology
    slots: IntArray
    """Per node, how many more pods of the shape fit there now (0 for an infeasible node)."""
    capacity: tuple[IntArray, ...]
    """Per level (top to bottom), each domain's slots: the sum over its nodes."""
    free_gpus: IntArray
    """Per node, whole GPUs free (for fragmentation scores)."""
    gpu_count: IntArray
    """Per node, GPUs it has."""
    gpus_per_unit: int = 1
    """GPUs one slot stands for (a pod's, or a tensor-parallel group's)."""
    link_busy: tuple[FloatArray, ...] | None = None
    """Per level (top to bottom) each domain's uplink, then per node its NICs: the share of
    capacity running gangs' traffic asks for (None: unknown). Policies may prefer quiet
    domains among those that fit equally well."""

    @classmethod
    def build(
        cls,
        topology: ClusterTopology,
        slots: IntArray,
        free_gpus: IntArray,
        gpu_count: IntArray,
        gpus_per_unit: int = 1,
        link_busy: tuple[FloatArray, ...] | None = None,
    ) -> DomainTree:
        """Sum `slots` into every level's domains."""
        capacity = tuple(
            np.bincount(
                topology.domain[level], weights=slots, minlength=topology.domain_count(level)
            ).astype(np.int64)
            for level in range(topology.level_count)
        )
        return cls(
            topology=topology,
            slots=np.asarray(slots, dtype=np.int64),
            capacity=capacity,
            free_gpus=np.asarray(free_gpus, dtype=np.int64),
            gpu_count=np.asarray(gpu_count, dtype=np.int64),
            gpus_per_unit=gpus_per_unit,
            link_busy=link_busy,
        )

    def nodes_in(self, level: int, domain: int) -> IntArray:
        """Rows of the nodes inside one domain."""
        return np.flatnonzero(self.topology.domain[level] == domain)

    def children(self, level: int, domain: int) -> IntArray:
        """Domains at `level + 1` inside `domain` (its nodes' rows at the host level)."""
        if level + 1 >= self.topology.level_count:
            return self.nodes_in(level, domain)
        return np.flatnonzero(self.topology.parent[level + 1] == domain)


@dataclass(frozen=True)
class NodeCounts:
    """A placement of a gang's pods on nodes: rows in rank order, and pods per row."""

    nodes: tuple[int, ...]
    pods: tuple[int, ...]
    note: str = ""
    """What the policy wants said about its choice (e.g. the domain it chose)."""

    @property
    def total(self) -> int:
        """Pods placed."""
        return sum(self.pods)
