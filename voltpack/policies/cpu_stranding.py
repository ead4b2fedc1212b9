"""CPU stranding: GPU capacity a node's remaining CPU cannot feed.

A GPU pod brings its CPU request with it, so a node whose free CPU runs low strands its free
GPUs: nobody can use them however well the GPU shares fit. FGD's fragmentation sees this only
when a whole typical pod no longer fits; this measure sees it coming. It is *fluid*: the
workload's typical pods ask, on average, `r` milli-CPU per milli-GPU, and a node with `c` free
milli-CPU can feed at most `c / r` milli-GPU, so

    stranded = max(0, free GPU milli - free CPU milli / r)

Which `r`: the GPU pods' own CPU must sit on the GPU's node; CPU-only pods can go anywhere,
and normally fit in the CPU that GPU pods will not need (the *surplus*). When the CPU that
CPU-only pods are expected to ask while the free GPUs fill up (their CPU per GPU of demand
times the free GPUs) exceeds that surplus, CPU is short in the whole cluster and every free
core will be missed by a GPU somewhere: then `r` counts the CPU of all pods.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voltpack.model.row_cache import derived_rows
from voltpack.model.snapshot import ClusterSnapshot, FloatArray, IntArray
from voltpack.model.workload import Pod
from voltpack.policies.fragmentation import TypicalPods


@dataclass(frozen=True)
class CpuPerGpu:
    """Milli-CPU the typical pods ask per milli-GPU of GPU demand."""

    gpu_pods: float
    """CPU of the GPU pods per GPU milli they request."""
    all_pods: float
    """CPU of all pods (CPU-only pods included) per GPU milli requested."""

    @classmethod
    def of(cls, typical: TypicalPods) -> CpuPerGpu | None:
        """The ratios of a set of typical pods (None when no shape asks for a GPU or CPU)."""
        if len(typical) == 0:
            return None
        gpu = typical.gpu_milli * typical.num_gpu
        is_gpu = gpu > 0
        gpu_demand = float((typical.frequency * gpu).sum())
        gpu_pod_cpu = float((typical.frequency * typical.cpu_milli)[is_gpu].sum())
        if gpu_demand <= 0 or gpu_pod_cpu <= 0:
            return None
        all_cpu = float((typical.frequency * typical.cpu_milli).sum())
        return cls(gpu_pods=gpu_pod_cpu / gpu_demand, all_pods=all_cpu / gpu_demand)

    def for_cluster(self, snapshot: ClusterSnapshot) -> float:
        """`gpu_pods`, or `all_pods` when CPU is short in the whole cluster (see module doc)."""
        if self.all_pods <= self.gpu_pods:
            return self.gpu_pods
        gpu_free = free_gpu_milli(snapshot, np.arange(snapshot.node_count))
        surplus = np.maximum(0.0, snapshot.cpu_free_milli - self.gpu_pods * gpu_free).sum()
        cpu_only_need = (self.all_pods - self.gpu_pods) * float(gpu_free.sum())
        return self.all_pods if cpu_only_need > surplus else self.gpu_pods


def free_gpu_milli(snapshot: ClusterSnapshot, rows: IntArray) -> IntArray:
    """Free milli-GPU of each node at `rows`, summed over its GPUs."""
    total: IntArray = derived_rows(snapshot, "free_gpu_milli", _summed_free_gpu_milli, rows)
    return total


def _summed_free_gpu_milli(snapshot: ClusterSnapshot, rows: IntArray) -> IntArray:
    total: IntArray = np.where(snapshot.gpu_present[rows], snapshot.gpu_free_milli[rows], 0).sum(
        axis=1
    )
    return total


def stranded_gpu_milli(
    gpu_free: np.ndarray, cpu_free: np.ndarray, cpu_per_gpu: float
) -> FloatArray:
    """Free milli-GPU that the free CPU cannot feed at `cpu_per_gpu` milli-CPU per milli-GPU."""
    if cpu_per_gpu <= 0:
        raise ValueError(f"CPU per GPU must be positive, got {cpu_per_gpu}")
    stranded: FloatArray = np.maximum(0.0, gpu_free - cpu_free / cpu_per_gpu)
    return stranded


def stranding_change(
    snapshot: ClusterSnapshot, pod: Pod, candidates: IntArray, cpu_per_gpu: float
) -> FloatArray:
    """Change of each candidate's stranded milli-GPU if `pod` were placed there."""
    gpu_free = free_gpu_milli(snapshot, candidates)
    cpu_free = snapshot.cpu_free_milli[candidates]
    before = stranded_gpu_milli(gpu_free, cpu_free, cpu_per_gpu)
    after = stranded_gpu_milli(
        gpu_free - pod.gpu_request_milli, cpu_free - pod.cpu_milli, cpu_per_gpu
    )
    change: FloatArray = after - before
    return change
