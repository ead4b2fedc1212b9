"""Gang placement as one unit into a topology domain (the mechanism).

The policy (`voltpack.policies.topology`) chooses how many pods go to which node; this module
does the rest, the same for every policy: it counts per node how many of the gang's pods fit
(slots, in units of a tensor-parallel group when the policy keeps groups whole), builds the
domain tree, asks the policy, gives each pod GPUs inside its node (tensor-parallel groups on one
NVLink domain), hands out ranks in the policy's order, and allocates all of it in one statement
that is committed whole or not at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.decision import Decision, Placement
from voltpack.model.domain_tree import DomainTree, NodeCounts
from voltpack.model.errors import VoltpackError
from voltpack.model.snapshot import ClusterSnapshot, IntArray
from voltpack.model.topology import ClusterTopology, FloatArray
from voltpack.model.workload import Pod, PodGroup
from voltpack.perf.links import PerfModelError
from voltpack.policies.topology.gpu_choice import choose_gpus
from voltpack.scheduler.filter import explain_rejection, filter_nodes
from voltpack.scheduler.mixed_gang import is_mixed, place_mixed_gang
from voltpack.scheduler.nic_allocation import nic_slot_for
from voltpack.scheduler.statement import Statement


class GangStepModel(Protocol):
    """Predicted step time of one gang on a concrete placement, and on the ideal one."""

    def step_s(self, rank_nodes: IntArray, rank_gpus: IntArray) -> float:
        """Seconds per step with rank r on node `rank_nodes[r]`, GPU `rank_gpus[r]`."""
        ...

    def score_s(self, rank_nodes: IntArray, rank_gpus: IntArray) -> float:
        """What the placement minimises: the step time, plus any cost to others (e.g. the
        slowdown a placement inflicts on running gangs), in seconds per step."""
        ...

    def commit(self, rank_nodes: IntArray, rank_gpus: IntArray) -> None:
        """The gang was placed there (a model that tracks running gangs records it)."""
        ...

    def link_busy(self) -> tuple[FloatArray, ...] | None:
        """How busy each domain's uplink (per level) and each node's NICs are with running
        gangs' traffic, as a share of capacity; None when the model does not know."""
        ...

    def ideal_s(self) -> float:
        """Seconds per step on the best placement the topology could give."""
        ...


class TopologyPlacer(Protocol):
    """A placement policy: pods (or units) per node, or the reason nothing fits."""

    @property
    def name(self) -> str:
        """The policy's name, as a policy file spells it."""
        ...

    @property
    def keeps_groups_whole(self) -> bool:
        """True when its tree counts tensor-parallel groups rather than pods."""
        ...

    def choose(
        self,
        tree: DomainTree,
        units: int,
        required_level: int | None,
        preferred_level: int | None,
        step_time_of: Callable[[NodeCounts], float] | None,
    ) -> NodeCounts | str:
        """Where the gang goes, in the tree's units, or why it cannot go anywhere."""
        ...


@dataclass(frozen=True)
class GangOutcome:
    """A gang's decision, with the predicted and ideal step time of its placement."""

    decision: Decision
    step_s: float | None = None
    ideal_s: float | None = None
    rank_nodes: tuple[int, ...] = ()


@dataclass
class TopologyPlacement:
    """What a scheduler needs to place gangs that carry a topology request.

    `topology` may list the nodes in another order than the snapshot (it is aligned to the
    snapshot's order once per snapshot); `step_model_for` gives a gang's step-time model, or
    None when the gang names no training model.
    """

    topology: ClusterTopology
    placer: TopologyPlacer
    step_model_for: (
        Callable[[ClusterTopology, ClusterSnapshot, PodGroup], GangStepModel | None] | None
    ) = None

    def place(self, snapshot: ClusterSnapshot, group: PodGroup) -> GangOutcome:
        """Place the gang by its request, or leave it pending with the reason (a level the
        topology lacks, an unknown model, no room)."""
        request = group.topology
        try:
            topology = self.topology.aligned_to(snapshot.node_names)
            self.topology = topology
            required = preferred = None
            if request is not None and request.required_level:
                required = topology.level_index(request.required_level)
            if request is not None and request.preferred_level:
                preferred = topology.level_index(request.preferred_level)
            step_model = (
                self.step_model_for(topology, snapshot, group)
                if self.step_model_for is not None
                else None
            )
        except VoltpackError as exc:
            return _refused(group, str(exc))
        if required is not None and is_mixed(group):  # e.g. split inference pools
            return GangOutcome(place_mixed_gang(snapshot, topology, group, required))
        try:
            return place_gang(
                snapshot,
                topology,
                group,
                self.placer,
                tensor_parallel=request.tensor_parallel if request is not None else 1,
                required_level=required,
                preferred_level=preferred,
                step_model=step_model,
            )
        except PerfModelError as exc:  # e.g. a GPU whose specs are not published: the gang
            # waits with the reason, and the cycle goes on with the others
            return _refused(group, f"its step time cannot be predicted: {exc}")


