"""FGD: fragmentation gradient descent (Weng et al., ATC'23)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.snapshot import BoolArray, ClusterSnapshot, FloatArray, IntArray
from voltpack.model.workload import Pod
from voltpack.policies.cpu_stranding import CpuPerGpu, stranding_change
from voltpack.policies.fragmentation import TypicalPods
from voltpack.policies.fragmentation_gradient import FragmentationGradient, Gradient
from voltpack.policies.strategies.least_allocated import free_share_after
from voltpack.policies.strategy import MAX_NODE_SCORE, ScoringStrategy
from voltpack.policies.workload_shapes import ShapeWindow


class FgdParams(BaseModel):
    """Where FGD's typical pod shapes come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shapes: Literal["observed", "primed"] = Field(
        default="observed",
        description=(
            "observed: a sliding window of recent arrivals (seeded with any primed workload); "
            "primed: fixed to the workload the driver primes with (the trace, as in the paper)"
        ),
    )
    window_pods: int = Field(default=5000, ge=10, description="arrivals in the sliding window")
    coverage: float = Field(
        default=0.95, gt=0, le=1, description="share of the window the typical shapes cover"
    )
    refresh_every_pods: int = Field(
        default=500, ge=1, description="arrivals between rebuilds of the typical shapes"
    )
    score_levels: int = Field(
        default=100,
        ge=2,
        le=100_000,
        description="levels the sigmoid of the fragmentation change is truncated to; nodes "
        "on the same level tie (the paper: 100)",
    )
    tie_break: Literal["rank", "least-allocated"] = Field(
        default="rank",
        description="among tied nodes: rank (a fixed random node order, as in the paper) or "
        "least-allocated (the node with the largest free share of CPU, memory and GPU)",
    )
    cpu_stranding: float = Field(
        default=0.0,
        ge=0,
        le=100,
        description="weight of the change in CPU-stranded GPUs (free GPU capacity the node's "
        "free CPU cannot feed at the typical pods' CPU per GPU; see "
        "voltpack.policies.cpu_stranding), added to the fragmentation change before the "
        "sigmoid; 0: off (the paper)",
    )
    exact_fit_levels: int = Field(
        default=0,
        ge=0,
        le=100,
        description="score levels added for a GPU share whose GPU it leaves with exactly 0 or "
        "exactly a typical share's milli-GPU free (a fit for a future pod); 0: off (the paper)",
    )


