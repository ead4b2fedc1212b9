"""Event-driven simulation of a training cluster with a network topology.

Jobs (`voltpack.sim.traces.training_jobs.TrainingJob`) arrive, wait in one queue, run on a
placement, and leave. What the placement costs is the point: a job's run time is its steps times
the predicted step time (`voltpack.policies.topology.step_model`) of the placement it actually
got, so a job spread over oversubscribed uplinks runs longer and holds its GPUs longer.

Mechanics, the same for every placement policy so that only placement differs:

- **Queue.** Strict FIFO by arrival (no backfill): at every arrival and completion the head of
  the queue is tried, then the next, until one does not fit; it waits at the head. A job that
  does not fit even when nothing else runs can never run; it is counted as `unplaced` and
  dropped. Optionally (`SimConfig.backfill`, `SimConfig.wait_rule`, for every policy alike) the
  head may wait a bounded time for a better placement, and later jobs may start ahead of a
  waiting head without delaying its reservation (EASY backfill; `voltpack.sim.wait_backfill`).
- **Gang layout.** A job of n GPUs is a gang of identical pods of `pod_gpus(n)` GPUs each:
  the largest divisor of n not above the GPUs per node (`min(n, gpus_per_node)` whenever n is
  below it or a multiple of it: one pod per node's worth, the common PyTorchJob layout).
  `SimConfig.pod_gpus` fixes a size instead. Pods ask for GPUs only (no CPU or memory).
- **Placement.** A policy is either a gang placer (`voltpack.scheduler.gang_topology.place_gang`
  with a `TopologyPlacer`: voltpack's step-time placement, Kueue's or KAI's label-only
  topology placement) or a scoring strategy placing the gang pod by pod
  (`voltpack.scheduler.placement.Scheduler.schedule_group`: best-fit, fgd), whose rank order is
  the pod order (`ranks_from_placements`). Both are all-or-nothing.
- **Completion.** At start + steps x step time, every pod's GPUs are released.

Metrics per policy (`PolicyResult`): average and 99th-percentile job completion time (arrival
to completion), average step slowdown (predicted step time over the ideal placement's),
GPU utilization (busy GPU-seconds over the cluster's GPU-seconds from time 0 to the last
completion), and average queueing time (arrival to start).

Also here: `optimality_study`, the benchmark's check of voltpack's placement against the exact
optimum (`voltpack.policies.topology.exact`) on many small random clusters cut from a topology.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

import numpy as np

from voltpack.model.cluster import MILLI_PER_GPU, Node
from voltpack.model.decision import Decision, Placement
from voltpack.model.errors import InvalidRequestError
from voltpack.model.gpu_sku import GpuSku
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.topology import ClusterTopology
from voltpack.model.workload import Pod, PodGroup
from voltpack.perf.training_models import (
    TrainingModel,
    TrainingModelCatalog,
    default_parallelism,
    default_training_models,
)
from voltpack.policies.registry import make_strategy
from voltpack.policies.topology.contended_step_model import ContendedStepModel, RunningGangs
from voltpack.policies.topology.exact import ExactPlacer
from voltpack.policies.topology.placers import StepTimePlacer
from voltpack.policies.topology.step_model import (
    PlacedGang,
    TopologyStepModel,
    gang_step_model,
    ranks_from_placements,
)
from voltpack.scheduler.gang_topology import GangStepModel, TopologyPlacer, place_gang
from voltpack.scheduler.placement import Scheduler
from voltpack.scheduler.wait_or_place import WaitRule
from voltpack.sim.events import Event, EventKind, EventLoop, Progress
from voltpack.sim.traces.training_jobs import MODEL_BY_GPUS, TrainingJob, model_for_gpus
from voltpack.sim.wait_backfill import QueueEvent, queue_pass

NODE_CPU_MILLI = 1_000_000
NODE_MEMORY_MIB = 10_000_000
"""Nodes get ample CPU and memory: the simulation is about GPUs and the network."""


@dataclass(frozen=True)
class PlacementPolicy:
    """One policy under comparison: a gang placer, or a pod-by-pod scoring strategy."""

    name: str
    placer: TopologyPlacer | None = None
    strategy: str | None = None
    strategy_params: Mapping[str, Any] | None = None
    required_level: str | None = None
    """A level's node label or name the whole gang must share a domain of (gang placers)."""
    preferred_level: str | None = None
    """A level the gang should fit in when it can (gang placers)."""

    def __post_init__(self) -> None:
        if (self.placer is None) == (self.strategy is None):
            raise InvalidRequestError(
                f"policy {self.name}: give exactly one of placer (gang) or strategy (pod by pod)"
            )

    def levels(self, topology: ClusterTopology) -> tuple[int | None, int | None]:
        """The required and preferred levels as indices into `topology`'s levels."""
        required = topology.level_index(self.required_level) if self.required_level else None
        preferred = topology.level_index(self.preferred_level) if self.preferred_level else None
        return required, preferred


