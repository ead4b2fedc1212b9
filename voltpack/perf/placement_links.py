"""The slowest link each parallel group crosses on a concrete placement in a topology.

Ranks follow Megatron-LM's default order: tensor-parallel rank fastest, then data, then
pipeline (rank = t + T·(d + D·p)). Each group is a ring over its members in rank order (wrap
included); each hop is one of:

- two GPUs of one NVLink domain (or of nodes in one multi-node NVLink clique): NVLink;
- two GPUs of one node otherwise: PCIe, across sockets when their NUMA nodes differ;
- two nodes: the network, through each GPU's nearest NIC (its alignment: same PCIe switch, same
  NUMA node, or only the same host), at the slower NIC's line rate, divided by the crossing
  factor of the levels between the nodes (`ClusterTopology.crossing_factor`). NCCL runs one ring
  per NIC, so a group with k ranks on a node uses k GPUs' share of that node's NICs.

A node that reported no NIC is taken to have one `FALLBACK_NIC` Ethernet port per node.
A group's link is its slowest hop; the step waits for the slowest group of each kind.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voltpack.model.gpu_sku import GpuSku
from voltpack.model.host_layout import HostLayout, NicDistance
from voltpack.model.topology import NO_CLIQUE, ClusterTopology
from voltpack.perf.links import LinkSpeed, network_speed, nvlink_speed, pcie_speed, slowest
from voltpack.perf.step_time import GroupLinks
from voltpack.perf.training_models import Parallelism

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

FALLBACK_NIC = ("ethernet", 25.0)
"""(class, Gbit/s) assumed for a node with no NIC reported: one 25 GbE port."""
NIC_CLASS_CODES = ("infiniband", "roce", "ethernet")
_TABLES_KEY = "perf.placement_links"


@dataclass(frozen=True)
class GpuTables:
    """Per node and GPU slot: NVLink domain, NUMA node and nearest NIC; per node NICs/GPU."""

    nvlink_domain: IntArray
    numa: IntArray
    nic_class: IntArray
    nic_rate_gbit_s: FloatArray
    nic_alignment: IntArray
    nics_per_gpu: FloatArray


def gpu_tables(topology: ClusterTopology) -> GpuTables:
    """The per-GPU arrays of a topology (built once per topology object, then reused)."""
    cached = topology.cache.get(_TABLES_KEY)
    if isinstance(cached, GpuTables):
        return cached
    width = max((host.gpu_count for host in topology.hosts), default=0) or 1
    count = topology.node_count
    tables = GpuTables(
        nvlink_domain=np.full((count, width), -1, dtype=np.int64),
        numa=np.full((count, width), -1, dtype=np.int64),
        nic_class=np.full((count, width), NIC_CLASS_CODES.index(FALLBACK_NIC[0]), np.int64),
        nic_rate_gbit_s=np.full((count, width), FALLBACK_NIC[1], dtype=np.float64),
        nic_alignment=np.full((count, width), int(NicDistance.SAME_HOST), dtype=np.int64),
        nics_per_gpu=np.ones(count, dtype=np.float64),
    )
    rows_by_layout: dict[int, list[int]] = {}
    layouts: dict[int, HostLayout] = {}
    for row, host in enumerate(topology.hosts):
        rows_by_layout.setdefault(id(host), []).append(row)
        layouts[id(host)] = host
    for key, rows in rows_by_layout.items():
        _fill_layout(tables, np.array(rows, dtype=np.int64), layouts[key])
    topology.cache[_TABLES_KEY] = tables
    return tables


def _fill_layout(tables: GpuTables, rows: IntArray, host: HostLayout) -> None:
    gpus = host.gpu_count
    if gpus == 0:
        return
    tables.nvlink_domain[np.ix_(rows, np.arange(gpus))] = host.nvlink_domain_of()
    if host.numa_of_gpu:
        numa = [-1 if n is None else n for n in host.numa_of_gpu]
        tables.numa[np.ix_(rows, np.arange(gpus))] = numa
    candidates = [nic for nic in host.nics if nic.is_rdma] or list(host.nics)
    if not candidates:
        tables.nics_per_gpu[rows] = 1.0 / gpus
        return
    tables.nics_per_gpu[rows] = len(candidates) / gpus
    for gpu in range(gpus):
        nearest = min(
            candidates,
            key=lambda nic: (host.nic_distance(gpu, nic), -nic.line_rate_gbit_s, nic.name),
        )
        tables.nic_class[rows, gpu] = NIC_CLASS_CODES.index(nearest.nic_class)
        tables.nic_rate_gbit_s[rows, gpu] = nearest.line_rate_gbit_s
        tables.nic_alignment[rows, gpu] = int(host.nic_distance(gpu, nearest))


@dataclass(frozen=True)
class LinkParts:
    """A kind of group's slowest hop inside nodes (NVLink or PCIe) and over the network."""

    local: LinkSpeed | None
    """None when every hop of this kind crosses the network."""
    network: LinkSpeed | None
    """None when no group of this kind crosses the network."""

    def link(self, network_slowdown: float = 1.0) -> LinkSpeed:
        """The group's slowest link when its network hops run `network_slowdown` (>= 1)
        times slower than alone."""
        speeds = [] if self.local is None else [self.local]
        if self.network is not None:
            speeds.append(self.network.scaled(1.0 / max(1.0, network_slowdown)))
        return slowest(*speeds)


