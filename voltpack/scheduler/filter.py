"""Filter: which nodes can hold a pod (CPU, memory, GPU model, GPU count and share, RDMA NIC
bandwidth)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from voltpack.model.row_cache import derived_rows
from voltpack.model.snapshot import BoolArray, ClusterSnapshot, IntArray
from voltpack.model.workload import Pod

FILTER_NAMES = ("gpu-model", "devices", "cpu", "memory", "gpu", "nic", "power")


@dataclass(frozen=True)
class FilterResult:
    """Feasible nodes, and for the others the first filter each one failed."""

    feasible: BoolArray
    rejected_by: dict[str, int]

    @property
    def feasible_count(self) -> int:
        """Number of nodes that pass every filter."""
        return int(self.feasible.sum())


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


def filter_nodes(snapshot: ClusterSnapshot, pod: Pod) -> FilterResult:
    """Apply every filter to every node at once."""
    checks: list[tuple[str, BoolArray]] = [
        ("gpu-model", gpu_model_mask(snapshot, pod)),
    ]
    if pod.nodes is not None:
        checks.append(("devices", allowed_nodes_mask(snapshot, pod)))
    checks += [
        ("cpu", snapshot.cpu_free_milli >= pod.cpu_milli),
        ("memory", snapshot.memory_free_mib >= pod.memory_mib),
    ]
    if pod.num_gpu > 0:
        checks.append(("gpu", fitting_gpu_count(snapshot, pod.gpu_milli) >= pod.num_gpu))
    if pod.rdma_percent > 0:
        # Any GPUs of the node can use any of its NICs (at worst across the host), so a node
        # fits when it has the GPUs and, independently, one RDMA NIC with room.
        nic_ok = np.asarray(nics_fitting(snapshot, pod).any(axis=1), dtype=np.bool_)
        checks.append(("nic", nic_ok))
    if pod.num_gpu > 0 and snapshot.power is not None:
        checks.append(("power", snapshot.power.fits(pod)))
    feasible = np.ones(snapshot.node_count, dtype=np.bool_)
    rejected_by: dict[str, int] = {}
    for name, passed in checks:
        newly_rejected = feasible & ~passed
        rejected_by[name] = int(newly_rejected.sum())
        feasible &= passed
    return FilterResult(feasible=feasible, rejected_by=rejected_by)


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


_REJECTION_WORDS = {
    "gpu-model": "have another GPU model",
    "devices": "cannot allocate its ResourceClaims' devices",
    "cpu": "lack CPU",
    "memory": "lack memory",
    "gpu": "lack free GPUs",
    "nic": "lack an RDMA NIC with the requested bandwidth free",
    "power": "would push a power domain's predicted peak over its budget",
}


def explain_rejection(snapshot: ClusterSnapshot, pod: Pod, result: FilterResult) -> str:
    """A one-line reason why no node fits, e.g. '0/1213 nodes fit (...): 700 lack CPU'."""
    words = dict(_REJECTION_WORDS)
    words["nic"] = f"lack an RDMA NIC with {pod.rdma_percent}% of its bandwidth free"
    words["excluded"] = "are excluded by a placement constraint (e.g. an instances-per-node limit)"
    counts = [f"{count} {words[name]}" for name, count in result.rejected_by.items() if count]
    detail = "; ".join(counts) if counts else "the cluster has no nodes"
    return f"0/{snapshot.node_count} nodes fit pod {pod.name} ({describe_request(pod)}): {detail}"
