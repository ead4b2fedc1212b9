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

**ECMP.** A level whose switches spread flows over their equal-cost uplinks by a hash of each
flow's headers (the Topology level's `ecmpPortGbitS`: IP-routed fabrics such as RoCE) can put
two flows on one port while others idle: Crux (SIGCOMM'24) traces most inter-job contention on
Alibaba's clusters to such collisions, "even in networks with a 1:1 oversubscription". There,
each domain's uplink is `round(capacity / port rate)` ports, each sub-flow (one per port's
worth of a ring hop's rate: NCCL opens a connection per NIC) is hashed onto one port per level
it climbs, and comes back down the same port index at the same level (in a folded Clos the
switch above it chose leads down to the destination's side). The hash is deterministic (the
sub-flow's kind, ring, hop, part and the level), as a switch's is for a given connection. A
level without `ecmpPortGbitS` is balanced (adaptive routing, or InfiniBand's per-destination
routing by its subnet manager): its uplink stays one aggregate link.

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
    """Per level, `[domain, port]`: the link ids of its uplink ports towards the level above
    (-1 past its last port) ..."""
    down: tuple[IntArray, ...]
    """... and of the same ports' direction into the domain."""
    ports: tuple[IntArray, ...]
    """Per level, per domain: how many uplink ports (1: one aggregate link, no hashing)."""
    nic_gbit_s_per_gpu: FloatArray
    """Per node, its NIC capacity over its GPUs (what one rank's ring hop asks for)."""
    port_gbit_s: float | None = None
    """The slowest hashed level's port rate (a hop is split into parts of at most one port's
    worth); None: no level hashes."""

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
    port_counts: list[IntArray] = []
    ratios = [level.oversubscription for level in topology.levels]
    for level in range(topology.level_count):
        port_gbit_s = topology.levels[level].ecmp_port_gbit_s
        domains = topology.domain_count(level)
        under = np.bincount(topology.domain[level], weights=nic, minlength=domains)
        capacity = under / float(np.prod(ratios[level:]))
        ports = np.ones(domains, dtype=np.int64)
        if port_gbit_s is not None:
            ports = np.maximum(1, np.round(capacity / port_gbit_s)).astype(np.int64)
        width = int(ports.max(initial=1))
        total = int(ports.sum())
        column = np.arange(width, dtype=np.int64)
        present = column[None, :] < ports[:, None]
        ids = np.full((domains, width), -1, dtype=np.int64)
        ids[present] = np.arange(total, dtype=np.int64)
        up = np.where(present, ids + next_id, -1)
        down = np.where(present, ids + next_id + total, -1)
        per_port = np.repeat(capacity / ports, ports)
        ups.append(up)
        downs.append(down)
        port_counts.append(ports)
        capacities.extend([per_port, per_port])
        next_id += 2 * total
    gpus = np.array([max(1, host.gpu_count) for host in topology.hosts], dtype=np.float64)
    fabric = FabricLinks(
        capacity_gbit_s=np.concatenate(capacities) if capacities else np.zeros(0),
        nic_out=np.arange(nodes, dtype=np.int64),
        nic_in=np.arange(nodes, 2 * nodes, dtype=np.int64),
        up=tuple(ups),
        down=tuple(downs),
        ports=tuple(port_counts),
        nic_gbit_s_per_gpu=nic / gpus,
        port_gbit_s=min(
            (lv.ecmp_port_gbit_s for lv in topology.levels if lv.ecmp_port_gbit_s), default=None
        ),
    )
    topology.cache[_FABRIC_KEY] = fabric
    return fabric


def hop_paths(
    topology: ClusterTopology,
    fabric: FabricLinks,
    src: IntArray,
    dst: IntArray,
    lane: npt.NDArray[np.uint64] | None = None,
) -> IntArray:
    """`[flow, 2 + 2 x levels]`: the links each hop src -> dst crosses, -1 where it does not.

    `lane` is each flow's hash (ECMP: it picks the port at every level; default 0)."""
    levels = topology.level_count
    paths = np.full((src.size, 2 + 2 * levels), -1, dtype=np.int64)
    paths[:, 0] = fabric.nic_out[src]
    paths[:, 1] = fabric.nic_in[dst]
    common = topology.common_level(src, dst)
    hashes = np.zeros(src.size, dtype=np.uint64) if lane is None else lane
    for level in range(levels):
        climbs = level > common
        up_domain = topology.domain[level, src]
        down_domain = topology.domain[level, dst]
        port = _mix(hashes, np.uint64(level + 1))
        up_port = (port % fabric.ports[level][up_domain].astype(np.uint64)).astype(np.int64)
        down_port = (port % fabric.ports[level][down_domain].astype(np.uint64)).astype(np.int64)
        paths[:, 2 + 2 * level] = np.where(climbs, fabric.up[level][up_domain, up_port], -1)
        paths[:, 3 + 2 * level] = np.where(climbs, fabric.down[level][down_domain, down_port], -1)
    return paths


_MIX_MULTIPLIER = np.uint64(0xBF58476D1CE4E5B9)
_MIX_MULTIPLIER_2 = np.uint64(0x94D049BB133111EB)


def _mix(values: npt.NDArray[np.uint64], salt: np.uint64) -> npt.NDArray[np.uint64]:
    """A deterministic 64-bit hash (splitmix64's finaliser) of `values` and `salt`."""
    with np.errstate(over="ignore"):
        x = values ^ (salt * np.uint64(0x9E3779B97F4A7C15))
        x = (x ^ (x >> np.uint64(30))) * _MIX_MULTIPLIER
        x = (x ^ (x >> np.uint64(27))) * _MIX_MULTIPLIER_2
        return x ^ (x >> np.uint64(31))


def flow_lanes(*parts: IntArray) -> npt.NDArray[np.uint64]:
    """One hash per flow of its identifying integers (kind, ring, hop, NIC, ...)."""
    lane = np.zeros(parts[0].shape, dtype=np.uint64)
    for salt, part in enumerate(parts, start=1):
        lane = _mix(lane ^ part.astype(np.uint64), np.uint64(salt))
    return lane


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
    rings: list[IntArray] = []
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
        ring = np.broadcast_to(np.arange(a.shape[0], dtype=np.int64)[:, None], a.shape)
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
        rings.append(ring[crosses])
    if not kinds:
        empty = np.zeros(0, dtype=np.int64)
        return GangFlows(
            empty, np.zeros((0, 2 + 2 * topology.level_count), np.int64), np.zeros(0), np.zeros(0)
        )
    kind_all, src_all, dst_all, ask_all, ring_all = (
        np.concatenate(kinds),
        np.concatenate(sources),
        np.concatenate(targets),
        np.concatenate(asks),
        np.concatenate(rings),
    )
    lane = None
    if fabric.port_gbit_s is not None:  # ECMP: one sub-flow per NIC the hop spans, hashed
        split = np.maximum(1, np.round(ask_all / fabric.port_gbit_s)).astype(np.int64)
        owner = np.repeat(np.arange(split.size), split)
        nic = np.arange(owner.size) - np.repeat(np.cumsum(split) - split, split)
        kind_all, src_all, dst_all, ring_all = (
            kind_all[owner],
            src_all[owner],
            dst_all[owner],
            ring_all[owner],
        )
        ask_all = (ask_all / split)[owner]
        lane = flow_lanes(kind_all, ring_all, src_all, dst_all, nic)
    paths = hop_paths(topology, fabric, src_all, dst_all, lane)
    keyed = np.concatenate([kind_all[:, None], paths], axis=1)
    unique, first, inverse = np.unique(keyed, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    weight = np.bincount(inverse, minlength=unique.shape[0]).astype(np.float64)
    demand = np.bincount(inverse, weights=ask_all, minlength=unique.shape[0]).astype(np.float64)
    return GangFlows(
        kind=kind_all[first],
        paths=paths[first],
        demand_gbit_s=demand,
        weight=weight,
    )
