"""The fragmentation gradient: how much a placement changes a node's expected fragmentation.

For a pod and every candidate node (and, for a GPU-sharing pod, every GPU that fits on it), the
change of the node's fragmentation (see `fragmentation`) if the pod were placed there. The
computation is exact: fragmentation is kept in integer milli-GPU x shape-count units, so "no
change" is exactly zero. Results are cached per pod shape and per node, and recomputed only for
nodes whose free resources changed since (within one snapshot: its `row_version` moved; across
snapshots: their free resources differ), so a decision costs little more than the filter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.snapshot import BoolArray, ClusterSnapshot, IntArray
from voltpack.model.workload import Pod
from voltpack.policies.fragmentation import TypicalPods

COUNT_SCALE = 1_000_000
"""Integer weight per unit of frequency when a TypicalPods carries no counts."""


@dataclass
class _ShapeCache:
    cpu_free: IntArray
    gpu_free: IntArray
    valid: BoolArray
    delta: IntArray
    best_gpu: IntArray
    version: IntArray
    """The snapshot's `row_version` of each row when it was last found current."""
    token: int = 0
    """The snapshot `version` counts; another snapshot's rows are compared by value."""


@dataclass(frozen=True)
class Gradient:
    """Per candidate node: the fragmentation change of the best placement there, and its GPU.

    `delta_weighted` is (after - before) in milli-GPU x shape weight; divide by `total_weight`
    for milli-GPU. `best_gpu` is the GPU that gives it (-1 when the pod takes no GPU share).
    """

    delta_weighted: IntArray
    best_gpu: IntArray
    total_weight: int

    def delta_milli(self) -> np.ndarray:
        """Fragmentation change in milli-GPU (positive: more fragmentation)."""
        return self.delta_weighted / self.total_weight


class FragmentationGradient:
    """Fragmentation change per candidate placement, for one cluster and one set of shapes."""

    def __init__(self, typical: TypicalPods, gpu_models: tuple[str, ...]) -> None:
        self.typical = typical
        accepts = typical.model_acceptance(gpu_models)
        counts = typical.counts
        if counts is None:
            counts = np.rint(typical.frequency * COUNT_SCALE).astype(np.int64)
        self._weight = counts.astype(np.int64)
        self._total_weight = max(int(self._weight.sum()), 1)
        self._share = typical.gpu_milli
        self._num = typical.num_gpu
        self._cpu = typical.cpu_milli
        # shape t can use a node of model index i (last column: no GPU model) at all
        self._usable_model = accepts & (typical.gpu_milli > 0)[:, None]
        self._cache: dict[tuple[int, int, int], _ShapeCache] = {}

    def gradient(self, snapshot: ClusterSnapshot, pod: Pod, candidates: IntArray) -> Gradient:
        """Fragmentation change of placing `pod` on each candidate node (best GPU for shares)."""
        key = (pod.cpu_milli, pod.gpu_milli, pod.num_gpu)
        cache = self._cache.get(key)
        if cache is None or cache.gpu_free.shape != snapshot.gpu_free_milli.shape:
            count, width = snapshot.gpu_free_milli.shape
            cache = _ShapeCache(
                cpu_free=np.zeros(count, dtype=np.int64),
                gpu_free=np.zeros((count, width), dtype=np.int64),
                valid=np.zeros(count, dtype=np.bool_),
                delta=np.zeros(count, dtype=np.int64),
                best_gpu=np.full(count, -1, dtype=np.int64),
                version=np.zeros(count, dtype=np.int64),
            )
            self._cache[key] = cache
        if cache.token != snapshot.token:
            # another snapshot (a new cycle, a scratch copy): a row stays current where its
            # free resources are what it was computed from; from here on its changes count
            cache.valid &= (cache.cpu_free == snapshot.cpu_free_milli) & (
                cache.gpu_free == snapshot.gpu_free_milli
            ).all(axis=1)
            cache.version[:] = snapshot.row_version
            cache.token = snapshot.token
        fresh = cache.valid[candidates] & (
            cache.version[candidates] == snapshot.row_version[candidates]
        )
        stale = candidates[~fresh]
        if stale.size:
            delta, best_gpu = self._compute(snapshot, pod, stale)
            cache.delta[stale] = delta
            cache.best_gpu[stale] = best_gpu
            cache.cpu_free[stale] = snapshot.cpu_free_milli[stale]
            cache.gpu_free[stale] = snapshot.gpu_free_milli[stale]
            cache.version[stale] = snapshot.row_version[stale]
            cache.valid[stale] = True
        return Gradient(
            delta_weighted=cache.delta[candidates],
            best_gpu=cache.best_gpu[candidates],
            total_weight=self._total_weight,
        )

    def _compute(
        self, snapshot: ClusterSnapshot, pod: Pod, rows: IntArray
    ) -> tuple[IntArray, IntArray]:
        present = snapshot.gpu_present[rows]
        free = np.where(present, snapshot.gpu_free_milli[rows], 0)  # rows x G
        cpu_left = snapshot.cpu_free_milli[rows]
        model_ok = self._usable_model[:, snapshot.node_gpu_model[rows]].T  # rows x T
        share = self._share[None, None, :]  # 1 x 1 x T
        fits = present[:, :, None] & (free[:, :, None] >= share)  # rows x G x T
        n_fit = fits.sum(axis=1)  # rows x T
        small = np.where(fits, 0, free[:, :, None]).sum(axis=1)  # rows x T
        idle = free.sum(axis=1)  # rows
        before = self._weighted(model_ok, n_fit, small, idle, cpu_left)
        cpu_after = cpu_left - pod.cpu_milli
        if pod.is_gpu_sharing:
            after_free = free - pod.gpu_milli  # rows x G: if the pod took that GPU
            fits_after = after_free[:, :, None] >= share
            n_fit_after = n_fit[:, None, :] - fits + fits_after  # rows x G x T
            small_after = (
                small[:, None, :]
                - np.where(fits, 0, free[:, :, None])
                + np.where(fits_after, 0, after_free[:, :, None])
            )
            idle_after = idle - pod.gpu_milli
            after = self._weighted(
                model_ok[:, None, :],
                n_fit_after,
                small_after,
                idle_after[:, None],
                cpu_after[:, None],
            )  # rows x G
            can_take = present & (free >= pod.gpu_milli)
            after = np.where(can_take, after, np.iinfo(np.int64).max)
            best_gpu = np.argmin(after, axis=1)  # ties: lowest index
            best_after = after[np.arange(rows.size), best_gpu]
            return best_after - before, best_gpu.astype(np.int64)
        # CPU-only or whole GPUs: the first idle GPUs go to zero; they fitted every GPU shape
        # before and fit none after; the GPUs too small for a shape are unchanged.
        taken = pod.num_gpu
        n_fit_after = n_fit - taken
        idle_after = idle - taken * MILLI_PER_GPU
        after = self._weighted(model_ok, n_fit_after, small, idle_after, cpu_after)
        return after - before, np.full(rows.size, -1, dtype=np.int64)

    def _weighted(
        self,
        model_ok: BoolArray,
        n_fit: IntArray,
        small: IntArray,
        idle: IntArray,
        cpu_left: IntArray,
    ) -> IntArray:
        """Sum over shapes of weight x fragmented milli-GPU; shapes are the last axis."""
        usable = model_ok & (n_fit >= self._num) & (cpu_left[..., None] >= self._cpu)
        frag = np.where(usable, small, idle[..., None])
        result: IntArray = frag @ self._weight
        return result
