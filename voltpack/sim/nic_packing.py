"""NIC-bandwidth packing of disaggregated DLRM serving (the Alibaba 2025 trace of Prism, NSDI'25).

The trace lists inference instances of two roles: CN instances (CPU-node: many cores, no GPU)
and HN instances (GPU-node: one GPU, a few cores). Every instance asks for a percentage of ONE
RDMA NIC's bandwidth (`rdma_request`) and obeys its app's `max_instance_per_node`. The trace has
no node inventory; the node shapes come from a documented YAML file (`load_node_shapes`).

The experiment, precisely:

1. **Demand.** The instances alive at one instant `t` (default: the earliest instant at which
   the most instances are alive): created before `t` (an empty `creation_time` means before the
   trace) and not deleted by `t` (an empty `deletion_time` means after the trace). They arrive
   in that order: instances older than the trace first, in file order, then by creation time.
2. **Pools.** Each role has its own pool of nodes of the shapes for that role (CN instances run
   on CN nodes, HN instances on HN nodes, as in Prism). A shape without `max_nodes` offers as
   many nodes as the role has instances, so every instance that fits an empty node is placed.
3. **Placement.** Every policy uses the same scheduling core (`Scheduler`, default strategy
   `best-fit`, ties to the lowest node index so that nodes are opened one by one) and the same
   per-app limit `max_instance_per_node` (a node mask). The policies differ only in how they
   count NIC bandwidth:
   - `joint` (voltpack): the pod asks for `rdma_percent` of one RDMA NIC; the core allocates
     the GPU and the NIC together (nearest NIC first: same PCIe switch, same NUMA node, same
     host) and never lets a NIC's bandwidth exceed 100%.
   - `nic-ignorant`: NIC bandwidth is not a resource; placement sees CPU, memory and GPUs only.
   - `node-nic-count`: what a Kubernetes extended resource can say: the node advertises an
     integer count of RDMA NICs, and a pod asking for any RDMA bandwidth takes one whole NIC
     (a device plugin allocates devices, not shares). Computed by the core as a per-NIC share
     of 100%, which admits exactly the same pods as a node-level count.
   - `node-rdma-pool` (extra): a node-level extended resource counting percent of bandwidth
     (100 per RDMA NIC); a pod takes its percent from the node's sum, not from one NIC.
   For the policies that do not pick a NIC (`nic-ignorant`, `node-rdma-pool`), each placed
   instance is given, after its placement, the NIC its worker would use, with hindsight: the
   nearest RDMA NIC (to its GPU) that still has room for its share, best fit; only when no NIC
   of the node has room, the nearest NIC (the least loaded of equally near ones). The
   oversubscription they report is therefore a lower bound.
4. **Figures,** per policy and role, over the *used* nodes (nodes holding an instance):
   - *nodes used*; GPUs and CPU cores on them, and how many are free.
   - *stranded GPUs*: free GPUs of used nodes that no further instance can use. For a node and
     each distinct request shape `s` of its role in the demand (CPU, memory, GPUs, RDMA
     percent), `k_s` is how many more copies of `s` the node admits under the policy's own
     accounting (free CPU, memory, GPUs and, for `joint` and `node-nic-count`, the free
     percent of each RDMA NIC summed per NIC as `floor(free / share)`; for `node-rdma-pool`
     the node's free pool; `nic-ignorant` counts no NIC). `max_instance_per_node` is not
     applied (another app could use the node). Stranded GPUs of the node = free GPUs minus
     the most GPUs any one shape can still take (`max_s min(free GPUs, k_s x GPUs of s)`).
   - *stranded CPU cores*: likewise, free cores minus `max_s min(free cores, k_s x cores of s)`.
   - *NIC oversubscription*: with each instance's real share on the NIC it uses, the NICs
     loaded above 100%, their excess (sum of load - 100 in percent points), the highest load,
     and the instances on an oversubscribed NIC.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from voltpack.model import safe_yaml
from voltpack.model.cluster import MILLI_PER_GPU, NIC_PERCENT, Node
from voltpack.model.csv_rows import csv_rows, integer_field, number_field
from voltpack.model.errors import TraceFormatError
from voltpack.model.host_layout import HostLayout, NicDistance
from voltpack.model.snapshot import BoolArray, ClusterSnapshot, IntArray
from voltpack.model.workload import Pod
from voltpack.policies.registry import make_strategy
from voltpack.scheduler.nic_allocation import set_distance
from voltpack.scheduler.placement import Scheduler

Role = Literal["CN", "HN"]
ROLES: tuple[Role, ...] = ("CN", "HN")
NicPolicy = Literal["joint", "nic-ignorant", "node-nic-count", "node-rdma-pool"]
POLICIES: tuple[NicPolicy, ...] = ("joint", "nic-ignorant", "node-nic-count", "node-rdma-pool")
TRACE_COLUMNS = (
    "instance_sn",
    "role",
    "app_name",
    "cpu_request",
    "gpu_request",
    "rdma_request",
    "memory_request",
    "max_instance_per_node",
    "creation_time",
    "deletion_time",
)
MIB_PER_GIB = 1024
MILLI_PER_CORE = 1000


# --- the trace ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DlrmInstance:
    """One inference instance of the trace (requests converted to voltpack's units)."""

    name: str
    role: Role
    app: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    rdma_percent: int
    max_per_node: int | None
    """At most this many instances of the app on one node; None: no limit (-1 in the file)."""
    creation_time_s: float | None
    """None: created before the trace started."""
    deletion_time_s: float | None
    """None: still alive when the trace ended."""

    def alive_at(self, time_s: float) -> bool:
        """Created at or before `time_s` and not deleted by then."""
        created = self.creation_time_s is None or self.creation_time_s <= time_s
        return created and (self.deletion_time_s is None or self.deletion_time_s > time_s)

    def pod(self, rdma_percent: int | None = None) -> Pod:
        """The instance as a pod; `rdma_percent` overrides the instance's own share."""
        return Pod(
            name=self.name,
            cpu_milli=self.cpu_milli,
            memory_mib=self.memory_mib,
            num_gpu=self.num_gpu,
            gpu_milli=MILLI_PER_GPU if self.num_gpu else 0,
            rdma_percent=self.rdma_percent if rdma_percent is None else rdma_percent,
            qos="LS",
            creation_time_s=self.creation_time_s or 0.0,
            deletion_time_s=self.deletion_time_s,
        )


def _time(path: Path, line: int, row: dict[str, str], name: str) -> float | None:
    text = (row.get(name) or "").strip()
    if not text or text.lower() == "nan":
        return None
    try:
        value = float(text)
    except ValueError:
        raise TraceFormatError(
            f"{path}:{line}: field {name}={text!r} is not a time in seconds (or empty)"
        ) from None
    if not math.isfinite(value):
        raise TraceFormatError(f"{path}:{line}: field {name}={text!r} is not a finite time")
    return value


def load_dlrm_trace(path: Path) -> list[DlrmInstance]:
    """Read a trace in the format of `disaggregated_DLRM_trace.csv`; instances in file order.

    Raises TraceFormatError naming the file, the line and the field of a malformed row.
    """
    instances: list[DlrmInstance] = []
    seen: set[str] = set()
    for line, row in csv_rows(path, TRACE_COLUMNS):
        where = f"{path}:{line}"
        name = row["instance_sn"].strip()
        if not name:
            raise TraceFormatError(f"{path}:{line}: field instance_sn is empty")
        if name in seen:
            raise TraceFormatError(f"{path}:{line}: field instance_sn={name!r} repeats")
        seen.add(name)
        role = row["role"].strip()
        if role not in ROLES:
            raise TraceFormatError(f"{path}:{line}: field role={role!r} must be CN or HN")
        app = row["app_name"].strip()
        if not app:
            raise TraceFormatError(f"{path}:{line}: field app_name is empty")
        limit = integer_field(where, row, "max_instance_per_node", -1, 1_000_000)
        if limit == 0:
            raise TraceFormatError(
                f"{path}:{line}: field max_instance_per_node=0 allows no instance; use -1 for "
                "no limit"
            )
        creation = _time(path, line, row, "creation_time")
        deletion = _time(path, line, row, "deletion_time")
        if creation is not None and deletion is not None and deletion < creation:
            raise TraceFormatError(
                f"{path}:{line}: field deletion_time={deletion} is before creation_time={creation}"
            )
        instances.append(
            DlrmInstance(
                name=name,
                role=role,
                app=app,
                cpu_milli=round(number_field(where, row, "cpu_request", 0.0) * MILLI_PER_CORE),
                memory_mib=round(number_field(where, row, "memory_request", 0.0) * MIB_PER_GIB),
                num_gpu=integer_field(where, row, "gpu_request", 0, 1024),
                rdma_percent=integer_field(where, row, "rdma_request", 0, NIC_PERCENT),
                max_per_node=None if limit == -1 else limit,
                creation_time_s=creation,
                deletion_time_s=deletion,
            )
        )
    return instances


def peak_time(instances: Sequence[DlrmInstance]) -> float:
    """The earliest instant (0 or a creation time) at which the most instances are alive."""
    events: list[tuple[float, int]] = []
    for instance in instances:
        events.append((instance.creation_time_s or 0.0, 1))
        if instance.deletion_time_s is not None:
            events.append((instance.deletion_time_s, -1))
    # A deletion at t ends the instance before t (alive means deletion > t): -1 sorts first.
    events.sort()
    best_time, best, alive = 0.0, -1, 0
    for index, (time_s, delta) in enumerate(events):
        alive += delta
        last_at_time = index + 1 == len(events) or events[index + 1][0] != time_s
        if last_at_time and alive > best:
            best, best_time = alive, time_s
    return best_time


def demand_at(instances: Sequence[DlrmInstance], time_s: float) -> list[DlrmInstance]:
    """Instances alive at `time_s`, in arrival order (pre-trace ones first, in file order)."""
    alive = [(i, inst) for i, inst in enumerate(instances) if inst.alive_at(time_s)]
    alive.sort(
        key=lambda pair: (
            pair[1].creation_time_s is not None,
            pair[1].creation_time_s or 0.0,
            pair[0],
        )
    )
    return [inst for _, inst in alive]


# --- node shapes ----------------------------------------------------------------------------


class NodeShape(BaseModel):
    """A kind of node the packing may open: its role, CPU, memory, GPUs and NIC layout."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    role: Role
    cpu_cores: int = Field(gt=0)
    memory_gib: int = Field(gt=0)
    gpu_model: str | None = None
    layout: HostLayout
    max_nodes: int | None = Field(default=None, gt=0)
    """At most this many nodes of the shape; None: as many as the role has instances."""
    source: str = ""
    """Where the numbers come from (documentation only)."""

    @model_validator(mode="after")
    def _check_gpus(self) -> NodeShape:
        if self.layout.gpu_count and not self.gpu_model:
            raise ValueError(f"shape {self.name}: has GPUs but no gpu_model")
        return self

    def node(self, index: int) -> Node:
        """An empty node of this shape."""
        return Node.empty(
            name=f"{self.name}-{index:05d}",
            cpu_milli=self.cpu_cores * MILLI_PER_CORE,
            memory_mib=self.memory_gib * MIB_PER_GIB,
            gpu_count=self.layout.gpu_count,
            gpu_model=self.gpu_model,
            layout=self.layout,
        )


class NodeShapesFile(BaseModel):
    """The node-shapes YAML file: `version: 1` and a list of `shapes`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1]
    shapes: tuple[NodeShape, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _check_names(self) -> NodeShapesFile:
        names = [shape.name for shape in self.shapes]
        if len(set(names)) != len(names):
            raise ValueError(f"shape names repeat: {names}")
        return self


def load_node_shapes(path: Path) -> list[NodeShape]:
    """Read a node-shapes YAML file; TraceFormatError names the file and the bad field."""
    try:
        document: Any = safe_yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot open: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise TraceFormatError(f"{path}: not valid YAML: {exc}") from None
    try:
        return list(NodeShapesFile.model_validate(document).shapes)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]) or "(top level)"
            problems.append(f"field {where}: {error['msg'].removeprefix('Value error, ')}")
        raise TraceFormatError(f"{path}: " + "; ".join(problems)) from None


