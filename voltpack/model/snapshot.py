"""The cluster as arrays over nodes: what the scheduling core reads and changes.

One row per node, one column per GPU slot; nodes with fewer GPUs than the widest node have
absent slots (`gpu_present` False, `gpu_free_milli` 0). NICs likewise: one column per NIC slot
of the node's `HostLayout` (`nic_present`, `nic_rdma`, `nic_free_pct` in percent of the NIC's
bandwidth). Arrays make every per-node computation
of a scheduling cycle one vectorised numpy expression, so the cost of a decision grows linearly
in the number of nodes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from voltpack.model.cluster import MILLI_PER_GPU, NIC_PERCENT, Gpu, Node
from voltpack.model.constraints.node_rules import NodeRules
from voltpack.model.errors import InvalidRequestError
from voltpack.model.host_layout import HostLayout
from voltpack.model.power_headroom import PowerHeadroom
from voltpack.model.workload import Pod

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

NO_GPU_MODEL = -1


JournalEntry = tuple[int, int, Pod, tuple[int, ...], tuple[int, ...]]
"""(+1 allocate or -1 release, node, pod, GPU indices, NIC slots): one change to a snapshot."""

_tokens = itertools.count(1)


def gpu_pod_kind(pod: Pod) -> int:
    """Kind of a GPU pod: 0 for a share of one GPU, k for k whole GPUs."""
    return 0 if pod.is_gpu_sharing else pod.num_gpu


@dataclass
class ClusterSnapshot:
    """Capacity and free resources of every node, as numpy arrays indexed by node."""

    node_names: tuple[str, ...]
    gpu_models: tuple[str, ...]
    node_gpu_model: IntArray
    cpu_capacity_milli: IntArray
    cpu_free_milli: IntArray
    memory_capacity_mib: IntArray
    memory_free_mib: IntArray
    gpu_count: IntArray
    gpu_present: BoolArray
    gpu_free_milli: IntArray
    gpu_pod_kinds: IntArray
    """Per node, how many GPU pods of each kind run there: column 0 counts GPU-sharing pods,
    column k counts pods holding k whole GPUs."""
    power: PowerHeadroom | None = None
    """Power domains' headroom, when the cluster has power budgets."""
    layouts: tuple[HostLayout | None, ...] = ()
    """Per node, how its GPUs and NICs are connected (None: unknown, no NICs)."""
    nic_present: BoolArray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.bool_))
    """Per node and NIC slot: the slot holds a NIC of the node's layout."""
    nic_rdma: BoolArray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.bool_))
    """Per node and NIC slot: the NIC does RDMA (InfiniBand or RoCE)."""
    nic_free_pct: IntArray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    """Per node and NIC slot: percent of the NIC's bandwidth still free (0 for absent slots)."""
    rules: NodeRules | None = None
    """What kube-scheduler's filters read of the nodes (labels, taints, cordons, every
    resource, ports, placed pods' labels), when the nodes come from Kubernetes; None: none."""
    _index_by_name: dict[str, int] | None = field(default=None, repr=False, compare=False)
    journal: list[JournalEntry] | None = field(default=None, repr=False, compare=False)
    """While a statement is open (`scheduler/statement.py`): every allocate (+1) and release
    (-1) in order, so that a checkpoint can be rolled back; None: nothing is recorded."""
    row_version: IntArray = field(
        default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False, compare=False
    )
    """Per node, a count of the changes to its free resources in this snapshot (`allocate`,
    `release`, `mark_changed`): a value derived from a row is current while its count is
    unchanged (`model/row_cache.py`), so a decision recomputes only the rows that changed."""
    token: int = field(default_factory=lambda: next(_tokens), repr=False, compare=False)
    """Unique to this snapshot object (a copy gets its own): `row_version` counts compare only
    within one token."""
    derived: dict[object, object] = field(default_factory=dict, repr=False, compare=False)
    """Per-row values derived from this snapshot, by their user's key (`model/row_cache.py`)."""

    def __post_init__(self) -> None:
        count = len(self.node_names)
        if self.row_version.shape != (count,):
            self.row_version = np.zeros(count, dtype=np.int64)
        if not self.layouts:
            self.layouts = (None,) * count
        if self.nic_present.shape[0] != count:
            self.nic_present = np.zeros((count, 0), dtype=np.bool_)
            self.nic_rdma = np.zeros((count, 0), dtype=np.bool_)
            self.nic_free_pct = np.zeros((count, 0), dtype=np.int64)

    @classmethod
    def from_nodes(cls, nodes: Sequence[Node]) -> ClusterSnapshot:
        """Build the arrays from domain nodes (their free CPU, memory and GPU shares)."""
        seen: set[str] = set()
        for node in nodes:
            if node.name in seen:
                raise InvalidRequestError(f"node name {node.name!r} is used by two nodes")
            seen.add(node.name)
        models = tuple(sorted({n.gpu_model for n in nodes if n.gpu_model and n.gpus}))
        model_index = {m: i for i, m in enumerate(models)}
        width = max((n.gpu_count for n in nodes), default=0)
        count = len(nodes)
        gpu_free = np.zeros((count, width), dtype=np.int64)
        present = np.zeros((count, width), dtype=np.bool_)
        for row, node in enumerate(nodes):
            present[row, : node.gpu_count] = True
            gpu_free[row, : node.gpu_count] = [g.milli_free for g in node.gpus]
        cpu_cap = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        mem_cap = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        nic_width = max((len(n.layout.nics) for n in nodes if n.layout is not None), default=0)
        nic_present = np.zeros((count, nic_width), dtype=np.bool_)
        nic_rdma = np.zeros((count, nic_width), dtype=np.bool_)
        nic_free = np.zeros((count, nic_width), dtype=np.int64)
        for row, node in enumerate(nodes):
            if node.layout is None:
                continue
            nics = node.layout.nics
            nic_present[row, : len(nics)] = True
            nic_rdma[row, : len(nics)] = [nic.is_rdma for nic in nics]
            nic_free[row, : len(nics)] = node.nic_free
        return cls(
            node_names=tuple(n.name for n in nodes),
            gpu_models=models,
            node_gpu_model=np.array(
                [
                    model_index[n.gpu_model] if n.gpu_model and n.gpus else NO_GPU_MODEL
                    for n in nodes
                ],
                dtype=np.int64,
            ),
            cpu_capacity_milli=cpu_cap,
            cpu_free_milli=np.array(
                [n.cpu_milli if n.cpu_milli_free is None else n.cpu_milli_free for n in nodes],
                dtype=np.int64,
            ),
            memory_capacity_mib=mem_cap,
            memory_free_mib=np.array(
                [n.memory_mib if n.memory_mib_free is None else n.memory_mib_free for n in nodes],
                dtype=np.int64,
            ),
            gpu_count=present.sum(axis=1).astype(np.int64),
            gpu_present=present,
            gpu_free_milli=gpu_free,
            gpu_pod_kinds=np.zeros((count, width + 1), dtype=np.int64),
            layouts=tuple(n.layout for n in nodes),
            nic_present=nic_present,
            nic_rdma=nic_rdma,
            nic_free_pct=nic_free,
        )

    def node_index(self, name: str) -> int:
        """Row of the node called `name`."""
        if self._index_by_name is None:
            self._index_by_name = {n: i for i, n in enumerate(self.node_names)}
        return self._index_by_name[name]

    @property
    def node_count(self) -> int:
        """Number of nodes."""
        return len(self.node_names)

    @property
    def max_node_cpu_milli(self) -> int:
        """Largest CPU capacity of any node: the scale strategies normalise CPU by."""
        return int(self.cpu_capacity_milli.max(initial=0))

    @property
    def max_node_gpu_milli(self) -> int:
        """Largest GPU capacity of any node in milli-GPU: the scale for GPU amounts."""
        return int(self.gpu_count.max(initial=0)) * MILLI_PER_GPU

    @property
    def total_gpus(self) -> int:
        """Number of GPU devices in the cluster."""
        return int(self.gpu_count.sum())

    def allocated_gpu_milli(self) -> int:
        """Milli-GPU allocated across the cluster."""
        return int(self.total_gpus * MILLI_PER_GPU - self.gpu_free_milli.sum())

    def copy(self) -> ClusterSnapshot:
        """An independent copy (arrays copied, names shared)."""
        return ClusterSnapshot(
            node_names=self.node_names,
            gpu_models=self.gpu_models,
            node_gpu_model=self.node_gpu_model,
            cpu_capacity_milli=self.cpu_capacity_milli,
            cpu_free_milli=self.cpu_free_milli.copy(),
            memory_capacity_mib=self.memory_capacity_mib,
            memory_free_mib=self.memory_free_mib.copy(),
            gpu_count=self.gpu_count,
            gpu_present=self.gpu_present,
            gpu_free_milli=self.gpu_free_milli.copy(),
            gpu_pod_kinds=self.gpu_pod_kinds.copy(),
            power=self.power.copy() if self.power is not None else None,
            layouts=self.layouts,
            nic_present=self.nic_present,
            nic_rdma=self.nic_rdma,
            nic_free_pct=self.nic_free_pct.copy(),
            rules=self.rules.copy() if self.rules is not None else None,
            row_version=self.row_version.copy(),
        )

    def mark_changed(self, rows: Sequence[int] | IntArray) -> None:
        """Record that the free resources or GPUs of `rows` were changed other than by
        `allocate`/`release` (e.g. a faulty GPU taken out): every array write outside those
        two must be followed by this, or values derived from the rows go stale."""
        np.add.at(self.row_version, np.asarray(rows, dtype=np.int64), 1)

    def nic_names(self, node: int, nic_indices: Sequence[int]) -> tuple[str, ...]:
        """Names of the NICs in slots `nic_indices` of `node`, as its layout calls them."""
        layout = self.layouts[node]
        if layout is None:
            return ()
        return tuple(layout.nics[i].name for i in nic_indices)

    def allocate(
        self, node: int, pod: Pod, gpu_indices: Sequence[int], nic_indices: Sequence[int] = ()
    ) -> None:
        """Take the pod's CPU, memory, GPU and NIC shares from `node`; refuse an over-allocation.

        A pod with `rdma_percent` > 0 names exactly one RDMA NIC slot in `nic_indices`; a pod
        without names none.
        """
        self._check_fits(node, pod, gpu_indices)
        nics = self._checked_nics(node, pod, nic_indices)
        if nics and (self.nic_free_pct[node, nics] < pod.rdma_percent).any():
            raise InvalidRequestError(
                f"node {self.node_names[node]}: NIC {self.nic_names(node, nics)} has "
                f"{self.nic_free_pct[node, nics].tolist()} percent free, pod {pod.name} needs "
                f"rdma_percent={pod.rdma_percent}"
            )
        self.cpu_free_milli[node] -= pod.cpu_milli
        self.memory_free_mib[node] -= pod.memory_mib
        for gpu in gpu_indices:
            self.gpu_free_milli[node, gpu] -= pod.gpu_milli
        if nics:
            self.nic_free_pct[node, nics] -= pod.rdma_percent
        if self.rules is not None:
            self.rules.take(node, pod.name, pod.resources, pod.constraints)
        self.row_version[node] += 1
        if pod.num_gpu:
            self.gpu_pod_kinds[node, gpu_pod_kind(pod)] += 1
            if self.power is not None:
                self.power.take(node, pod)
        if self.journal is not None:
            self.journal.append((1, node, pod, tuple(gpu_indices), tuple(nics)))

    def release(
        self, node: int, pod: Pod, gpu_indices: Sequence[int], nic_indices: Sequence[int] = ()
    ) -> None:
        """Give back what `allocate` took; refuse (changing nothing) to exceed capacity."""
        gpus = list(gpu_indices)
        nics = self._checked_nics(node, pod, nic_indices)
        if (
            self.cpu_free_milli[node] + pod.cpu_milli > self.cpu_capacity_milli[node]
            or self.memory_free_mib[node] + pod.memory_mib > self.memory_capacity_mib[node]
            or (self.gpu_free_milli[node, gpus] + pod.gpu_milli > MILLI_PER_GPU).any()
            or len(set(gpus)) != len(gpus)
            or (
                bool(nics)
                and (self.nic_free_pct[node, nics] + pod.rdma_percent > NIC_PERCENT).any()
            )
        ):
            raise InvalidRequestError(
                f"release of pod {pod.name} on node {self.node_names[node]} returns more than "
                "was allocated"
            )
        self.cpu_free_milli[node] += pod.cpu_milli
        self.memory_free_mib[node] += pod.memory_mib
        self.gpu_free_milli[node, gpus] += pod.gpu_milli
        if nics:
            self.nic_free_pct[node, nics] += pod.rdma_percent
        if self.rules is not None:
            self.rules.take(node, pod.name, pod.resources, pod.constraints, sign=-1)
        self.row_version[node] += 1
        if pod.num_gpu:
            self.gpu_pod_kinds[node, gpu_pod_kind(pod)] -= 1
            if self.power is not None:
                self.power.take(node, pod, sign=-1.0)
        if self.journal is not None:
            self.journal.append((-1, node, pod, tuple(gpus), tuple(nics)))

    def _checked_nics(self, node: int, pod: Pod, nic_indices: Sequence[int]) -> list[int]:
        """`nic_indices` as a list, after checking they suit the pod: one present RDMA NIC slot
        when the pod asks for `rdma_percent`, none otherwise."""
        nics = [int(i) for i in nic_indices]
        wanted = 1 if pod.rdma_percent else 0
        if len(nics) != wanted:
            raise InvalidRequestError(
                f"pod {pod.name} with rdma_percent={pod.rdma_percent} needs {wanted} NIC(s), "
                f"got NIC slots {nics}"
            )
        width = self.nic_present.shape[1]
        for nic in nics:
            if not (0 <= nic < width and self.nic_present[node, nic] and self.nic_rdma[node, nic]):
                raise InvalidRequestError(
                    f"node {self.node_names[node]}: NIC slot {nic} is no RDMA NIC, pod "
                    f"{pod.name} needs one for rdma_percent={pod.rdma_percent}"
                )
        return nics

    def _check_fits(self, node: int, pod: Pod, gpu_indices: Sequence[int]) -> None:
        name = self.node_names[node]
        if len(gpu_indices) != pod.num_gpu or len(set(gpu_indices)) != pod.num_gpu:
            raise InvalidRequestError(
                f"pod {pod.name} needs {pod.num_gpu} distinct GPUs, got {list(gpu_indices)}"
            )
        if self.cpu_free_milli[node] < pod.cpu_milli:
            raise InvalidRequestError(
                f"node {name}: {self.cpu_free_milli[node]} CPU milli free, "
                f"pod {pod.name} needs {pod.cpu_milli}"
            )
        if self.memory_free_mib[node] < pod.memory_mib:
            raise InvalidRequestError(
                f"node {name}: {self.memory_free_mib[node]} MiB free, "
                f"pod {pod.name} needs {pod.memory_mib}"
            )
        for gpu in gpu_indices:
            if (
                not (0 <= gpu < self.gpu_count[node])
                or self.gpu_free_milli[node, gpu] < pod.gpu_milli
            ):
                raise InvalidRequestError(
                    f"node {name}: GPU {gpu} cannot give {pod.gpu_milli} milli to pod {pod.name}"
                )

    def _node_nic_free(self, row: int) -> tuple[int, ...]:
        layout = self.layouts[row]
        count = len(layout.nics) if layout is not None else 0
        return tuple(int(pct) for pct in self.nic_free_pct[row, :count])

    def to_nodes(self) -> list[Node]:
        """Domain nodes with the current free resources."""
        nodes = []
        for row, name in enumerate(self.node_names):
            model = self.node_gpu_model[row]
            count = int(self.gpu_count[row])
            nodes.append(
                Node(
                    name=name,
                    cpu_milli=int(self.cpu_capacity_milli[row]),
                    memory_mib=int(self.memory_capacity_mib[row]),
                    gpu_model=self.gpu_models[model] if model != NO_GPU_MODEL else None,
                    gpus=tuple(
                        Gpu(index=i, milli_free=int(self.gpu_free_milli[row, i]))
                        for i in range(count)
                    ),
                    cpu_milli_free=int(self.cpu_free_milli[row]),
                    memory_mib_free=int(self.memory_free_mib[row]),
                    layout=self.layouts[row],
                    nic_free_pct=self._node_nic_free(row),
                )
            )
        return nodes
