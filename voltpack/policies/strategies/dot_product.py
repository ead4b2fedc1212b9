"""Dot-product: align the pod's request with what the node has left (Tetris-style)."""

from __future__ import annotations

import numpy as np

from voltpack.model.snapshot import ClusterSnapshot, IntArray
from voltpack.model.workload import Pod
from voltpack.policies.strategy import MAX_NODE_SCORE, ScoringStrategy, truncate_scores


class DotProductStrategy(ScoringStrategy):
    """Dot-product picks the node whose free CPU and GPU have the smallest dot product with
    the pod's request."""

    name = "dot-product"
    summary = (
        "Dot-product picks the node whose free (CPU, GPU) vector has the smallest dot product "
        "with the pod's request vector, both normalised by the largest node."
    )

    def score(
        self, snapshot: ClusterSnapshot, pod: Pod, candidates: IntArray, rng: np.random.Generator
    ) -> IntArray:
        """100 x (1 - dot / 2), truncated; a smaller dot product scores higher."""
        cpu_scale = max(snapshot.max_node_cpu_milli, 1)
        gpu_scale = max(snapshot.max_node_gpu_milli, 1)
        free_cpu = snapshot.cpu_free_milli[candidates] / cpu_scale
        free_gpu = snapshot.gpu_free_milli[candidates].sum(axis=1) / gpu_scale
        dot = free_cpu * (pod.cpu_milli / cpu_scale) + free_gpu * (
            pod.gpu_request_milli / gpu_scale
        )
        return truncate_scores(MAX_NODE_SCORE * (1 - dot / 2))