# --- packing --------------------------------------------------------------------------------


@dataclass
class RoleFigures:
    """What one policy did with one role's instances."""

    role: Role
    instances: int = 0
    placed: int = 0
    nodes_used: int = 0
    gpus_on_used_nodes: int = 0
    gpus_free_on_used_nodes: int = 0
    stranded_gpus: int = 0
    cpu_cores_on_used_nodes: int = 0
    cpu_cores_free_on_used_nodes: float = 0.0
    stranded_cpu_cores: float = 0.0
    rdma_nics_on_used_nodes: int = 0
    oversubscribed_nics: int = 0
    nic_excess_pct_points: int = 0
    max_nic_load_pct: int = 0
    instances_on_oversubscribed_nics: int = 0
    unplaced_examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The figures as a JSON-ready dict."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class PackingResult:
    """One policy over the whole demand: figures per role."""

    policy: NicPolicy
    time_s: float
    roles: tuple[RoleFigures, ...]

    def total(self, figure: str) -> float:
        """A figure summed over roles."""
        return float(sum(getattr(role, figure) for role in self.roles))


@dataclass
class _Pool:
    """One role's pool of nodes under one policy, and what the sim tracks beside the core."""

    snapshot: ClusterSnapshot
    nic_load_pct: IntArray
    """Real RDMA share on each NIC slot (may exceed 100 under a NIC-blind policy)."""
    nic_pods: IntArray
    pool_free_pct: IntArray
    """`node-rdma-pool`: free percent of each node's node-level bandwidth count."""
    used: BoolArray
    app_counts: dict[str, IntArray] = field(default_factory=dict)