@dataclass(frozen=True)
class PlacementParts:
    """`LinkParts` of the tensor, pipeline and data groups of one placement."""

    tensor: LinkParts
    pipeline: LinkParts
    data: LinkParts

    def links(self, slowdown: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> GroupLinks:
        """Group links with each kind's network hops slowed by (tensor, pipeline, data)."""
        return GroupLinks(
            tensor=self.tensor.link(slowdown[0]),
            pipeline=self.pipeline.link(slowdown[1]),
            data=self.data.link(slowdown[2]),
        )


def placement_link_parts(
    topology: ClusterTopology,
    rank_nodes: IntArray,
    rank_gpus: IntArray,
    parallelism: Parallelism,
    sku: GpuSku,
    oversubscribed: bool = True,
) -> PlacementParts:
    """Per kind of group, its slowest local and network hop when rank r runs on
    (rank_nodes[r], rank_gpus[r]).

    `oversubscribed` True divides network hops by the crossing factor of the levels they
    climb (every host's fair share of busy uplinks); False prices them at the NICs' rate, for
    a model that puts the uplinks' sharing in explicitly (`voltpack.perf.network_flows`).
    """
    size = parallelism.world_size
    if len(rank_nodes) != size or len(rank_gpus) != size:
        raise ValueError(f"{len(rank_nodes)} ranks placed, parallelism needs {size}")
    tables = gpu_tables(topology)
    nodes = np.asarray(rank_nodes, dtype=np.int64).reshape(
        parallelism.pipeline, parallelism.data, parallelism.tensor
    )
    gpus = np.asarray(rank_gpus, dtype=np.int64).reshape(nodes.shape)

    def parts(axis: int) -> LinkParts:
        return _slowest_in_groups(topology, tables, sku, nodes, gpus, axis, oversubscribed)

    return PlacementParts(tensor=parts(2), pipeline=parts(0), data=parts(1))


def placement_links(
    topology: ClusterTopology,
    rank_nodes: IntArray,
    rank_gpus: IntArray,
    parallelism: Parallelism,
    sku: GpuSku,
) -> GroupLinks:
    """The slowest link of each kind of group when rank r runs on (rank_nodes[r], rank_gpus[r])."""
    return placement_link_parts(topology, rank_nodes, rank_gpus, parallelism, sku).links()


def _slowest_in_groups(
    topology: ClusterTopology,
    tables: GpuTables,
    sku: GpuSku,
    nodes: IntArray,
    gpus: IntArray,
    axis: int,
    oversubscribed: bool,
) -> LinkParts:
    """Slowest ring hop over every group that runs along `axis` of the [p, d, t] rank grid."""
    members = np.moveaxis(nodes, axis, -1).reshape(-1, nodes.shape[axis])
    member_gpus = np.moveaxis(gpus, axis, -1).reshape(members.shape)
    intra = nvlink_speed(sku)
    if members.shape[1] == 1:
        return LinkParts(intra, None)
    a_node, b_node = members, np.roll(members, -1, axis=1)
    a_gpu, b_gpu = member_gpus, np.roll(member_gpus, -1, axis=1)
    if members.shape[1] == 2:  # a ring of two is one link, not two
        a_node, b_node, a_gpu, b_gpu = a_node[:, :1], b_node[:, :1], a_gpu[:, :1], b_gpu[:, :1]
    speeds: list[LinkSpeed] = []
    same_node = a_node == b_node
    a_domain = tables.nvlink_domain[a_node, a_gpu]
    on_nvlink = same_node & (a_domain >= 0) & (a_domain == tables.nvlink_domain[b_node, b_gpu])
    cliques = topology.clique
    on_nvlink |= ~same_node & (cliques[a_node] != NO_CLIQUE) & (cliques[a_node] == cliques[b_node])
    if on_nvlink.any():
        speeds.append(intra)
    pcie = same_node & ~on_nvlink
    if pcie.any():
        a_numa, b_numa = tables.numa[a_node, a_gpu], tables.numa[b_node, b_gpu]
        crosses = pcie & (a_numa >= 0) & (b_numa >= 0) & (a_numa != b_numa)
        speeds.append(pcie_speed(sku, cross_socket=bool(crosses.any())))
    network = ~same_node & ~on_nvlink
    network_speed_: LinkSpeed | None = None
    if network.any():
        network_speed_ = _network_hops(
            topology, tables, members, a_node, b_node, a_gpu, b_gpu, network, oversubscribed
        )
    return LinkParts(slowest(*speeds) if speeds else None, network_speed_)


def _network_hops(
    topology: ClusterTopology,
    tables: GpuTables,
    members: IntArray,
    a_node: IntArray,
    b_node: IntArray,
    a_gpu: IntArray,
    b_gpu: IntArray,
    network: npt.NDArray[np.bool_],
    oversubscribed: bool = True,
) -> LinkSpeed:
    """Slowest network hop: one `network_speed` call per distinct kind of hop."""
    group_of_hop = np.broadcast_to(np.arange(members.shape[0])[:, None], a_node.shape)[network]
    ranks_per_node = min_ranks_per_node(members)[group_of_hop]
    an, bn, ag, bg = a_node[network], b_node[network], a_gpu[network], b_gpu[network]
    factor = (
        topology.crossing_factor(topology.common_level(an, bn))
        if oversubscribed
        else np.ones(an.shape, dtype=np.float64)
    )
    rate = np.minimum(tables.nic_rate_gbit_s[an, ag], tables.nic_rate_gbit_s[bn, bg])
    nic_class = np.maximum(tables.nic_class[an, ag], tables.nic_class[bn, bg])
    alignment = np.maximum(tables.nic_alignment[an, ag], tables.nic_alignment[bn, bg])
    per_gpu = np.minimum(tables.nics_per_gpu[an], tables.nics_per_gpu[bn])
    kinds = np.unique(
        np.stack([nic_class, rate, per_gpu, alignment, factor, ranks_per_node], axis=1), axis=0
    )
    return slowest(
        *(
            network_speed(
                NIC_CLASS_CODES[int(kind[0])],
                float(kind[1]),
                float(kind[2]),
                NicDistance(int(kind[3])),
                float(kind[4]),
                ranks_per_node=int(kind[5]),
            )
            for kind in kinds
        )
    )


def min_ranks_per_node(members: IntArray) -> IntArray:
    """Per group (row), the fewest of its ranks that share one of its nodes."""
    ordered = np.sort(members, axis=1)
    starts = np.ones(ordered.shape, dtype=np.bool_)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    result = np.empty(members.shape[0], dtype=np.int64)
    for row in range(members.shape[0]):
        positions = np.flatnonzero(starts[row])
        runs = np.diff(np.append(positions, ordered.shape[1]))
        result[row] = int(runs.min())
    return result