@dataclass(frozen=True)
class SimConfig:
    """What every policy's run shares."""

    sku: GpuSku
    seed: int = 0
    pod_gpus: int | None = None
    """GPUs per pod; None: the largest divisor of the job's GPUs not above GPUs per node."""
    catalog: TrainingModelCatalog | None = None
    contention: bool = False
    """True: running gangs share the network's links (`voltpack.perf.contention`), a job's
    step time changes whenever another starts or ends, and gang placers score candidates with
    that traffic (`ContendedStepModel`). False: each job is priced alone with fixed
    oversubscription factors, and its end is fixed when it starts."""
    backfill: bool = False
    """EASY backfill: later jobs may start ahead of a waiting head if they do not delay its
    reservation (`voltpack.scheduler.wait_or_place`); False: strict FIFO."""
    wait_rule: WaitRule | None = None
    """When the head may wait for a better placement; None: it never waits."""
    queue_observer: Callable[[QueueEvent], None] | None = None
    """Told every reservation, start and drop of the backfill/wait queue pass (not of the
    strict FIFO one); stays in the calling process (not given to worker processes' results)."""


@dataclass(frozen=True)
class JobRecord:
    """What happened to one job."""

    job_id: str
    num_gpus: int
    model: str
    arrival_s: float
    start_s: float
    end_s: float
    step_s: float
    ideal_s: float
    nodes: int
    inflicted: float = 0.0
    """Extra step time its start caused the gangs already running, summed over them as a
    share of their step (0.1: one neighbour 10% slower, or two 5%)."""
    start_step_s: float = 0.0
    """Its step time when it started (with contention, `step_s` is the average over its run)."""


@dataclass
class PolicyResult:
    """One policy's run: per-job records and the summary metrics."""

    policy: str
    records: list[JobRecord]
    unplaced: list[str]
    total_gpus: int
    wall_s: float = 0.0
    attempts: int = 0

    def summary(self) -> dict[str, Any]:
        """The figures of the benchmark's JSON."""
        if not self.records:
            return {
                "policy": self.policy,
                "jobs": 0,
                "unplaced": len(self.unplaced),
                "avg_jct_s": None,
                "p99_jct_s": None,
                "avg_step_slowdown": None,
                "gpu_utilization": None,
                "avg_queue_s": None,
                "avg_run_s": None,
                "avg_ideal_run_s": None,
                "avg_inflicted_slowdown": None,
            }
        arrival = np.array([r.arrival_s for r in self.records])
        start = np.array([r.start_s for r in self.records])
        end = np.array([r.end_s for r in self.records])
        gpus = np.array([r.num_gpus for r in self.records], dtype=np.float64)
        slowdown = np.array([r.step_s / r.ideal_s for r in self.records])
        jct = end - arrival
        run_s = end - start
        makespan = float(end.max())
        busy = float((gpus * (end - start)).sum())
        return {
            "policy": self.policy,
            "jobs": len(self.records),
            "unplaced": len(self.unplaced),
            "avg_jct_s": float(jct.mean()),
            "p99_jct_s": float(np.percentile(jct, 99)),
            "avg_step_slowdown": float(slowdown.mean()),
            "max_step_slowdown": float(slowdown.max()),
            "gpu_utilization": busy / (self.total_gpus * makespan) if makespan > 0 else 0.0,
            "avg_queue_s": float((start - arrival).mean()),
            "avg_run_s": float(run_s.mean()),
            # every job at its ideal placement's step with no contention: what no placement beats
            "avg_ideal_run_s": float((run_s / slowdown).mean()),
            "avg_inflicted_slowdown": float(np.mean([r.inflicted for r in self.records])),
            "multi_node_jobs": int(sum(1 for r in self.records if r.nodes > 1)),
            "makespan_s": makespan,
            "wall_s": self.wall_s,
            "placement_attempts": self.attempts,
        }


