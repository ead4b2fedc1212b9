"""GPU fragmentation as defined by the FGD paper (ATC'23, "Beware of Fragmentation").

A node's free GPU capacity is a fragment for a pod shape when that shape cannot use it: all of
it when the shape does not fit the node at all (too little CPU, too few GPUs with enough free,
or a GPU model the shape does not accept), and otherwise the free part of each GPU too small for
the shape's per-GPU share. CPU-only shapes cannot use GPUs, so every free GPU is a fragment for
them. A node's fragmentation is the expectation over the *typical pods*: the pod shapes that
make up most of the workload, weighted by how often they occur.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from voltpack.model.snapshot import BoolArray, ClusterSnapshot, FloatArray, IntArray
from voltpack.model.workload import Pod

ShapeKey = tuple[int, int, int, tuple[str, ...]]


@dataclass(frozen=True)
class TypicalPods:
    """Pod shapes (CPU, per-GPU share, GPU count, accepted models) and their frequencies."""

    cpu_milli: IntArray
    gpu_milli: IntArray
    num_gpu: IntArray
    gpu_models: tuple[tuple[str, ...], ...]
    frequency: FloatArray
    counts: IntArray | None = None
    """How many observed pods had each shape (frequency = counts / counts.sum())."""

    @classmethod
    def from_pods(cls, pods: Sequence[Pod], coverage: float = 0.95) -> TypicalPods:
        """The most frequent shapes that together cover `coverage` of `pods`.

        Shapes are taken from the most frequent down (equal counts: larger shape first) until
        their cumulative count reaches `coverage` of all pods; the frequencies are renormalised
        over the shapes taken. Memory is not part of a shape.
        """
        if not pods:
            raise ValueError("typical pods need at least one pod")
        return cls.from_counts(Counter(shape_key(pod) for pod in pods), coverage)

    @classmethod
    def from_counts(cls, counts: Mapping[ShapeKey, int], coverage: float = 0.95) -> TypicalPods:
        """Like `from_pods`, from how many pods of each shape were seen (may be empty)."""
        total = sum(counts.values())
        ordered = sorted(
            ((key, count) for key, count in counts.items() if count > 0),
            key=lambda item: (item[1], item[0]),
            reverse=True,
        )
        taken: list[tuple[ShapeKey, int]] = []
        cumulative = 0
        for key, count in ordered:
            if cumulative >= coverage * total:
                break
            taken.append((key, count))
            cumulative += count
        return cls(
            cpu_milli=np.array([k[0] for k, _ in taken], dtype=np.int64),
            gpu_milli=np.array([k[1] for k, _ in taken], dtype=np.int64),
            num_gpu=np.array([k[2] for k, _ in taken], dtype=np.int64),
            gpu_models=tuple(k[3] for k, _ in taken),
            frequency=np.array([c / cumulative for _, c in taken], dtype=np.float64),
            counts=np.array([c for _, c in taken], dtype=np.int64),
        )

    def __len__(self) -> int:
        return len(self.frequency)

    def model_acceptance(self, gpu_models: Sequence[str]) -> BoolArray:
        """(shapes x models+1): shape t accepts model m; the last column is 'no GPU model'."""
        accepts = np.ones((len(self), len(gpu_models) + 1), dtype=np.bool_)
        for row, allowed in enumerate(self.gpu_models):
            if allowed:
                folded = {m.casefold() for m in allowed}
                accepts[row, :-1] = [m.casefold() in folded for m in gpu_models]
                accepts[row, -1] = False
        return accepts


def shape_key(pod: Pod) -> ShapeKey:
    """A pod's shape: (CPU milli, per-GPU milli, GPU count, accepted models sorted)."""
    models = tuple(sorted(pod.gpu_models)) if pod.num_gpu else ()
    return (pod.cpu_milli, pod.gpu_milli, pod.num_gpu, models)


class FragmentationModel:
    """Computes the fragmentation of nodes of one cluster for one set of typical pods."""

    def __init__(self, typical: TypicalPods, gpu_models: Sequence[str]) -> None:
        self.typical = typical
        self._accepts = typical.model_acceptance(gpu_models)
        self._is_gpu_shape = typical.gpu_milli > 0

    def node_frag_milli(
        self,
        cpu_free_milli: IntArray,
        gpu_free_milli: IntArray,
        gpu_present: BoolArray,
        gpu_model: IntArray,
    ) -> FloatArray:
        """Expected fragmented milli-GPU of each node given as rows (vectorised over rows)."""
        free = np.where(gpu_present, gpu_free_milli, 0)
        idle = free.sum(axis=1).astype(np.float64)
        share = self.typical.gpu_milli[None, :, None]
        fits = free[:, None, :] >= share  # rows x shapes x GPUs
        fits &= gpu_present[:, None, :]
        gpu_ok = fits.sum(axis=2) >= self.typical.num_gpu[None, :]
        cpu_ok = cpu_free_milli[:, None] >= self.typical.cpu_milli[None, :]
        too_small = np.where(fits, 0, free[:, None, :]).sum(axis=2)
        model_ok = self._accepts[:, gpu_model].T  # rows x shapes; index -1 is 'no model'
        usable = model_ok & gpu_ok & cpu_ok & self._is_gpu_shape[None, :]
        frag = np.where(usable, too_small, idle[:, None])
        return frag @ self.typical.frequency  # type: ignore[no-any-return]

    def snapshot_frag_milli(self, snapshot: ClusterSnapshot, rows: IntArray) -> FloatArray:
        """Fragmented milli-GPU of the snapshot's nodes at `rows`."""
        return self.node_frag_milli(
            snapshot.cpu_free_milli[rows],
            snapshot.gpu_free_milli[rows],
            snapshot.gpu_present[rows],
            snapshot.node_gpu_model[rows],
        )
