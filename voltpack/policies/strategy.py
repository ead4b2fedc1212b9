"""The scoring-strategy interface: how a policy ranks feasible nodes and picks GPUs on one.

As in kube-scheduler, a score is an integer from 0 to 100 (higher is better); a strategy that
computes a real number truncates it toward zero, so nearly equal nodes tie and the scheduler's
tie-break decides between them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.snapshot import ClusterSnapshot, FloatArray, IntArray
from voltpack.model.workload import Pod

MAX_NODE_SCORE = 100


class NoParams(BaseModel):
    """Parameters of a strategy that takes none."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ScoringStrategy(ABC):
    """A named policy that scores feasible nodes and chooses the GPUs on the chosen node.

    The mechanism calls `score` with the indices of the feasible nodes (when there are at least
    two), keeps the best-scoring node, then calls `pick_gpus` on it. A strategy's parameters
    come from the policy file (`spec.scoring.params`), validated by its `Params` model.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, params: BaseModel | None = None) -> None:
        self.params = params if params is not None else self.Params()

    def prime(self, pods: Sequence[Pod]) -> None:
        """Learn from a workload known in advance (the trace, in simulation). Default: ignore."""
        del pods

    def observe_arrival(self, pod: Pod) -> None:
        """Learn from a pod as it arrives, before it is scheduled. Default: ignore."""
        del pod

    @abstractmethod
    def score(
        self,
        snapshot: ClusterSnapshot,
        pod: Pod,
        candidates: IntArray,
        rng: np.random.Generator,
    ) -> IntArray | FloatArray:
        """Score in 0..100 of each candidate node, aligned with `candidates` (higher wins)."""

    def pick_gpus(
        self, snapshot: ClusterSnapshot, node: int, pod: Pod, rng: np.random.Generator
    ) -> tuple[int, ...]:
        """GPUs on `node` for the pod: by default the fullest GPUs that still fit (best fit)."""
        return pick_best_fit_gpus(snapshot, node, pod)


def pick_best_fit_gpus(snapshot: ClusterSnapshot, node: int, pod: Pod) -> tuple[int, ...]:
    """The `num_gpu` GPUs that fit with the least milli-GPU left over, lowest index first.

    For whole-GPU pods this is the first `num_gpu` idle GPUs in index order.
    """
    if pod.num_gpu == 0:
        return ()
    free = snapshot.gpu_free_milli[node]
    fits = snapshot.gpu_present[node] & (free >= pod.gpu_milli)
    leftover = np.where(fits, free - pod.gpu_milli, MILLI_PER_GPU + 1)
    order = np.argsort(leftover, kind="stable")
    return tuple(int(i) for i in order[: pod.num_gpu])


def pick_random_gpus(
    snapshot: ClusterSnapshot, node: int, pod: Pod, rng: np.random.Generator
) -> tuple[int, ...]:
    """`num_gpu` GPUs drawn uniformly among those that fit (idle GPUs for whole-GPU pods)."""
    if pod.num_gpu == 0:
        return ()
    fits = np.flatnonzero(
        snapshot.gpu_present[node] & (snapshot.gpu_free_milli[node] >= pod.gpu_milli)
    )
    if pod.num_gpu == 1:
        return (int(fits[rng.integers(fits.size)]),)
    chosen = rng.choice(fits, size=pod.num_gpu, replace=False)
    return tuple(sorted(int(i) for i in chosen))


def truncate_scores(values: np.ndarray) -> IntArray:
    """Real-valued scores truncated toward zero and clipped to 0..100."""
    scores: IntArray = np.clip(np.trunc(values), 0, MAX_NODE_SCORE).astype(np.int64)
    return scores
