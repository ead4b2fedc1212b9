"""GPU clustering: gather pods of the same GPU-request kind on the same nodes."""

from __future__ import annotations

import numpy as np

from voltpack.model.snapshot import ClusterSnapshot, IntArray, gpu_pod_kind
from voltpack.model.workload import Pod
from voltpack.policies.strategy import ScoringStrategy

USED_GPU_WEIGHT = 25
SAME_KIND_ONLY_BONUS = 75
SAME_KIND_MIXED_BONUS = 50
EMPTY_NODE_BONUS = 25


class GpuClusteringStrategy(ScoringStrategy):
    """GPU clustering prefers nodes that already run pods of the same GPU-request kind."""

    name = "gpu-clustering"
    summary = (
        "GPU clustering prefers nodes already running pods of the same GPU-request kind "
        "(a GPU share, or k whole GPUs), then nodes running no GPU pods, then fuller nodes."
    )

    def score(
        self, snapshot: ClusterSnapshot, pod: Pod, candidates: IntArray, rng: np.random.Generator
    ) -> IntArray:
        """25 x used GPU fraction of the largest node, plus 75 when the node runs only this
        kind, 50 when it runs this kind among others, 25 when it runs no GPU pods."""
        if pod.num_gpu == 0:
            return np.zeros(candidates.size, dtype=np.int64)
        scale = max(snapshot.max_node_gpu_milli, 1)
        used = scale - snapshot.gpu_free_milli[candidates].sum(axis=1)
        base = (USED_GPU_WEIGHT * used) // scale
        kinds = snapshot.gpu_pod_kinds[candidates]
        kinds_present = (kinds > 0).sum(axis=1)
        same_kind = kinds[:, gpu_pod_kind(pod)] > 0
        bonus = np.where(
            same_kind,
            np.where(kinds_present == 1, SAME_KIND_ONLY_BONUS, SAME_KIND_MIXED_BONUS),
            np.where(kinds_present == 0, EMPTY_NODE_BONUS, 0),
        )
        scores: IntArray = (base + bonus).astype(np.int64)
        return scores
