"""Best-fit: pack pods onto the nodes they fill most."""

from __future__ import annotations

import numpy as np

from voltpack.model.snapshot import ClusterSnapshot, IntArray
from voltpack.model.workload import Pod
from voltpack.policies.strategy import MAX_NODE_SCORE, ScoringStrategy, truncate_scores


class BestFitStrategy(ScoringStrategy):
    """Best-fit picks the node with the least CPU and GPU left after placement."""

    name = "best-fit"
    summary = (
        "Best-fit picks the node with the least CPU and GPU left after placement "
        "(each normalised by the largest node, weighted equally)."
    )

    def score(
        self, snapshot: ClusterSnapshot, pod: Pod, candidates: IntArray, rng: np.random.Generator
    ) -> IntArray:
        """100 x (1 - (CPU left / max node CPU + GPU left / max node GPU) / 2), truncated."""
        cpu_left = snapshot.cpu_free_milli[candidates] - pod.cpu_milli
        gpu_left = snapshot.gpu_free_milli[candidates].sum(axis=1) - pod.gpu_request_milli
        leftover = cpu_left / max(snapshot.max_node_cpu_milli, 1) * 0.5
        leftover = leftover + gpu_left / max(snapshot.max_node_gpu_milli, 1) * 0.5
        return truncate_scores((1.0 - leftover) * MAX_NODE_SCORE)
