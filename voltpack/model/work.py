"""Work as a scheduling session sees it: gangs that wait, gangs that run, gangs evicted."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from voltpack.model.cluster import MILLI_PER_GPU
from voltpack.model.snapshot import NO_GPU_MODEL, ClusterSnapshot
from voltpack.model.workload import Pod, PodGroup

GpuAmounts = dict[str, float]
"""GPUs per GPU model (fractions for GPU shares)."""


@dataclass
class PendingWork:
    """Gangs waiting for voltpack, and pods held back this cycle (with the reason)."""

    groups: list[PodGroup] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)
    gated: set[str] = field(default_factory=set)
    """Held pods that have scheduling gates (kube-scheduler's `SchedulingGated`)."""


@dataclass(frozen=True)
class RunningGang:
    """A gang that holds GPUs: its pods where they run, its queue, priority and start."""

    name: str
    queue: str
    priority: int
    preemptible: bool
    started_s: float | None
    """When it started running; None: not yet (counts as just started)."""
    pods: tuple[tuple[Pod, int, tuple[int, ...]], ...]
    """(pod, node index, GPU indices) of every pod."""
    min_pods: int | None = None
    """Elastic: the fewest pods it runs with; preemption may shrink it to that many (giving up
    its last pods) instead of evicting it. None: evicted whole."""
    budget_violations: int = 0
    """Pods of the gang whose eviction would take a PodDisruptionBudget below what it allows:
    preemption picks gangs without violations first, as kube-scheduler does."""

    def shed(self) -> RunningGang | None:
        """The part of an elastic gang preemption may take (its pods beyond `min_pods`, the
        last ones), as a gang of its own; None when it cannot shrink."""
        if self.min_pods is None or not 1 <= self.min_pods < len(self.pods):
            return None
        return replace(self, pods=self.pods[self.min_pods :], min_pods=None)

    def gpus_by_model(self, snapshot: ClusterSnapshot) -> GpuAmounts:
        """GPUs the gang holds per GPU model."""
        return gpus_by_model(snapshot, ((pod, node) for pod, node, _ in self.pods))

    def runtime_s(self, now_s: float) -> float:
        """How long it has run."""
        return 0.0 if self.started_s is None else max(now_s - self.started_s, 0.0)


def gpus_by_model(snapshot: ClusterSnapshot, pods: Iterable[tuple[Pod, int]]) -> GpuAmounts:
    """GPUs per GPU model of pods placed on nodes of `snapshot` ((pod, node index) pairs)."""
    amounts: GpuAmounts = {}
    for pod, node in pods:
        model_index = int(snapshot.node_gpu_model[node])
        if not pod.num_gpu or model_index == NO_GPU_MODEL:
            continue
        model = snapshot.gpu_models[model_index]
        amounts[model] = amounts.get(model, 0.0) + pod.gpu_request_milli / MILLI_PER_GPU
    return amounts


@dataclass(frozen=True)
class Eviction:
    """A running gang evicted whole (or an elastic one shrunk), and why."""

    gang: RunningGang
    """What is evicted: the whole gang, or (`shrink`) the pods an elastic gang gives up."""
    by: str
    reason: str
    shrink: bool = False
    """Only `gang.pods` go; the elastic gang runs on with the rest."""
    kind: Literal["reclaim", "priority"] = "priority"
    """Why: a queue within its guarantee takes back what another borrows, or a higher
    priority in the same queue."""
