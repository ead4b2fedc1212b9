"""The cluster's network as arrays over nodes: each node's domain at every level, and its host.

Built once per scheduling cycle from a `TopologySpec` and the nodes' labels (or, in the
simulator, a topology CSV turned into labels), in the snapshot's node order. A domain is
identified by its whole path from the top (`G6/P10/S14`), so two leaves that share a name under
different spines stay apart. A node without a level's label is a domain of its own at that level
and every level below it: the scheduler never assumes it is near anything.

What the model assumes, and cannot see:

- Traffic between two nodes whose deepest shared domain is at level `c` climbs the uplinks of
  every level below `c`; each of those switches divides a host's bandwidth by its
  oversubscription, so the factor is their product (a host's fair share of the uplinks when the
  cluster is busy). Other jobs' actual traffic on shared links is not observed.
- Inside a host, GPUs of one NVLink domain talk over NVLink; others over PCIe (across sockets
  when their NUMA nodes differ). Nodes with the same `nvidia.com/gpu.clique` value share one
  multi-node NVLink domain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from voltpack.model.errors import InvalidRequestError
from voltpack.model.host_layout import HostLayout, HostNic
from voltpack.model.resources.gpunode import Topology as GpuNodeTopology
from voltpack.model.resources.topology import HostSpec, TopologyLevel, TopologySpec

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

NO_CLIQUE = -1


def host_layout_from_spec(spec: HostSpec) -> HostLayout:
    """The `HostLayout` a Topology's `defaultHost` describes."""
    domains = spec.nvlink_domains or ([list(range(spec.gpus))] if spec.gpus else [])
    return HostLayout(
        gpu_count=spec.gpus,
        nvlink_domains=tuple(tuple(d) for d in domains),
        numa_of_gpu=_numa_of_gpu(spec.numa_nodes, spec.gpus),
        nics=tuple(
            HostNic(
                name=nic.name,
                nic_class=nic.nic_class,
                line_rate_gbit_s=nic.line_rate_gbit_s,
                numa_node=nic.numa_node,
                pcie_gpus=tuple(nic.gpus),
            )
            for nic in spec.nics
        ),
    )


def host_layout_from_gpunode(topology: GpuNodeTopology, gpu_count: int) -> HostLayout:
    """The `HostLayout` of a node from what its agent reported in `GPUNode` status.

    NICs without a known line rate, and NVLink domains naming GPUs the node does not have, are
    left out rather than guessed.
    """
    domains = tuple(
        tuple(d) for d in topology.nvlink_domains if d and all(0 <= g < gpu_count for g in d)
    )
    nics = tuple(
        HostNic(
            name=nic.name,
            nic_class=nic.nic_class if nic.nic_class in ("infiniband", "roce") else "ethernet",
            line_rate_gbit_s=nic.bandwidth_gbps,
            numa_node=nic.numa_node,
            pcie_gpus=tuple(g for g in nic.gpus if 0 <= g < gpu_count),
        )
        for nic in topology.nics
        if nic.bandwidth_gbps is not None
    )
    return HostLayout(
        gpu_count=gpu_count,
        nvlink_domains=domains,
        numa_of_gpu=_numa_of_gpu(topology.numa_nodes, gpu_count),
        nics=nics,
    )


def _numa_of_gpu(numa_nodes: Sequence[Sequence[int]], gpu_count: int) -> tuple[int | None, ...]:
    if not numa_nodes:
        return ()
    numa: list[int | None] = [None] * gpu_count
    for number, gpus in enumerate(numa_nodes):
        for gpu in gpus:
            if 0 <= gpu < gpu_count:
                numa[gpu] = number
    return tuple(numa)


