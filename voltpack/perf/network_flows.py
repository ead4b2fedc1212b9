"""The flows a placed gang's collectives put on the network, and the links they cross.

The fabric (`FabricLinks`) is every link a flow can wait on, one per direction:

- each node's NICs, out and in: capacity = the line rates of its RDMA NICs (all its NICs when
  none is RDMA; `FALLBACK_NIC` when it reported none);
- each switch domain's uplink, up and down: capacity = the NIC capacity of the hosts under it
  divided by the oversubscription of its own level and of every level below it (a ToR with
  2:1 uplinks carries half of what its hosts can send; an aggregation switch above 2:1 ToRs
  with 2:1 uplinks of its own, a quarter).

A flow from node a to node b crosses a's NIC out, the uplinks (up) of a's domains at every
level below the deepest one a and b share, the same levels' uplinks (down) of b's domains,
and b's NIC in. Nodes of one multi-node NVLink clique talk over NVLink: no flow.

A gang's flows (`gang_flows`) are the hops between nodes of its rings, in Megatron's rank order
(`voltpack.perf.placement_links`): tensor and data groups are rings (wrap included),
pipeline stages send to the next stage and back (no wrap). A hop of a group with k ranks on
its node uses k GPUs' share of the node's NICs (NCCL runs a ring per NIC), so it asks for
k x (NIC capacity / GPUs) of line rate; a pipeline hop asks half that, since a stage sends
activations forward and gradients back in turns, not at once (the step model counts the two
one after the other, so a lone gang's stages never compete with themselves); hops of one kind
between the same two nodes are one flow with that many rings as its weight (weighted max-min
counts it as that many flows).

Line rate, not effective rate: sharing is computed on the wire, and the slowdown it gives
(asked / granted) multiplies the effective speed the step model already prices
(`voltpack.perf.links.network_speed`), so NIC efficiency and GPU-NIC alignment are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from voltpack.model.topology import NO_CLIQUE, ClusterTopology
from voltpack.perf.placement_links import FALLBACK_NIC, min_ranks_per_node
from voltpack.perf.training_models import Parallelism

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_FABRIC_KEY = "perf.network_flows"


class GroupKind(IntEnum):
    """The kind of parallel group a flow belongs to (index into per-kind triples)."""

    TENSOR = 0
    PIPELINE = 1
    DATA = 2


@dataclass(frozen=True)
class FabricLinks:
    """Every directed link of a topology's network, with its capacity (line rate)."""

    capacity_gbit_s: FloatArray
    nic_out: IntArray
    """Per node, the link id of its NICs' sending direction ..."""
    nic_in: IntArray
    """... and of their receiving direction."""
    up: tuple[IntArray, ...]
    """Per level, per domain: the link id of its uplink towards the level above ..."""
    down: tuple[IntArray, ...]
    """... and of the same uplink's direction into the domain."""
    nic_gbit_s_per_gpu: FloatArray
    """Per node, its NIC capacity over its GPUs (what one rank's ring hop asks for)."""

    @property
    def link_count(self) -> int:
        """Number of directed links."""
        return int(self.capacity_gbit_s.size)


def node_nic_gbit_s(topology: ClusterTopology) -> FloatArray:
    """Per node, the line rate of the NICs its GPUs' traffic leaves by."""
    rates = np.empty(topology.node_count, dtype=np.float64)
    for row, host in enumerate(topology.hosts):
        nics = [nic for nic in host.nics if nic.is_rdma] or list(host.nics)
        rates[row] = sum(nic.line_rate_gbit_s for nic in nics) if nics else FALLBACK_NIC[1]
    return rates


def fabric_links(topology: ClusterTopology) -> FabricLinks:
    """The topology's directed links (built once per topology object, then reused)."""
    cached = topology.cache.get(_FABRIC_KEY)
    if isinstance(cached, FabricLinks):
        return cached
    nodes = topology.node_count
    nic = node_nic_gbit_s(topology)
    capacities = [nic, nic]
    next_id = 2 * nodes
    ups: list[IntArray] = []
    downs: list[IntArray] = []
    ratios = [level.oversubscription for level in topology.levels]
    for level in range(topology.level_count):
        domains = topology.domain_count(level)
        under = np.bincount(topology.domain[level], weights=nic, minlength=domains)
        capacity = under / float(np.prod(ratios[level:]))
        ups.append(np.arange(next_id, next_id + domains, dtype=np.int64))
        downs.append(np.arange(next_id + domains, next_id + 2 * domains, dtype=np.int64))
        capacities.extend([capacity, capacity])
        next_id += 2 * domains
    gpus = np.array([max(1, host.gpu_count) for host in topology.hosts], dtype=np.float64)
    fabric = FabricLinks(
        capacity_gbit_s=np.concatenate(capacities) if capacities else np.zeros(0),
        nic_out=np.arange(nodes, dtype=np.int64),
        nic_in=np.arange(nodes, 2 * nodes, dtype=np.int64),
        up=tuple(ups),
        down=tuple(downs),
        nic_gbit_s_per_gpu=nic / gpus,
    )
    topology.cache[_FABRIC_KEY] = fabric
    return fabric