def cluster_snapshot(topology: ClusterTopology, gpu_model: str) -> ClusterSnapshot:
    """An idle cluster: one node per topology node, its GPUs and host layout, in its order."""
    nodes = [
        Node.empty(
            name,
            NODE_CPU_MILLI,
            NODE_MEMORY_MIB,
            host.gpu_count,
            gpu_model,
            layout=host if host.gpu_count else None,
        )
        for name, host in zip(topology.node_names, topology.hosts, strict=True)
    ]
    return ClusterSnapshot.from_nodes(nodes)


def pod_gpus_for(num_gpus: int, gpus_per_node: int, fixed: int | None = None) -> int:
    """GPUs per pod of a job's gang (see the module docstring)."""
    if fixed is not None:
        if fixed < 1 or num_gpus % fixed:
            raise InvalidRequestError(f"pod_gpus={fixed} must divide the job's {num_gpus} GPUs")
        return fixed
    size = min(num_gpus, max(1, gpus_per_node))
    while num_gpus % size:
        size -= 1
    return size


def job_gang(job: TrainingJob, pod_gpus: int) -> PodGroup:
    """The job's pods, all-or-nothing."""
    count = job.num_gpus // pod_gpus
    pods = tuple(
        Pod(
            name=f"{job.job_id}-{i}",
            cpu_milli=0,
            memory_mib=0,
            num_gpu=pod_gpus,
            gpu_milli=MILLI_PER_GPU,
        )
        for i in range(count)
    )
    return PodGroup(name=job.job_id, pods=pods, min_member=count)


def place_with_policy(
    snapshot: ClusterSnapshot,
    topology: ClusterTopology,
    group: PodGroup,
    policy: PlacementPolicy,
    scheduler: Scheduler | None,
    tensor_parallel: int,
    step_model: GangStepModel,
    rng: np.random.Generator,
) -> tuple[Decision, float] | None:
    """Place the gang now with the policy (a gang placer, or `scheduler` pod by pod); the
    decision and the predicted step time of its placement, or None when it does not fit."""
    if policy.placer is not None:
        required, preferred = policy.levels(topology)
        outcome = place_gang(
            snapshot,
            topology,
            group,
            policy.placer,
            tensor_parallel=tensor_parallel,
            required_level=required,
            preferred_level=preferred,
            step_model=step_model,
        )
        if not outcome.decision.placed or outcome.step_s is None:
            return None
        return outcome.decision, float(outcome.step_s)
    if scheduler is None:
        raise InvalidRequestError(f"policy {policy.name}: a strategy needs a scheduler")
    decision = scheduler.schedule_group(snapshot, group, rng)
    if not decision.placed:
        return None
    nodes, gpus = ranks_from_placements(snapshot, decision.placements)
    return decision, float(step_model.step_s(nodes, gpus))


Allocations = list[tuple[int, Pod, tuple[int, ...]]]
"""(node index, pod, GPU indices) of each pod of a placed gang."""
Placed = tuple[float, float, Allocations, PlacedGang | None]
"""(step s alone, ideal step s, allocations, the placed gang when contention is on) of a job
placed now (`_Runner.try_place`)."""


@dataclass
class _Run:
    """Mutable state of one `_Runner.run`."""

    jobs: Sequence[TrainingJob]
    loop: EventLoop = field(default_factory=EventLoop)
    queue: deque[int] = field(default_factory=deque)
    groups: dict[int, PodGroup] = field(default_factory=dict)
    running: dict[int, Allocations] = field(default_factory=dict)
    starts: dict[int, tuple[float, float, float, int]] = field(default_factory=dict)
    """Start s, step s at start, ideal step s and nodes of each running job."""
    progress: dict[int, Progress] = field(default_factory=dict)
    """Steps done by each running job, at its current rate (steps per second)."""
    inflicted: dict[int, float] = field(default_factory=dict)
    records: list[JobRecord] = field(default_factory=list)
    unplaced: list[str] = field(default_factory=list)
    first_fit_s: dict[int, float] = field(default_factory=dict)
    """When each queued job first could have started at the head (wait rule's bound)."""
    plan_rng: np.random.Generator | None = None
    """Draws of placements planned on future snapshots (kept apart from the policy's)."""


