"""Filter: which nodes can hold a pod. kube-scheduler's filters with its semantics when the
snapshot carries the nodes' rules (`scheduler/constraints/`, one module per plugin), voltpack's
own (GPU model, GPU count and share, RDMA NIC bandwidth, ResourceClaim devices, power) always.
Reasons read as kube-scheduler's."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np

from voltpack.model.constraints.node_rules import NodeRules
from voltpack.model.row_cache import derived_rows
from voltpack.model.snapshot import BoolArray, ClusterSnapshot, IntArray
from voltpack.model.workload import Pod
from voltpack.scheduler.constraints import (
    inter_pod_affinity,
    node_affinity,
    node_name,
    node_ports,
    node_resources,
    node_unschedulable,
    pod_topology_spread,
    taint_toleration,
    volume_binding,
)
from voltpack.scheduler.constraints.check import Check


@dataclass
class FilterResult:
    """Feasible nodes, and for the others the reasons of the first stage each one failed
    (counted only when asked: a pod that fits never needs them)."""

    feasible: BoolArray
    stages: list[list[Check]] = field(default_factory=list)
    _rejected_by: dict[str, int] | None = None

    @property
    def feasible_count(self) -> int:
        """Number of nodes that pass every filter."""
        return int(self.feasible.sum())

    @property
    def rejected_by(self) -> dict[str, int]:
        """Reason -> nodes that failed with it (several per node from one stage's checks)."""
        if self._rejected_by is None:
            self._rejected_by = _first_failures(self.feasible.size, self.stages)
        return self._rejected_by

    def excluding(self, allowed: BoolArray) -> FilterResult:
        """This result with the nodes outside `allowed` excluded as a last stage."""
        return FilterResult(
            feasible=self.feasible & allowed,
            stages=[*self.stages, [Check(EXCLUDED_REASON, allowed)]],
        )


def gpu_model_mask(snapshot: ClusterSnapshot, pod: Pod) -> BoolArray:
    """Nodes whose GPU model the pod accepts (every node when the pod accepts any model)."""
    if not pod.gpu_models or pod.num_gpu == 0:
        return np.ones(snapshot.node_count, dtype=np.bool_)
    allowed = {m.casefold() for m in pod.gpu_models}
    model_ok = np.array(
        [m.casefold() in allowed for m in snapshot.gpu_models] + [False], dtype=np.bool_
    )
    # NO_GPU_MODEL (-1) indexes the trailing False.
    return model_ok[snapshot.node_gpu_model]


def allowed_nodes_mask(snapshot: ClusterSnapshot, pod: Pod) -> BoolArray:
    """Nodes the pod may run on (`pod.nodes`; every node when it names none)."""
    if pod.nodes is None:
        return np.ones(snapshot.node_count, dtype=np.bool_)
    return np.fromiter(
        (name in pod.nodes for name in snapshot.node_names),
        dtype=np.bool_,
        count=snapshot.node_count,
    )


def gpus_fitting(snapshot: ClusterSnapshot, pod: Pod) -> BoolArray:
    """Per node and GPU slot: the GPU has at least the pod's per-GPU share free."""
    return snapshot.gpu_present & (snapshot.gpu_free_milli >= pod.gpu_milli)


def fitting_gpu_count(snapshot: ClusterSnapshot, gpu_milli: int) -> IntArray:
    """Per node, its GPUs with at least `gpu_milli` free (kept on the snapshot between
    decisions, recomputed for the nodes that changed)."""
    counts: IntArray = derived_rows(
        snapshot, ("fitting_gpu_count", gpu_milli), partial(_fitting_gpu_count, gpu_milli=gpu_milli)
    )
    return counts


def _fitting_gpu_count(snapshot: ClusterSnapshot, rows: IntArray, gpu_milli: int) -> IntArray:
    fits = snapshot.gpu_present[rows] & (snapshot.gpu_free_milli[rows] >= gpu_milli)
    counts: IntArray = fits.sum(axis=1)
    return counts


def nics_fitting(snapshot: ClusterSnapshot, pod: Pod) -> BoolArray:
    """Per node and NIC slot: an RDMA NIC with at least the pod's `rdma_percent` free."""
    return snapshot.nic_present & snapshot.nic_rdma & (snapshot.nic_free_pct >= pod.rdma_percent)


def kube_filter_stages(
    snapshot: ClusterSnapshot, rules: NodeRules, pod: Pod
) -> tuple[list[list[Check]], list[list[Check]]]:
    """kube-scheduler's filters in its order, each a stage of checks: those that choose nodes
    (PreFilter's narrowing first, then cordons, node name, taints, node affinity) and those that
    count what is in use (ports, resources, volumes, spread, pod affinity)."""
    selecting: list[list[Check]] = []
    prefilter = node_affinity.prefilter(rules, pod)
    if prefilter is not None:
        selecting.append([prefilter])
    selecting += [
        node_unschedulable.checks(rules, pod),
        node_name.checks(rules, pod),
        taint_toleration.checks(rules, pod),
        node_affinity.checks(rules, pod),
    ]
    counting = [
        node_ports.checks(rules, pod),
        node_resources.checks(snapshot, rules, pod),
        volume_binding.checks(rules, pod),
        pod_topology_spread.checks(rules, pod),
        inter_pod_affinity.checks(rules, pod),
    ]
    return selecting, counting


def gpu_selection_stages(snapshot: ClusterSnapshot, pod: Pod) -> list[list[Check]]:
    """voltpack's filters that choose nodes: the GPU model, the ResourceClaims' devices."""
    stages: list[list[Check]] = []
    if pod.gpu_models and pod.num_gpu:
        stages.append([Check(GPU_MODEL_REASON, gpu_model_mask(snapshot, pod))])
    if pod.nodes is not None:
        stages.append([Check(DEVICES_REASON, allowed_nodes_mask(snapshot, pod))])
    return stages


def gpu_fit_stages(snapshot: ClusterSnapshot, pod: Pod) -> list[list[Check]]:
    """voltpack's filters that count what is free: GPUs, an RDMA NIC, power."""
    stages: list[list[Check]] = []
    if pod.num_gpu > 0:
        fits = fitting_gpu_count(snapshot, pod.gpu_milli) >= pod.num_gpu
        stages.append([Check(gpu_reason(pod), fits)])
    if pod.rdma_percent > 0:
        # Any GPUs of the node can use any of its NICs (at worst across the host), so a node
        # fits when it has the GPUs and, independently, one RDMA NIC with room.
        nic_ok = np.asarray(nics_fitting(snapshot, pod).any(axis=1), dtype=np.bool_)
        stages.append([Check(nic_reason(pod), nic_ok)])
    if pod.num_gpu > 0 and snapshot.power is not None:
        stages.append([Check(POWER_REASON, snapshot.power.fits(pod))])
    return stages


def filter_nodes(snapshot: ClusterSnapshot, pod: Pod) -> FilterResult:
    """Apply every filter to every node at once: kube-scheduler's (when the snapshot carries
    the nodes' rules) and voltpack's GPU, NIC and power filters. Where the nodes carry no
    rules (the simulators), CPU and memory are the only Kubernetes resources checked."""
    rules = snapshot.rules
    choosing = gpu_selection_stages(snapshot, pod)
    fitting = gpu_fit_stages(snapshot, pod)
    if rules is None:
        resources = [
            [Check(node_resources.insufficient("cpu"), snapshot.cpu_free_milli >= pod.cpu_milli)],
            [
                Check(
                    node_resources.insufficient("memory"),
                    snapshot.memory_free_mib >= pod.memory_mib,
                )
            ],
        ]
        return apply_stages(snapshot.node_count, choosing + resources + fitting)
    selecting, counting = kube_filter_stages(snapshot, rules, pod)
    # voltpack's GPU checks sit beside the resources (after ports and NodeResourcesFit)
    stages = selecting + choosing + counting[:2] + fitting + counting[2:]
    return apply_stages(snapshot.node_count, stages)


def apply_stages(node_count: int, stages: list[list[Check]]) -> FilterResult:
    """Nodes passing every check of every stage."""
    feasible = np.ones(node_count, dtype=np.bool_)
    for stage in stages:
        for check in stage:
            feasible &= check.passed
    return FilterResult(feasible=feasible, stages=stages)


def _first_failures(node_count: int, stages: list[list[Check]]) -> dict[str, int]:
    """Each rejected node counted under the reasons of the first stage it failed (several
    when it failed several checks of that stage), as kube-scheduler counts them."""
    remaining = np.ones(node_count, dtype=np.bool_)
    rejected_by: dict[str, int] = {}
    for stage in stages:
        if not stage:
            continue
        passed = stage[0].passed
        for check in stage[1:]:
            passed = passed & check.passed
        for check in stage:
            failed = int((remaining & ~check.passed).sum())
            if failed:
                rejected_by[check.reason] = rejected_by.get(check.reason, 0) + failed
        remaining = remaining & passed
    return rejected_by


def describe_request(pod: Pod) -> str:
    """The pod's request in words, e.g. '8000m CPU, 30517 MiB, 1 GPU x 810 milli'."""
    parts = [f"{pod.cpu_milli}m CPU", f"{pod.memory_mib} MiB"]
    if pod.is_gpu_sharing:
        parts.append(f"{pod.gpu_milli} milli of 1 GPU")
    elif pod.num_gpu:
        parts.append(f"{pod.num_gpu} whole GPU{'s' if pod.num_gpu > 1 else ''}")
    if pod.gpu_models and pod.num_gpu:
        parts.append("model " + "|".join(pod.gpu_models))
    if pod.rdma_percent:
        parts.append(f"{pod.rdma_percent}% of one RDMA NIC")
    return ", ".join(parts)


GPU_MODEL_REASON = "node(s) didn't have the requested GPU model"
DEVICES_REASON = "node(s) couldn't allocate the devices of the pod's ResourceClaims"
POWER_REASON = "node(s) would push a power domain's predicted peak over its budget"
EXCLUDED_REASON = (
    "node(s) were excluded by a placement constraint (e.g. an instances-per-node limit)"
)


def gpu_reason(pod: Pod) -> str:
    """The reason a node without room for the pod's GPUs fails."""
    if pod.is_gpu_sharing:
        return f"node(s) didn't have a GPU with {pod.gpu_milli} milli-GPU free"
    return f"node(s) didn't have {pod.num_gpu} free GPU(s)"


def nic_reason(pod: Pod) -> str:
    """The reason a node without room on an RDMA NIC fails."""
    return f"node(s) didn't have an RDMA NIC with {pod.rdma_percent}% of its bandwidth free"


def availability_message(node_count: int, rejected_by: dict[str, int]) -> str:
    """kube-scheduler's FitError message: '0/6 nodes are available: 1 node(s) were
    unschedulable, 5 Insufficient cpu.' (counts and reasons sorted as strings, as it sorts)."""
    histogram = sorted(f"{count} {reason}" for reason, count in rejected_by.items() if count)
    message = f"0/{node_count} nodes are available:"
    return message + (f" {', '.join(histogram)}." if histogram else "")


def explain_rejection(snapshot: ClusterSnapshot, pod: Pod, result: FilterResult) -> str:
    """Why no node fits, worded as kube-scheduler words it, then what the pod asks for."""
    message = availability_message(snapshot.node_count, result.rejected_by)
    if snapshot.node_count == 0:
        message += " The cluster has no nodes."
    return f"{message} Pod {pod.name} asks for {describe_request(pod)}."