def gang_shape(group: PodGroup) -> tuple[Pod, int] | str:
    """The gang's common pod shape and size, or why it has none (pods differ, GPU shares)."""
    first = group.pods[0]
    shape = first.model_copy(update={"name": "", "creation_time_s": 0.0})
    for pod in group.pods[1:]:
        if pod.model_copy(update={"name": "", "creation_time_s": 0.0}) != shape:
            return f"pods {first.name} and {pod.name} ask for different resources"
    if first.num_gpu == 0 or first.is_gpu_sharing:
        return "topology placement needs pods that ask for whole GPUs"
    return first, len(group.pods)


def node_slots(snapshot: ClusterSnapshot, pod: Pod) -> IntArray:
    """Per node, how many more pods of this shape fit (whole GPUs, CPU, memory, filters)."""
    feasible = filter_nodes(snapshot, pod).feasible
    whole_free = (snapshot.gpu_present & (snapshot.gpu_free_milli >= MILLI_PER_GPU)).sum(axis=1)
    slots = whole_free // pod.num_gpu
    if pod.cpu_milli:
        slots = np.minimum(slots, snapshot.cpu_free_milli // pod.cpu_milli)
    if pod.memory_mib:
        slots = np.minimum(slots, snapshot.memory_free_mib // pod.memory_mib)
    if pod.rdma_percent:
        shares = np.where(snapshot.nic_present & snapshot.nic_rdma, snapshot.nic_free_pct, 0)
        slots = np.minimum(slots, (shares // pod.rdma_percent).sum(axis=1))
    return np.where(feasible, slots, 0).astype(np.int64)


def unit_pods_for(pod: Pod, tensor_parallel: int) -> int:
    """Pods in one tensor-parallel group (1 when a pod holds a whole group or more)."""
    if tensor_parallel <= pod.num_gpu or tensor_parallel % pod.num_gpu:
        return 1
    return tensor_parallel // pod.num_gpu


def place_gang(
    snapshot: ClusterSnapshot,
    topology: ClusterTopology,
    group: PodGroup,
    placer: TopologyPlacer,
    *,
    tensor_parallel: int = 1,
    required_level: int | None = None,
    preferred_level: int | None = None,
    step_model: GangStepModel | None = None,
) -> GangOutcome:
    """Place the whole gang (all its pods) with `placer`, or nothing, with the reason."""
    shape = gang_shape(group)
    if isinstance(shape, str):
        return _refused(group, shape)
    pod, pods = shape
    slots = node_slots(snapshot, pod)
    if int(slots.sum()) < pods:
        feasible = filter_nodes(snapshot, pod)
        why = (
            explain_rejection(snapshot, pod, feasible)
            if feasible.feasible_count == 0
            else f"{int(slots.sum())} pods of its shape fit in the cluster"
        )
        return _refused(group, f"needs {pods} pods of {pod.num_gpu} GPUs; {why}")
    unit = unit_pods_for(pod, tensor_parallel) if placer.keeps_groups_whole else 1
    if pods % unit:
        unit = 1
    free_gpus = (snapshot.gpu_present & (snapshot.gpu_free_milli >= MILLI_PER_GPU)).sum(axis=1)
    tree = DomainTree.build(
        topology,
        slots // unit,
        free_gpus,
        snapshot.gpu_count,
        gpus_per_unit=pod.num_gpu * unit,
        link_busy=step_model.link_busy() if step_model is not None else None,
    )

    def ranks_of(counts: NodeCounts) -> tuple[IntArray, IntArray, list[tuple[int, ...]]]:
        return _rank_gpus(snapshot, topology, counts, pod, unit)

    step_time_of = None
    if step_model is not None:
        model = step_model

        def step_time_of(counts: NodeCounts) -> float:
            in_pods = NodeCounts(counts.nodes, tuple(n * unit for n in counts.pods))
            nodes, gpus, _ = ranks_of(in_pods)
            return model.score_s(nodes, gpus)

    choice = placer.choose(tree, pods // unit, required_level, preferred_level, step_time_of)
    if isinstance(choice, str):
        return _refused(group, f"{placer.name}: {choice}")
    counts = NodeCounts(choice.nodes, tuple(n * unit for n in choice.pods), choice.note)
    rank_nodes, rank_gpus, pod_gpus = ranks_of(counts)
    statement = Statement(snapshot)
    placements: list[Placement] = []
    pod_nodes = np.repeat(np.array(counts.nodes, dtype=np.int64), counts.pods)
    for member, node, gpus in zip(group.pods, pod_nodes.tolist(), pod_gpus, strict=True):
        nics = nic_slot_for(snapshot, node, member, gpus)
        placements.append(statement.place(node, member, gpus, nics))
    statement.commit()
    step_s = step_model.step_s(rank_nodes, rank_gpus) if step_model is not None else None
    ideal_s = step_model.ideal_s() if step_model is not None else None
    if step_model is not None:
        step_model.commit(rank_nodes, rank_gpus)
    reason = _reason(group, topology, counts, unit, placer.name, step_s, ideal_s)
    decision = Decision(
        subject=group.name,
        placed=True,
        placements=tuple(placements),
        reason=reason,
        predicted_step_s=step_s,
        ideal_step_s=ideal_s,
    )
    return GangOutcome(decision, step_s, ideal_s, tuple(pod_nodes.tolist()))


def _rank_gpus(
    snapshot: ClusterSnapshot,
    topology: ClusterTopology,
    counts: NodeCounts,
    pod: Pod,
    unit: int,
) -> tuple[IntArray, IntArray, list[tuple[int, ...]]]:
    rank_nodes: list[int] = []
    rank_gpus: list[int] = []
    pod_gpus: list[tuple[int, ...]] = []
    for node, pods in zip(counts.nodes, counts.pods, strict=True):
        count = int(snapshot.gpu_count[node])
        free = (snapshot.gpu_free_milli[node, :count] >= MILLI_PER_GPU).tolist()
        chosen = choose_gpus(topology.hosts[node], free, pods, pod.num_gpu, unit)
        for gpus in chosen:
            pod_gpus.append(gpus)
            rank_nodes.extend([node] * len(gpus))
            rank_gpus.extend(gpus)
    return (
        np.array(rank_nodes, dtype=np.int64),
        np.array(rank_gpus, dtype=np.int64),
        pod_gpus,
    )


def _reason(
    group: PodGroup,
    topology: ClusterTopology,
    counts: NodeCounts,
    unit: int,
    placer: str,
    step_s: float | None,
    ideal_s: float | None,
) -> str:
    nodes = np.array(counts.nodes, dtype=np.int64)
    where = f"on node {topology.node_names[int(nodes[0])]}"
    if nodes.size > 1:
        common = int(topology.common_level(nodes, np.full(nodes.size, nodes[0])).min())
        if common < 0:
            where = f"across {nodes.size} nodes with no shared level"
        else:
            level = topology.levels[common]
            domain = topology.domain_label(common, int(topology.domain[common, nodes[0]]))
            where = f"in {level.display_name} {domain} ({nodes.size} nodes)"
    text = f"gang {group.name}: {counts.total} pods {where}"
    if unit > 1:
        text += ", TP groups on NVLink domains"
    if step_s is not None and ideal_s is not None:
        text += (
            f", predicted step {step_s:.3g} s, ideal {ideal_s:.3g} s "
            f"(+{100.0 * (step_s / ideal_s - 1.0):.1f}%)"
        )
    text += f" [{placer}]"
    if counts.note:
        text += f"; {counts.note}"
    return text


def _refused(group: PodGroup, why: str) -> GangOutcome:
    return GangOutcome(
        Decision(subject=group.name, placed=False, reason=f"gang {group.name}: {why}")
    )