class _Runner:
    """One policy's run over one trace."""

    def __init__(
        self,
        topology: ClusterTopology,
        policy: PlacementPolicy,
        config: SimConfig,
    ) -> None:
        self.topology = topology
        self.policy = policy
        self.config = config
        self.catalog = config.catalog or default_training_models()
        self.snapshot = cluster_snapshot(topology, config.sku.name)
        self.gpus_per_node = int(self.snapshot.gpu_count.max(initial=0))
        self.rng = np.random.default_rng(config.seed)
        self.scheduler: Scheduler | None = None
        if policy.strategy is not None:
            strategy = make_strategy(policy.strategy, policy.strategy_params)
            self.scheduler = Scheduler.with_random_ranks(
                strategy, self.snapshot.node_count, self.rng
            )
        self.step_models: dict[tuple[str, int], TopologyStepModel] = {}
        self.attempts = 0
        self.running = RunningGangs(topology) if config.contention else None

    def step_model(self, model: TrainingModel, num_gpus: int) -> TopologyStepModel:
        key = (model.name, num_gpus)
        if key not in self.step_models:
            parallelism = default_parallelism(model, num_gpus)
            self.step_models[key] = gang_step_model(
                self.topology, model, parallelism, self.config.sku
            )
        return self.step_models[key]

    def try_place(self, job: TrainingJob, group: PodGroup) -> Placed | None:
        """(step s, ideal s, allocations, the placed gang when contention is on) of the job
        placed now, or None."""
        pod = group.pods[0]
        free = (self.snapshot.gpu_free_milli >= MILLI_PER_GPU).sum(axis=1)
        if int((free // pod.num_gpu).sum()) < len(group.pods):
            return None  # not enough room for the pods anywhere: no policy can place it
        self.attempts += 1
        model = self.catalog.get(job.model)
        step_model = self.step_model(model, job.num_gpus)
        scoring: TopologyStepModel | ContendedStepModel = step_model
        if self.running is not None:
            scoring = ContendedStepModel(step_model, self.running)
        placed = place_with_policy(
            self.snapshot,
            self.topology,
            group,
            self.policy,
            self.scheduler,
            default_parallelism(model, job.num_gpus).tensor,
            scoring,
            self.rng,
        )
        if placed is None:
            return None
        decision, step_s = placed
        gang: PlacedGang | None = None
        if self.running is not None:
            gang = step_model.placed(*ranks_from_placements(self.snapshot, decision.placements))
            step_s = gang.step_s()  # alone; `_start` adds the running gangs' traffic
        by_name = {p.name: p for p in group.pods}
        allocations = self._allocations(decision.placements, by_name)
        return step_s, float(step_model.ideal_s()), allocations, gang

    def _allocations(self, placements: Sequence[Placement], pods: Mapping[str, Pod]) -> Allocations:
        return [
            (self.snapshot.node_index(p.node), pods[p.pod], tuple(p.gpu_indices))
            for p in placements
        ]

    def observe(self, group: PodGroup) -> None:
        if self.scheduler is not None:
            for pod in group.pods:
                self.scheduler.observe_arrival(pod)

    def run(self, jobs: Sequence[TrainingJob]) -> PolicyResult:
        started = time.perf_counter()
        run = _Run(jobs)
        loop = run.loop
        for index in sorted(range(len(jobs)), key=lambda i: (jobs[i].arrival_s, i)):
            loop.queue.push(jobs[index].arrival_s, EventKind.ARRIVAL, index)
        loop.handlers[EventKind.ARRIVAL] = lambda event: self._arrive(run, event)
        loop.handlers[EventKind.DEPARTURE] = lambda event: self._complete(run, event)
        loop.after_instant = lambda now_s: self._start_queued(run, now_s)
        loop.run()
        run.records.sort(key=lambda r: (r.arrival_s, r.job_id))
        return PolicyResult(
            policy=self.policy.name,
            records=run.records,
            unplaced=run.unplaced,
            total_gpus=int(self.snapshot.gpu_count.sum()),
            wall_s=time.perf_counter() - started,
            attempts=self.attempts,
        )

    def _arrive(self, run: _Run, event: Event) -> None:
        """The job's gang joins the tail of the queue."""
        index = event.subject
        job = run.jobs[index]
        size = pod_gpus_for(job.num_gpus, self.gpus_per_node, self.config.pod_gpus)
        run.groups[index] = job_gang(job, size)
        self.observe(run.groups[index])
        run.queue.append(index)

    def _complete(self, run: _Run, event: Event) -> None:
        """Free the job's GPUs and record it."""
        index = event.subject
        for node, pod, gpus in run.running.pop(index):
            self.snapshot.release(node, pod, gpus)
        start_s, start_step_s, ideal_s, nodes = run.starts.pop(index)
        run.progress.pop(index)
        job = run.jobs[index]
        run.records.append(
            JobRecord(
                job.job_id,
                job.num_gpus,
                job.model,
                job.arrival_s,
                start_s,
                event.time_s,
                start_step_s if self.running is None else (event.time_s - start_s) / job.steps,
                ideal_s,
                nodes,
                run.inflicted.pop(index, 0.0),
                start_step_s,
            )
        )
        if self.running is not None:
            self.running.remove(index)
            self._share_links(run, event.time_s)

    def _predicted_end_s(self, run: _Run, index: int) -> float:
        """When running job `index` is predicted to finish (with contention: at its current
        rate, which the next start or end nearby may change)."""
        if self.running is not None:
            return run.progress[index].finish_s()
        start_s, step_s, _, _ = run.starts[index]
        return start_s + run.jobs[index].steps * step_s

    def _start_queued(self, run: _Run, now_s: float) -> None:
        """Start queued jobs in FIFO order until the head does not fit (after every instant);
        with `SimConfig.backfill` or `wait_rule`, the pass of `voltpack.sim.wait_backfill`."""

        def start(index: int, placed: Placed) -> None:
            run.queue.remove(index)
            del run.groups[index]
            self._start(run, index, placed, now_s)

        def drop(index: int) -> None:
            run.unplaced.append(run.jobs[index].job_id)  # cannot run on an empty cluster
            run.queue.remove(index)
            del run.groups[index]

        if self.config.backfill or self.config.wait_rule is not None:
            queue_pass(self, run, now_s, start, drop)
            return
        while run.queue:
            index = run.queue[0]
            placed = self.try_place(run.jobs[index], run.groups[index])
            if placed is None:
                if run.running:
                    break
                drop(index)
                continue
            start(index, placed)

    def _start(
        self,
        run: _Run,
        index: int,
        placed: Placed,
        now_s: float,
    ) -> None:
        """The job runs from now: its GPUs are taken, its completion queued (and with
        contention, the links re-shared and every slowed job's completion moved)."""
        step_s, ideal_s, allocations, gang = placed
        run.running[index] = allocations
        nodes = len({node for node, _, _ in allocations})
        progress = Progress(work_s=float(run.jobs[index].steps), rate=1.0 / step_s, since_s=now_s)
        run.progress[index] = progress
        if self.running is not None and gang is not None:
            before = dict(self.running.step_s)
            self.running.add(index, gang)
            changed = self._share_links(run, now_s)
            step_s = self.running.step_s[index]
            run.inflicted[index] = sum(
                new_s / before[other] - 1.0 for other, new_s in changed.items() if other != index
            )
        run.starts[index] = (now_s, step_s, ideal_s, nodes)
        if self.running is None:  # the end is fixed now
            end_s = now_s + run.jobs[index].steps * step_s
            run.loop.queue.push(end_s, EventKind.DEPARTURE, index)
        else:
            run.loop.reschedule(progress.finish_s(), EventKind.DEPARTURE, index)

    def _share_links(self, run: _Run, now_s: float) -> dict[Hashable, float]:
        """Re-share the links among the running gangs; move the completion of each gang
        whose step time changed. The changed gangs and their new step times."""
        assert self.running is not None
        changed = self.running.resolve()
        for key, step_s in changed.items():
            if not isinstance(key, int) or key not in run.progress:
                continue
            progress = run.progress[key]
            progress.set_rate(now_s, 1.0 / step_s)
            run.loop.reschedule(progress.finish_s(), EventKind.DEPARTURE, key)
        return changed


def simulate(
    topology: ClusterTopology,
    jobs: Sequence[TrainingJob],
    policy: PlacementPolicy,
    config: SimConfig,
) -> PolicyResult:
    """Run one policy over the jobs on an idle cluster of `topology`; deterministic in seed."""
    return _Runner(topology, policy, config).run(jobs)


def _simulate_args(
    args: tuple[ClusterTopology, list[TrainingJob], PlacementPolicy, SimConfig],
) -> PolicyResult:
    return simulate(*args)


def simulate_all(
    topology: ClusterTopology,
    jobs: Sequence[TrainingJob],
    policies: Sequence[PlacementPolicy],
    config: SimConfig,
    processes: int = 1,
) -> list[PolicyResult]:
    """Every policy on the same trace, in the policies' order; `processes` > 1 runs them in
    that many worker processes (same results as one process)."""
    work = [(topology, list(jobs), policy, config) for policy in policies]
    if processes <= 1 or len(policies) <= 1:
        return [_simulate_args(item) for item in work]
    with ProcessPoolExecutor(
        max_workers=min(processes, len(policies)), mp_context=get_context("spawn")
    ) as pool:
        return list(pool.map(_simulate_args, work))


# --- optimality: heuristics against the exact optimum on small clusters -------------------


@dataclass(frozen=True)
class OptimalityInstance:
    """One small instance: the policy's and the optimum's predicted step times."""

    nodes: int
    num_gpus: int
    model: str
    pod_gpus: int
    exact_step_s: float
    step_s: dict[str, float | None]


@dataclass
class OptimalityResult:
    """Gaps of each policy's step time over the exact optimum, in percent.

    The optimum is over how many units go to each node, with ranks in topology order and GPUs
    chosen by the mechanism (`voltpack.policies.topology.exact`). A pod-by-pod policy orders
    its ranks by pod instead, so it can land below that optimum (`below_optimum`); a gang
    placer using the same mechanism cannot, up to the order of ranks between domains.
    """

    instances: list[OptimalityInstance]
    skipped: int
    wall_s: float

    def gaps_pct(self, policy: str) -> list[float]:
        """Per instance where the policy placed the gang: 100 x (its step / optimum - 1)."""
        gaps = []
        for item in self.instances:
            step = item.step_s.get(policy)
            if step is not None:
                gaps.append(100.0 * (step / item.exact_step_s - 1.0))
        return gaps

    def summary(self, main_policy: str) -> dict[str, Any]:
        """The `optimality` section: the main policy's gaps, and every policy's."""
        policies = sorted({name for item in self.instances for name in item.step_s})
        per_policy = {}
        for name in policies:
            gaps = np.array(self.gaps_pct(name))
            per_policy[name] = {
                "instances": int(gaps.size),
                "max_gap_pct": float(gaps.max()) if gaps.size else None,
                "mean_gap_pct": float(gaps.mean()) if gaps.size else None,
                "min_gap_pct": float(gaps.min()) if gaps.size else None,
                "optimal_share": float((gaps <= 1e-9).mean()) if gaps.size else None,
                "below_optimum": int((gaps < -1e-9).sum()),
            }
        main = per_policy.get(main_policy, {})
        return {
            "policy": main_policy,
            "instances": main.get("instances", 0),
            "max_gap_pct": main.get("max_gap_pct"),
            "mean_gap_pct": main.get("mean_gap_pct"),
            "optimal_share": main.get("optimal_share"),
            "below_optimum": main.get("below_optimum", 0),
            "skipped": self.skipped,
            "wall_s": self.wall_s,
            "per_policy": per_policy,
        }


GANG_SIZES_GPUS = (2, 4, 8, 16, 24, 32, 48, 64)


def small_topology(
    topology: ClusterTopology, rng: np.random.Generator, nodes: int = 16, leaves: int = 3
) -> ClusterTopology:
    """`nodes` hosts drawn from `leaves` random leaf domains (more leaves if those are too
    small), in the big topology's order; the levels and host layouts are the big one's."""
    leaf_level = topology.level_count - 1
    leaf_of = topology.domain[leaf_level]
    order = rng.permutation(topology.domain_count(leaf_level))
    chosen: list[int] = []
    for count, leaf in enumerate(order.tolist()):
        if count >= leaves and len(chosen) >= nodes:
            break
        chosen.extend(np.flatnonzero(leaf_of == leaf).tolist())
    rows = np.sort(rng.choice(np.array(chosen), size=min(nodes, len(chosen)), replace=False))
    return topology.aligned_to([topology.node_names[int(r)] for r in rows])


def _occupy(snapshot: ClusterSnapshot, rng: np.random.Generator) -> None:
    """Random partial occupancy: per node, none (40%), all (25%) or some random GPUs busy."""
    for node in range(snapshot.node_count):
        count = int(snapshot.gpu_count[node])
        draw = rng.random()
        busy = 0 if draw < 0.4 else count if draw < 0.65 else int(rng.integers(1, count))
        if busy == 0:
            continue
        gpus = sorted(rng.choice(count, size=busy, replace=False).tolist())
        filler = Pod(
            name=f"busy-{node}", cpu_milli=0, memory_mib=0, num_gpu=busy, gpu_milli=MILLI_PER_GPU
        )
        snapshot.allocate(node, filler, gpus)


def optimality_study(
    topology: ClusterTopology,
    policies: Sequence[PlacementPolicy],
    sku: GpuSku,
    instances: int = 200,
    seed: int = 0,
    *,
    nodes: int = 16,
    model_by_gpus: Sequence[tuple[int, str]] = MODEL_BY_GPUS,
    catalog: TrainingModelCatalog | None = None,
    progress: Callable[[int], None] | None = None,
) -> OptimalityResult:
    """Place one random gang on each of `instances` random small clusters with every policy
    and with the exact search; record the predicted step times.

    Clusters: `nodes` hosts from a few random leaves, random partial occupancy. Gangs: a size
    from `GANG_SIZES_GPUS` that fits, its model from `model_by_gpus`, pods of the simulator's
    layout or (half the time) of 4 GPUs when that divides the gang and holds whole
    tensor-parallel groups.
    """
    started = time.perf_counter()
    catalog = catalog or default_training_models()
    rng = np.random.default_rng(seed)
    exact = ExactPlacer()
    found: list[OptimalityInstance] = []
    skipped = 0
    while len(found) < instances:
        small = small_topology(topology, rng, nodes, leaves=int(rng.integers(2, 5)))
        snapshot = cluster_snapshot(small, sku.name)
        _occupy(snapshot, rng)
        free = int((snapshot.gpu_free_milli >= MILLI_PER_GPU).sum())
        sizes = [g for g in GANG_SIZES_GPUS if g <= free]
        if not sizes:
            skipped += 1
            continue
        num_gpus = int(rng.choice(sizes))
        model = model_for_gpus(num_gpus, catalog, model_by_gpus)
        parallelism = default_parallelism(model, num_gpus)
        per_node = int(snapshot.gpu_count.max(initial=0))
        size = pod_gpus_for(num_gpus, per_node)
        if size > 4 and num_gpus % 4 == 0 and parallelism.tensor <= 4 and rng.random() < 0.5:
            size = 4
        job = TrainingJob("gang", 0.0, num_gpus, model.name, 1)
        group = job_gang(job, size)
        step_model = gang_step_model(small, model, parallelism, sku)
        best = place_gang(
            snapshot.copy(),
            small,
            group,
            exact,
            tensor_parallel=parallelism.tensor,
            step_model=step_model,
        )
        if not best.decision.placed or best.step_s is None:
            skipped += 1  # does not fit (or too big to search); draw another
            continue
        steps: dict[str, float | None] = {}
        for policy in policies:
            steps[policy.name] = _one_placement(
                small, snapshot.copy(), group, policy, parallelism.tensor, step_model, rng
            )
        found.append(
            OptimalityInstance(
                nodes=small.node_count,
                num_gpus=num_gpus,
                model=model.name,
                pod_gpus=size,
                exact_step_s=float(best.step_s),
                step_s=steps,
            )
        )
        if progress is not None:
            progress(len(found))
    return OptimalityResult(found, skipped, time.perf_counter() - started)


def _one_placement(
    topology: ClusterTopology,
    snapshot: ClusterSnapshot,
    group: PodGroup,
    policy: PlacementPolicy,
    tensor_parallel: int,
    step_model: TopologyStepModel,
    rng: np.random.Generator,
) -> float | None:
    scheduler = None
    if policy.strategy is not None:
        strategy = make_strategy(policy.strategy, policy.strategy_params)
        for pod in group.pods:
            strategy.observe_arrival(pod)
        scheduler = Scheduler.with_random_ranks(strategy, snapshot.node_count, rng)
    placed = place_with_policy(
        snapshot, topology, group, policy, scheduler, tensor_parallel, step_model, rng
    )
    return None if placed is None else placed[1]


def default_policies(extra: Sequence[PlacementPolicy] = ()) -> list[PlacementPolicy]:
    """Pod-by-pod best-fit and fgd, any label-only placers given, then voltpack's."""
    return [
        PlacementPolicy("best-fit", strategy="best-fit"),
        PlacementPolicy("fgd", strategy="fgd"),
        *extra,
        PlacementPolicy("voltpack", placer=StepTimePlacer()),
    ]