class FgdStrategy(ScoringStrategy):
    """FGD picks the node and GPU whose placement increases the expected fragmentation least."""

    name = "fgd"
    summary = (
        "FGD picks the node and GPU whose placement increases the cluster's expected GPU "
        "fragmentation (against the workload's typical pod shapes) the least."
    )
    Params = FgdParams

    def __init__(self, params: BaseModel | None = None) -> None:
        config = params if isinstance(params, FgdParams) else FgdParams()
        super().__init__(config)
        self._config = config
        self._window = ShapeWindow(self._config.window_pods)
        self._primed = False
        self._since_refresh = 0
        self._gradient: FragmentationGradient | None = None
        self._models: tuple[str, ...] | None = None
        self._cpu_per_gpu: CpuPerGpu | None = None
        self._share_sizes: IntArray = np.zeros(0, dtype=np.int64)

    def prime(self, pods: Sequence[Pod]) -> None:
        """Seed the shapes with a known workload (all of it when the shapes are 'primed')."""
        if self._config.shapes == "primed":
            self._window = ShapeWindow(max(self._config.window_pods, len(pods)))
        self._window.extend(pods)
        self._primed = True
        self._gradient = None

    def observe_arrival(self, pod: Pod) -> None:
        """Count the arrival (unless the shapes are fixed to a primed workload)."""
        if self._config.shapes == "primed" and self._primed:
            return
        self._window.add(pod)
        self._since_refresh += 1
        if self._since_refresh >= self._config.refresh_every_pods or self._gradient is None:
            self._gradient = None
            self._since_refresh = 0

    def gradient(self, snapshot: ClusterSnapshot, pod: Pod, candidates: IntArray) -> Gradient:
        """The fragmentation gradient of placing `pod` on each candidate."""
        if self._gradient is None or self._models != snapshot.gpu_models:
            typical = self._window.typical(self._config.coverage)
            self._gradient = FragmentationGradient(typical, snapshot.gpu_models)
            self._cpu_per_gpu = CpuPerGpu.of(typical)
            self._share_sizes = typical_share_sizes(typical)
            self._models = snapshot.gpu_models
        return self._gradient.gradient(snapshot, pod, candidates)

    def score(
        self, snapshot: ClusterSnapshot, pod: Pod, candidates: IntArray, rng: np.random.Generator
    ) -> IntArray | FloatArray:
        """sigmoid(fragmentation decrease in GPUs) on `score_levels` levels, scaled to 0..100
        (50: no change); with `cpu_stranding`, the weighted change of CPU-stranded GPUs counts
        as fragmentation; with the least-allocated tie-break, the node's free share is added
        below one level; with `exact_fit_levels`, a share that leaves its GPU with an exact fit
        (see `exact_fits`) gains that many levels (capped at the top level). With 100 levels
        and the rank tie-break scores are integers."""
        gradient = self.gradient(snapshot, pod, candidates)
        change_milli = gradient.delta_milli()
        if self._config.cpu_stranding > 0 and self._cpu_per_gpu is not None:
            ratio = self._cpu_per_gpu.for_cluster(snapshot)
            change_milli = change_milli + self._config.cpu_stranding * stranding_change(
                snapshot, pod, candidates, ratio
            )
        decrease_gpus = -change_milli / 1000.0
        levels = self._config.score_levels
        level = np.trunc(levels / (1.0 + np.exp(-decrease_gpus)))
        if self._config.exact_fit_levels and pod.is_gpu_sharing:
            fits = exact_fits(snapshot, pod, candidates, gradient.best_gpu, self._share_sizes)
            level = np.minimum(level + self._config.exact_fit_levels * fits, levels)
        if levels == MAX_NODE_SCORE and self._config.tie_break == "rank":
            return level.astype(np.int64)
        scores: FloatArray = level * (MAX_NODE_SCORE / levels)
        if self._config.tie_break == "least-allocated":
            share = np.clip(free_share_after(snapshot, pod, candidates), 0.0, 1.0)
            scores = scores + share * (0.999 * MAX_NODE_SCORE / levels)
        return scores

    def pick_gpus(
        self, snapshot: ClusterSnapshot, node: int, pod: Pod, rng: np.random.Generator
    ) -> tuple[int, ...]:
        """For a GPU share, the GPU that adds least fragmentation; whole GPUs: first idle."""
        if pod.is_gpu_sharing:
            best = self.gradient(snapshot, pod, np.array([node], dtype=np.int64)).best_gpu
            return (int(best[0]),)
        return super().pick_gpus(snapshot, node, pod, rng)


def typical_share_sizes(typical: TypicalPods) -> IntArray:
    """The distinct milli-GPU of the typical shapes that take a share of one GPU."""
    shares = typical.gpu_milli[(typical.gpu_milli > 0) & (typical.gpu_milli < MILLI_PER_GPU)]
    sizes: IntArray = np.unique(shares).astype(np.int64)
    return sizes


def exact_fits(
    snapshot: ClusterSnapshot,
    pod: Pod,
    candidates: IntArray,
    gpus: IntArray,
    share_sizes: IntArray,
) -> BoolArray:
    """Per candidate: the share `pod` would leave GPU `gpus[i]` with exactly nothing or exactly
    one of `share_sizes` milli-GPU free."""
    left = snapshot.gpu_free_milli[candidates, gpus] - pod.gpu_milli
    fits: BoolArray = (left == 0) | np.isin(left, share_sizes)
    return fits
