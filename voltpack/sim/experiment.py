"""The FGD paper's experiment protocol (ATC'23), on any openb-format cluster and pod list.

1. Arrival order: the pods in file order, shuffled with the seed (or kept in creation-time
   order).
2. Inflation: pods are drawn uniformly with replacement from the original list and appended
   after the originals until the next draw would take the arrived GPU demand past
   `target_demand_ratio` of the cluster's GPU capacity (the paper uses 1.3).
3. No departures; a pod that fits nowhere fails and is never retried.
4. After every arrival: arrived GPU demand, allocated GPUs, fragmentation (against the typical
   pods of the original list) and failed pods. The per-arrival series are condensed into one
   value per whole percent of arrived demand, averaging the arrivals whose demand rounds to it,
   as the reference analysis does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from voltpack.model.cluster import MILLI_PER_GPU, Node
from voltpack.model.errors import InvalidRequestError
from voltpack.model.snapshot import ClusterSnapshot, FloatArray, IntArray
from voltpack.model.workload import Pod
from voltpack.policies.fragmentation import FragmentationModel, TypicalPods
from voltpack.policies.registry import make_strategy
from voltpack.policies.schema import PolicyFile
from voltpack.scheduler.placement import Scheduler
from voltpack.sim.engine import EventKind, SimEvent, Simulator

ArrivalOrder = Literal["shuffle", "creation"]


def arrival_order(pods: Sequence[Pod], order: ArrivalOrder, rng: np.random.Generator) -> list[Pod]:
    """The original pods in arrival order: shuffled with `rng`, or by creation time."""
    if order == "creation":
        return sorted(pods, key=lambda pod: pod.creation_time_s)
    permutation = rng.permutation(len(pods))
    return [pods[i] for i in permutation]


def inflate(
    ordered: Sequence[Pod],
    originals: Sequence[Pod],
    capacity_gpu_milli: int,
    target_demand_ratio: float,
    rng: np.random.Generator,
) -> list[Pod]:
    """`ordered` followed by copies of random `originals` up to the target GPU demand.

    Stops at the first draw that would take the demand past the target. Only GPU pods move the
    demand, so CPU-only pods drawn on the way are appended too. A list already at or above the
    target is returned unchanged.
    """
    if not math.isfinite(target_demand_ratio) or target_demand_ratio <= 0:
        raise InvalidRequestError(
            f"target demand ratio must be a positive number, got {target_demand_ratio}"
        )
    target_milli = target_demand_ratio * capacity_gpu_milli
    demand_milli = sum(pod.gpu_request_milli for pod in originals)
    arrivals = list(ordered)
    if demand_milli >= target_milli or not any(pod.num_gpu for pod in originals):
        return arrivals
    clone = 0
    while True:
        pod = originals[int(rng.integers(len(originals)))]
        if demand_milli + pod.gpu_request_milli > target_milli:
            return arrivals
        demand_milli += pod.gpu_request_milli
        arrivals.append(pod.model_copy(update={"name": f"{pod.name}-tuned-{clone}"}))
        clone += 1


@dataclass
class _Recorder:
    """Observer that records the cluster figures after every arrival."""

    fragmentation: FragmentationModel
    node_frag_milli: FloatArray
    arrived_milli: list[int] = field(default_factory=list)
    allocated_milli: list[int] = field(default_factory=list)
    frag_milli: list[float] = field(default_factory=list)
    idle_milli: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    _arrived: int = 0
    _failed: int = 0

    def __call__(self, snapshot: ClusterSnapshot, event: SimEvent) -> None:
        if event.touched_nodes:
            rows = np.array(event.touched_nodes, dtype=np.int64)
            self.node_frag_milli[rows] = self.fragmentation.snapshot_frag_milli(snapshot, rows)
        if event.kind != EventKind.ARRIVAL:
            return
        self._arrived += event.pod.gpu_request_milli
        if event.decision is not None and not event.decision.placed:
            self._failed += 1
        idle = int(snapshot.gpu_free_milli.sum())
        self.arrived_milli.append(self._arrived)
        self.allocated_milli.append(snapshot.total_gpus * MILLI_PER_GPU - idle)
        self.idle_milli.append(idle)
        self.frag_milli.append(float(self.node_frag_milli.sum()))
        self.failed.append(self._failed)


@dataclass
class RunResult:
    """One policy, one seed: per-arrival series and their per-percent condensation."""

    policy_name: str
    strategy: str
    seed: int
    total_gpus: int
    pods_arrived: int
    failed_pods: int
    wall_time_s: float
    demand_pct: list[int]
    allocation_ratio_pct: list[float]
    frag_amount_pct: list[float]
    frag_ratio_pct: list[float]
    arrived_gpu_milli: IntArray
    allocated_gpu_milli: IntArray
    frag_gpu_milli: FloatArray
    failed_pods_series: IntArray

    @property
    def final_allocation_ratio_pct(self) -> float:
        """Allocation ratio at the last percent of arrived demand."""
        return self.allocation_ratio_pct[-1]

    @property
    def final_frag_amount_pct(self) -> float:
        """Fragmentation (percent of all GPUs) at the last percent of arrived demand."""
        return self.frag_amount_pct[-1]

    @property
    def final_frag_ratio_pct(self) -> float:
        """Fragmentation as a percent of the idle GPUs at the last percent of demand."""
        return self.frag_ratio_pct[-1]

    def to_json(self) -> dict[str, Any]:
        """Everything, series included, as JSON-ready values."""
        return {
            "policy": self.policy_name,
            "strategy": self.strategy,
            "seed": self.seed,
            "total_gpus": self.total_gpus,
            "pods_arrived": self.pods_arrived,
            "failed_pods": self.failed_pods,
            "wall_time_s": round(self.wall_time_s, 3),
            "final_allocation_ratio_pct": self.final_allocation_ratio_pct,
            "final_frag_amount_pct": self.final_frag_amount_pct,
            "final_frag_ratio_pct": self.final_frag_ratio_pct,
            "per_percent": {
                "arrived_demand_pct": self.demand_pct,
                "allocation_ratio_pct": self.allocation_ratio_pct,
                "frag_amount_pct": self.frag_amount_pct,
                "frag_ratio_pct": self.frag_ratio_pct,
            },
            "per_arrival": {
                "arrived_gpu_milli": self.arrived_gpu_milli.tolist(),
                "allocated_gpu_milli": self.allocated_gpu_milli.tolist(),
                "frag_gpu_milli": np.round(self.frag_gpu_milli, 1).tolist(),
                "failed_pods": self.failed_pods_series.tolist(),
            },
        }


def per_percent(
    arrived_milli: IntArray, values: FloatArray, capacity_milli: int, last_pct: int
) -> tuple[list[int], list[float]]:
    """Mean of `values` over the arrivals whose arrived demand rounds to each whole percent.

    A percent no arrival rounds to takes the arrivals within one percent of it; percents with
    neither are left out.
    """
    demand_pct = np.round(arrived_milli / capacity_milli * 100)
    xs: list[int] = []
    means: list[float] = []
    for pct in range(last_pct + 1):
        selected = values[demand_pct == pct]
        if selected.size == 0:
            selected = values[np.abs(demand_pct - pct) <= 1]
        if selected.size:
            xs.append(pct)
            means.append(round(float(selected.mean()), 2))
    return xs, means


def run_experiment(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    policy: PolicyFile,
    seed: int,
    *,
    target_demand_ratio: float = 1.3,
    order: ArrivalOrder = "shuffle",
) -> RunResult:
    """Run the protocol once: one policy, one seed."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    snapshot = ClusterSnapshot.from_nodes(nodes)
    capacity_milli = snapshot.total_gpus * MILLI_PER_GPU
    arrivals = inflate(
        arrival_order(pods, order, rng), pods, capacity_milli, target_demand_ratio, rng
    )
    # Same instant for every arrival: the engine keeps the list order.
    arrivals = [pod.model_copy(update={"creation_time_s": 0.0}) for pod in arrivals]
    strategy = make_strategy(policy.spec.scoring.strategy, policy.spec.scoring.params)
    strategy.prime(pods)
    scheduler = Scheduler.with_random_ranks(strategy, snapshot.node_count, rng)
    fragmentation = FragmentationModel(TypicalPods.from_pods(pods), snapshot.gpu_models)
    recorder = _Recorder(
        fragmentation=fragmentation,
        node_frag_milli=fragmentation.snapshot_frag_milli(snapshot, np.arange(snapshot.node_count)),
    )
    simulator = Simulator(snapshot, scheduler, rng, retry_pending=False, observers=[recorder])
    simulator.run(arrivals, with_departures=False)
    arrived = np.array(recorder.arrived_milli, dtype=np.int64)
    allocated = np.array(recorder.allocated_milli, dtype=np.int64)
    frag = np.array(recorder.frag_milli, dtype=np.float64)
    idle = np.array(recorder.idle_milli, dtype=np.float64)
    last_pct = round(target_demand_ratio * 100)
    capacity = max(capacity_milli, 1)
    xs, alloc_pct = per_percent(arrived, allocated / capacity * 100, capacity, last_pct)
    _, frag_pct = per_percent(arrived, frag / capacity * 100, capacity, last_pct)
    ratio = np.where(idle > 0, frag / np.maximum(idle, 1) * 100, 0.0)
    _, frag_ratio_pct = per_percent(arrived, ratio, capacity, last_pct)
    return RunResult(
        policy_name=policy.metadata.name,
        strategy=strategy.name,
        seed=seed,
        total_gpus=snapshot.total_gpus,
        pods_arrived=len(arrivals),
        failed_pods=recorder.failed[-1] if recorder.failed else 0,
        wall_time_s=time.perf_counter() - started,
        demand_pct=xs,
        allocation_ratio_pct=alloc_pct,
        frag_amount_pct=frag_pct,
        frag_ratio_pct=frag_ratio_pct,
        arrived_gpu_milli=arrived,
        allocated_gpu_milli=allocated,
        frag_gpu_milli=frag,
        failed_pods_series=np.array(recorder.failed, dtype=np.int64),
    )