def _scheduling_share(policy: NicPolicy, instance: DlrmInstance) -> int:
    """The `rdma_percent` the core is told: the real share, a whole NIC, or none."""
    if policy == "joint":
        return instance.rdma_percent
    if policy == "node-nic-count":
        return NIC_PERCENT if instance.rdma_percent else 0
    return 0


def _assign_nic_afterwards(pool: _Pool, node: int, gpus: Sequence[int], share: int) -> int | None:
    """The NIC a NIC-blind placement's worker would use, with hindsight (see module doc)."""
    snapshot = pool.snapshot
    layout = snapshot.layouts[node]
    if share == 0 or layout is None:
        return None
    slots = [s for s, nic in enumerate(layout.nics) if nic.is_rdma]
    if not slots:
        return None

    def near(slot: int) -> NicDistance:
        return set_distance(layout, gpus, slot) if gpus else NicDistance.SAME_HOST

    load = pool.nic_load_pct[node]
    roomy = [s for s in slots if load[s] + share <= NIC_PERCENT]
    if roomy:
        return min(roomy, key=lambda s: (near(s), NIC_PERCENT - load[s] - share, s))
    return min(slots, key=lambda s: (near(s), load[s], s))


def _pool_for(shapes: Sequence[NodeShape], instances: int) -> _Pool:
    nodes: list[Node] = []
    for shape in shapes:
        count = shape.max_nodes if shape.max_nodes is not None else max(instances, 1)
        nodes.extend(shape.node(i) for i in range(count))
    snapshot = ClusterSnapshot.from_nodes(nodes)
    pool_pct = (snapshot.nic_present & snapshot.nic_rdma).sum(axis=1).astype(np.int64)
    return _Pool(
        snapshot=snapshot,
        nic_load_pct=np.zeros_like(snapshot.nic_free_pct),
        nic_pods=np.zeros_like(snapshot.nic_free_pct),
        pool_free_pct=pool_pct * NIC_PERCENT,
        used=np.zeros(snapshot.node_count, dtype=np.bool_),
    )