def hop_paths(
    topology: ClusterTopology, fabric: FabricLinks, src: IntArray, dst: IntArray
) -> IntArray:
    """`[flow, 2 + 2 x levels]`: the links each hop src -> dst crosses, -1 where it does not."""
    levels = topology.level_count
    paths = np.full((src.size, 2 + 2 * levels), -1, dtype=np.int64)
    paths[:, 0] = fabric.nic_out[src]
    paths[:, 1] = fabric.nic_in[dst]
    common = topology.common_level(src, dst)
    for level in range(levels):
        climbs = level > common
        paths[:, 2 + 2 * level] = np.where(
            climbs, fabric.up[level][topology.domain[level, src]], -1
        )
        paths[:, 3 + 2 * level] = np.where(
            climbs, fabric.down[level][topology.domain[level, dst]], -1
        )
    return paths


@dataclass(frozen=True)
class GangFlows:
    """The network flows of one placed gang, at full demand (before any duty share)."""

    kind: IntArray
    paths: IntArray
    """`[flow, max links]`, -1 padded (see `hop_paths`)."""
    demand_gbit_s: FloatArray
    """Line rate each flow asks for while its kind communicates (weight x one ring's ask)."""
    weight: FloatArray
    """Rings aggregated into the flow."""

    @property
    def count(self) -> int:
        """Number of flows."""
        return int(self.kind.size)

    def kinds(self) -> tuple[bool, bool, bool]:
        """Which kinds (tensor, pipeline, data) have at least one flow."""
        present = np.bincount(self.kind, minlength=3) > 0
        return bool(present[0]), bool(present[1]), bool(present[2])


def gang_flows(
    topology: ClusterTopology,
    rank_nodes: IntArray,
    rank_gpus: IntArray,
    parallelism: Parallelism,
) -> GangFlows:
    """The flows of a gang with rank r on (rank_nodes[r], rank_gpus[r]) (see the module)."""
    del rank_gpus  # the NIC share is per node; GPUs matter only inside it
    fabric = fabric_links(topology)
    grid = np.asarray(rank_nodes, dtype=np.int64).reshape(
        parallelism.pipeline, parallelism.data, parallelism.tensor
    )
    kinds: list[IntArray] = []
    sources: list[IntArray] = []
    targets: list[IntArray] = []
    asks: list[FloatArray] = []
    for kind, axis in ((GroupKind.TENSOR, 2), (GroupKind.PIPELINE, 0), (GroupKind.DATA, 1)):
        members = np.moveaxis(grid, axis, -1).reshape(-1, grid.shape[axis])
        if members.shape[1] < 2:
            continue
        if kind is GroupKind.PIPELINE:  # stage s sends to s + 1 and back, no wrap
            a = np.concatenate([members[:, :-1], members[:, 1:]], axis=1)
            b = np.concatenate([members[:, 1:], members[:, :-1]], axis=1)
        else:
            a, b = members, np.roll(members, -1, axis=1)
        ranks = np.broadcast_to(min_ranks_per_node(members)[:, None], a.shape)
        crosses = a != b
        crosses &= ~((topology.clique[a] != NO_CLIQUE) & (topology.clique[a] == topology.clique[b]))
        if not crosses.any():
            continue
        src, dst, k = a[crosses], b[crosses], ranks[crosses].astype(np.float64)
        per_gpu = np.minimum(fabric.nic_gbit_s_per_gpu[src], fabric.nic_gbit_s_per_gpu[dst])
        if kind is GroupKind.PIPELINE:
            per_gpu = per_gpu / 2.0  # forward and backward sends take turns
        kinds.append(np.full(src.size, int(kind), dtype=np.int64))
        sources.append(src)
        targets.append(dst)
        asks.append(k * per_gpu)
    if not kinds:
        empty = np.zeros(0, dtype=np.int64)
        return GangFlows(
            empty, np.zeros((0, 2 + 2 * topology.level_count), np.int64), np.zeros(0), np.zeros(0)
        )
    kind_all = np.concatenate(kinds)
    src_all, dst_all, ask_all = (
        np.concatenate(sources),
        np.concatenate(targets),
        np.concatenate(asks),
    )
    nodes = max(topology.node_count, 1)
    key = (kind_all * nodes + src_all) * nodes + dst_all
    unique, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    weight = np.bincount(inverse, minlength=unique.size).astype(np.float64)
    demand = np.bincount(inverse, weights=ask_all, minlength=unique.size).astype(np.float64)
    return GangFlows(
        kind=kind_all[first],
        paths=hop_paths(topology, fabric, src_all[first], dst_all[first]),
        demand_gbit_s=demand,
        weight=weight,
    )
