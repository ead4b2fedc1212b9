"""Least-allocated: spread pods over the emptiest nodes (kube-scheduler's default)."""

from __future__ import annotations

import numpy as np

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.snapshot import ClusterSnapshot, FloatArray, IntArray
from voltpack.model.workload import Pod
from voltpack.policies.strategy import MAX_NODE_SCORE, ScoringStrategy, truncate_scores


class LeastAllocatedStrategy(ScoringStrategy):
    """Least-allocated picks the node with the largest free share of CPU, memory and GPU."""

    name = "least-allocated"
    summary = (
        "Least-allocated (spread) picks the node with the largest mean free share of CPU, "
        "memory and GPU after placement, as kube-scheduler's default scoring does."
    )

    def score(
        self, snapshot: ClusterSnapshot, pod: Pod, candidates: IntArray, rng: np.random.Generator
    ) -> IntArray:
        """100 x mean of (free - request) / capacity over CPU, memory and (if any) GPU."""
        return truncate_scores(free_share_after(snapshot, pod, candidates) * MAX_NODE_SCORE)


def free_share_after(snapshot: ClusterSnapshot, pod: Pod, candidates: IntArray) -> FloatArray:
    """Mean free share of CPU, memory and (on GPU nodes) GPU of each candidate after placement."""
    cpu = (snapshot.cpu_free_milli[candidates] - pod.cpu_milli) / np.maximum(
        snapshot.cpu_capacity_milli[candidates], 1
    )
    memory = (snapshot.memory_free_mib[candidates] - pod.memory_mib) / np.maximum(
        snapshot.memory_capacity_mib[candidates], 1
    )
    gpu_capacity = snapshot.gpu_count[candidates] * MILLI_PER_GPU
    gpu_free = snapshot.gpu_free_milli[candidates].sum(axis=1) - pod.gpu_request_milli
    has_gpu = gpu_capacity > 0
    gpu = np.where(has_gpu, gpu_free / np.maximum(gpu_capacity, 1), 0.0)
    share: FloatArray = (cpu + memory + gpu) / (2 + has_gpu)
    return share
