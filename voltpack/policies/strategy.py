"""The scoring-strategy interface: how a policy ranks feasible nodes and picks GPUs on one."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.snapshot import ClusterSnapshot, FloatArray, IntArray
from voltpack.model.workload import Pod


class ScoringStrategy(ABC):
    """A named policy that scores feasible nodes (higher is better) and chooses GPUs on a node.

    The mechanism calls `score` once per pod with the indices of the feasible nodes, keeps the
    best-scoring node (ties broken by the seeded random generator), then calls `pick_gpus`.
    """

    name: ClassVar[str]
    summary: ClassVar[str]

    @abstractmethod
    def score(
        self,
        snapshot: ClusterSnapshot,
        pod: Pod,
        candidates: IntArray,
        rng: np.random.Generator,
    ) -> FloatArray:
        """Score of each candidate node, aligned with `candidates`; higher is better."""

    def pick_gpus(
        self, snapshot: ClusterSnapshot, node: int, pod: Pod, rng: np.random.Generator
    ) -> tuple[int, ...]:
        """GPUs on `node` for the pod: by default the fullest GPUs that still fit (best fit)."""
        return pick_best_fit_gpus(snapshot, node, pod)


def pick_best_fit_gpus(snapshot: ClusterSnapshot, node: int, pod: Pod) -> tuple[int, ...]:
    """The `num_gpu` GPUs that fit with the least milli-GPU left over, lowest index first."""
    if pod.num_gpu == 0:
        return ()
    free = snapshot.gpu_free_milli[node]
    fits = snapshot.gpu_present[node] & (free >= pod.gpu_milli)
    leftover = np.where(fits, free - pod.gpu_milli, MILLI_PER_GPU + 1)
    order = np.argsort(leftover, kind="stable")
    return tuple(int(i) for i in order[: pod.num_gpu])
