"""GPU packing: fill partly used GPUs first, then partly used nodes, then idle nodes."""

from __future__ import annotations

import numpy as np

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.snapshot import ClusterSnapshot, IntArray
from voltpack.model.workload import Pod
from voltpack.policies.strategy import ScoringStrategy

IDLE_NODE_BAND = 33
IDLE_GPU_BAND = 50
USED_GPU_BAND = 100


class GpuPackingStrategy(ScoringStrategy):
    """GPU packing prefers partly used GPUs, then idle GPUs on partly used nodes, then idle
    nodes."""

    name = "gpu-packing"
    summary = (
        "GPU packing prefers partly used GPUs, then idle GPUs on partly used nodes, "
        "then wholly idle nodes."
    )

    def score(
        self, snapshot: ClusterSnapshot, pod: Pod, candidates: IntArray, rng: np.random.Generator
    ) -> IntArray:
        """Scores in three bands: 50-100 partly used GPUs, 33-49 idle GPUs, <= 33 idle nodes."""
        if pod.num_gpu == 0:
            return np.zeros(candidates.size, dtype=np.int64)
        free = snapshot.gpu_free_milli[candidates]
        present = snapshot.gpu_present[candidates]
        idle = (present & (free == MILLI_PER_GPU)).sum(axis=1)
        node_idle = idle == snapshot.gpu_count[candidates]
        # The GPUs the pod would take: the `num_gpu` fullest GPUs that still fit.
        fitting = np.where(present & (free >= pod.gpu_milli), free, np.iinfo(np.int64).max)
        taken = np.sort(fitting, axis=1)[:, : pod.num_gpu]
        idle_taken = (taken == MILLI_PER_GPU).sum(axis=1)
        free_pct_sum = ((taken * 100) // MILLI_PER_GPU).sum(axis=1)
        used_gpu_score = np.maximum(USED_GPU_BAND - free_pct_sum // 10, IDLE_GPU_BAND)
        idle_gpu_score = np.maximum(IDLE_GPU_BAND - idle_taken, IDLE_NODE_BAND)
        idle_node_score = np.maximum(IDLE_NODE_BAND - idle, idle)
        partial = np.where(idle_taken > 0, idle_gpu_score, used_gpu_score)
        scores: IntArray = np.where(node_idle, idle_node_score, partial).astype(np.int64)
        return scores
