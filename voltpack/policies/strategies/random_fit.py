"""Random: a baseline that ignores packing."""

from __future__ import annotations

import numpy as np

from voltpack.model.snapshot import ClusterSnapshot, IntArray
from voltpack.model.workload import Pod
from voltpack.policies.strategy import MAX_NODE_SCORE, ScoringStrategy, pick_random_gpus


class RandomStrategy(ScoringStrategy):
    """Random picks a feasible node uniformly at random, then a random GPU that fits."""

    name = "random"
    summary = "Random picks a feasible node uniformly at random, then a random GPU that fits."

    def score(
        self, snapshot: ClusterSnapshot, pod: Pod, candidates: IntArray, rng: np.random.Generator
    ) -> IntArray:
        """100 for one candidate drawn uniformly, 0 for the others."""
        scores = np.zeros(candidates.size, dtype=np.int64)
        scores[rng.integers(candidates.size)] = MAX_NODE_SCORE
        return scores

    def pick_gpus(
        self, snapshot: ClusterSnapshot, node: int, pod: Pod, rng: np.random.Generator
    ) -> tuple[int, ...]:
        """A random GPU that fits for a share; for whole GPUs, the first idle ones by index."""
        if pod.is_gpu_sharing:
            return pick_random_gpus(snapshot, node, pod, rng)
        return super().pick_gpus(snapshot, node, pod, rng)