@dataclass
class ClusterTopology:
    """Per level (top to bottom) and node, the node's domain; per node, its host layout."""

    levels: tuple[TopologyLevel, ...]
    node_names: tuple[str, ...]
    domain: IntArray
    """`[level, node]`: the node's domain number at that level (numbers are per level)."""
    domain_names: tuple[tuple[str, ...], ...]
    """Per level, each domain's path from the top, e.g. `G6/P10/S14`."""
    parent: tuple[IntArray, ...]
    """Per level, each domain's parent domain at the level above (-1 at the top level)."""
    clique: IntArray
    """Per node, its multi-node NVLink clique number, or `NO_CLIQUE`."""
    hosts: tuple[HostLayout, ...]
    unlabelled_nodes: tuple[int, ...] = ()
    """Nodes that lacked some level's label (each such node is a domain of its own there)."""
    cache: dict[str, object] = field(default_factory=dict, repr=False, compare=False)
    """Tables other packages derive from the topology (e.g. per-GPU NIC arrays), kept with it."""
    _index_by_name: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_labels(
        cls,
        spec: TopologySpec,
        node_names: Sequence[str],
        labels: Mapping[str, Mapping[str, str]],
        hosts: Mapping[str, HostLayout] | None = None,
        gpu_counts: Mapping[str, int] | None = None,
    ) -> ClusterTopology:
        """Domains from each node's labels, in the order of `node_names`.

        A node's host layout is `hosts[name]` if given (from its `GPUNode`), else the spec's
        default host when it has that many GPUs, else all its GPUs (`gpu_counts`) in one NVLink
        domain with no NICs.
        """
        if len(set(node_names)) != len(node_names):
            raise InvalidRequestError("topology: a node name is listed twice")
        level_count = len(spec.levels)
        domain = np.zeros((level_count, len(node_names)), dtype=np.int64)
        names: list[tuple[str, ...]] = []
        parents: list[IntArray] = []
        unlabelled: set[int] = set()
        paths: list[str] = [""] * len(node_names)
        for level_index, level in enumerate(spec.levels):
            numbers: dict[str, int] = {}
            parent_of: list[int] = []
            for row, node in enumerate(node_names):
                value = labels.get(node, {}).get(level.node_label)
                if value is None or row in unlabelled:
                    unlabelled.add(row)
                    value = f"<{node}>"
                path = f"{paths[row]}/{value}" if paths[row] else value
                paths[row] = path
                if path not in numbers:
                    numbers[path] = len(numbers)
                    parent_of.append(int(domain[level_index - 1, row]) if level_index > 0 else -1)
                domain[level_index, row] = numbers[path]
            names.append(tuple(numbers))
            parents.append(np.array(parent_of, dtype=np.int64))
        clique = np.full(len(node_names), NO_CLIQUE, dtype=np.int64)
        if spec.nvlink_clique_label:
            clique_numbers: dict[str, int] = {}
            for row, node in enumerate(node_names):
                value = labels.get(node, {}).get(spec.nvlink_clique_label)
                if value:
                    clique[row] = clique_numbers.setdefault(value, len(clique_numbers))
        default = host_layout_from_spec(spec.default_host) if spec.default_host else None
        layouts = []
        for node in node_names:
            known = (hosts or {}).get(node)
            count = (gpu_counts or {}).get(node)
            if known is not None:
                layouts.append(known)
            elif default is not None and (count is None or count == default.gpu_count):
                layouts.append(default)
            else:
                layouts.append(HostLayout.single_domain(count or 0))
        return cls(
            levels=tuple(spec.levels),
            node_names=tuple(node_names),
            domain=domain,
            domain_names=tuple(names),
            parent=tuple(parents),
            clique=clique,
            hosts=tuple(layouts),
            unlabelled_nodes=tuple(sorted(unlabelled)),
        )

    @property
    def level_count(self) -> int:
        """Number of switch levels (hosts not counted)."""
        return len(self.levels)

    @property
    def node_count(self) -> int:
        """Number of nodes."""
        return len(self.node_names)

    def domain_count(self, level: int) -> int:
        """Number of domains at `level`."""
        return len(self.domain_names[level])

    def node_index(self, name: str) -> int:
        """Row of the node called `name`."""
        if not self._index_by_name:
            self._index_by_name = {n: i for i, n in enumerate(self.node_names)}
        return self._index_by_name[name]

    def level_index(self, label_or_name: str) -> int:
        """The level a label (or a level's display name) names; raise if none does."""
        for index, level in enumerate(self.levels):
            if label_or_name in (level.node_label, level.name):
                return index
        known = ", ".join(level.node_label for level in self.levels)
        raise InvalidRequestError(
            f"topology has no level {label_or_name!r}; its levels are: {known}"
        )

    def common_level(self, a: IntArray | int, b: IntArray | int) -> IntArray:
        """Deepest level at which nodes `a` and `b` share a domain.

        `level_count` means the same node, -1 that they share no level (not even the top).
        """
        left = np.atleast_1d(np.asarray(a, dtype=np.int64))
        right = np.atleast_1d(np.asarray(b, dtype=np.int64))
        same = self.domain[:, left] == self.domain[:, right]  # [level, pair]
        # levels are nested, so the shared ones are a prefix: count them
        shared = np.cumprod(same, axis=0).sum(axis=0) - 1
        return np.where(left == right, self.level_count, shared).astype(np.int64)

    def crossing_factor(self, common_level: IntArray | int) -> FloatArray:
        """Bandwidth divisor for traffic whose deepest shared level is `common_level`.

        The product of the oversubscription of every level below it (1 on one node or one
        leaf); with no shared level, the product over all levels.
        """
        ratios = np.array([level.oversubscription for level in self.levels], dtype=np.float64)
        # factor[c + 1] for c in -1 .. level_count: product of ratios[c + 1:]
        suffix = np.concatenate([np.cumprod(ratios[::-1])[::-1], [1.0, 1.0]])
        return np.asarray(suffix[np.asarray(common_level, dtype=np.int64) + 1], dtype=np.float64)

    def domain_label(self, level: int, number: int) -> str:
        """The last component of a domain's path: what its label says (e.g. `S14`)."""
        return self.domain_names[level][number].rsplit("/", 1)[-1]

    def aligned_to(self, node_names: Sequence[str]) -> ClusterTopology:
        """The same topology in another node order (e.g. a snapshot's); unknown nodes raise."""
        if tuple(node_names) == self.node_names:
            return self
        missing = [n for n in node_names if n not in set(self.node_names)]
        if missing:
            raise InvalidRequestError(
                f"topology does not know node {missing[0]!r} ({len(missing)} nodes unknown)"
            )
        rows = np.array([self.node_index(n) for n in node_names], dtype=np.int64)
        unlabelled = set(self.unlabelled_nodes)
        return ClusterTopology(
            levels=self.levels,
            node_names=tuple(node_names),
            domain=self.domain[:, rows],
            domain_names=self.domain_names,
            parent=self.parent,
            clique=self.clique[rows],
            hosts=tuple(self.hosts[r] for r in rows),
            unlabelled_nodes=tuple(i for i, r in enumerate(rows) if int(r) in unlabelled),
        )