def pack_role(
    role: Role,
    demand: Sequence[DlrmInstance],
    shapes: Sequence[NodeShape],
    policy: NicPolicy,
    strategy: str = "best-fit",
    seed: int = 0,
) -> RoleFigures:
    """Place one role's instances on a pool of that role's node shapes under `policy`."""
    figures = RoleFigures(role=role, instances=len(demand))
    if not demand:
        return figures
    if not shapes:
        raise TraceFormatError(
            f"the node shapes have no shape with role {role}, which {len(demand)} instances need"
        )
    pool = _pool_for(shapes, len(demand))
    snapshot = pool.snapshot
    scheduler = Scheduler(
        strategy=make_strategy(strategy), tie_break_rank=np.arange(snapshot.node_count)
    )
    rng = np.random.default_rng(seed)
    everywhere = np.ones(snapshot.node_count, dtype=np.bool_)
    for instance in demand:
        counts = pool.app_counts.setdefault(
            instance.app, np.zeros(snapshot.node_count, dtype=np.int64)
        )
        allowed = everywhere if instance.max_per_node is None else counts < instance.max_per_node
        if policy == "node-rdma-pool" and instance.rdma_percent:
            allowed = allowed & (pool.pool_free_pct >= instance.rdma_percent)
        pod = instance.pod(_scheduling_share(policy, instance))
        decision = scheduler.schedule_pod(snapshot, pod, rng, allowed=allowed)
        if not decision.placed:
            if len(figures.unplaced_examples) < 5:
                figures.unplaced_examples.append(decision.reason)
            continue
        figures.placed += 1
        placement = decision.placements[0]
        node = snapshot.node_index(placement.node)
        counts[node] += 1
        pool.used[node] = True
        layout = snapshot.layouts[node]
        if placement.nics and layout is not None:
            names = [nic.name for nic in layout.nics]
            nic: int | None = names.index(placement.nics[0])
        else:
            nic = _assign_nic_afterwards(pool, node, placement.gpu_indices, instance.rdma_percent)
        if policy == "node-rdma-pool":
            pool.pool_free_pct[node] -= instance.rdma_percent
        if nic is not None and instance.rdma_percent:
            pool.nic_load_pct[node, nic] += instance.rdma_percent
            pool.nic_pods[node, nic] += 1
    _measure(figures, pool, demand, policy)
    return figures


def _shapes_of(demand: Sequence[DlrmInstance]) -> list[tuple[int, int, int, int]]:
    """Distinct (CPU milli, memory MiB, GPUs, RDMA percent) requests of the demand."""
    return sorted({(i.cpu_milli, i.memory_mib, i.num_gpu, i.rdma_percent) for i in demand})


def _copies_that_fit(
    pool: _Pool, policy: NicPolicy, request: tuple[int, int, int, int]
) -> IntArray:
    """Per node: how many more copies of `request` the node admits under `policy`'s rules."""
    snapshot = pool.snapshot
    cpu, memory, gpus, rdma = request
    big = np.iinfo(np.int64).max // 4
    limits = [np.full(snapshot.node_count, big, dtype=np.int64)]
    if cpu:
        limits.append(snapshot.cpu_free_milli // cpu)
    if memory:
        limits.append(snapshot.memory_free_mib // memory)
    if gpus:
        idle = (snapshot.gpu_present & (snapshot.gpu_free_milli == MILLI_PER_GPU)).sum(axis=1)
        limits.append(idle // gpus)
    share = NIC_PERCENT if policy == "node-nic-count" and rdma else rdma
    if share and policy in ("joint", "node-nic-count"):
        usable = snapshot.nic_present & snapshot.nic_rdma
        limits.append(np.where(usable, snapshot.nic_free_pct // share, 0).sum(axis=1))
    if share and policy == "node-rdma-pool":
        limits.append(pool.pool_free_pct // share)
    copies: IntArray = np.minimum.reduce(limits)
    return copies


def _measure(
    figures: RoleFigures, pool: _Pool, demand: Sequence[DlrmInstance], policy: NicPolicy
) -> None:
    snapshot = pool.snapshot
    used = pool.used
    free_gpus = (snapshot.gpu_present & (snapshot.gpu_free_milli == MILLI_PER_GPU)).sum(axis=1)
    free_cpu = snapshot.cpu_free_milli
    usable_gpus = np.zeros(snapshot.node_count, dtype=np.int64)
    usable_cpu = np.zeros(snapshot.node_count, dtype=np.int64)
    for request in _shapes_of(demand):
        copies = _copies_that_fit(pool, policy, request)
        cpu, _, gpus, _ = request
        if gpus:
            usable_gpus = np.maximum(usable_gpus, np.minimum(free_gpus, copies * gpus))
        usable_cpu = np.maximum(usable_cpu, np.minimum(free_cpu, copies * cpu))
    figures.nodes_used = int(used.sum())
    figures.gpus_on_used_nodes = int(snapshot.gpu_count[used].sum())
    figures.gpus_free_on_used_nodes = int(free_gpus[used].sum())
    figures.stranded_gpus = int((free_gpus - usable_gpus)[used].sum())
    figures.cpu_cores_on_used_nodes = int(snapshot.cpu_capacity_milli[used].sum()) // 1000
    figures.cpu_cores_free_on_used_nodes = float(free_cpu[used].sum()) / MILLI_PER_CORE
    figures.stranded_cpu_cores = float((free_cpu - usable_cpu)[used].sum()) / MILLI_PER_CORE
    rdma_nics = snapshot.nic_present & snapshot.nic_rdma
    figures.rdma_nics_on_used_nodes = int(rdma_nics[used].sum())
    over = pool.nic_load_pct > NIC_PERCENT
    figures.oversubscribed_nics = int(over.sum())
    figures.nic_excess_pct_points = int((pool.nic_load_pct - NIC_PERCENT)[over].sum())
    figures.max_nic_load_pct = int(pool.nic_load_pct.max(initial=0))
    figures.instances_on_oversubscribed_nics = int(pool.nic_pods[over].sum())


def run_nic_packing(
    instances: Sequence[DlrmInstance],
    shapes: Sequence[NodeShape],
    policy: NicPolicy,
    time_s: float | None = None,
    strategy: str = "best-fit",
    seed: int = 0,
) -> PackingResult:
    """Pack the demand alive at `time_s` (default: `peak_time`) under `policy`, role by role."""
    at = peak_time(instances) if time_s is None else time_s
    demand = demand_at(instances, at)
    roles = tuple(
        pack_role(
            role,
            [i for i in demand if i.role == role],
            [s for s in shapes if s.role == role],
            policy,
            strategy,
            seed,
        )
        for role in ROLES
    )
    return PackingResult(policy=policy, time_s=at, roles=roles)
