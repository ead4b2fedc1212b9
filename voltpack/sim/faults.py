"""Training under failures: a discrete-event simulation of gangs, faults, isolation and recovery.

A cluster of `nodes` x `gpus_per_node` GPUs runs large elastic-capable training gangs (whole-node
workers) beside a stream of small jobs (one worker of 1-8 GPUs, Philly-sized). Faults arrive as
a Poisson process over all GPUs at `failures_per_gpu_day` (Llama 3's rate by default), each on
a uniformly drawn GPU with a root cause drawn from a failure catalog; the cause's scope (GPU,
node, or software) and the recovery policy (`voltpack.scheduler.fault_recovery`, the same
decisions the operator makes) set what is cordoned and how each affected gang goes on:

- **restart**: the gang hangs for `detection_delay_s` (its GPUs held, no progress), rolls back to
  its last checkpoint (taken every `checkpoint_interval_s` of running time), releases its GPUs,
  and waits in the restart queue (within its restart budget) until it fits; it then starts for
  `restart_cost_s` (scheduling, loading the checkpoint, warm-up) before running again;
- **shrink** (elastic gangs whose healthy workers keep their minimum): the failed workers'
  GPUs are released, and the rest pause for `detection_delay_s + reconfigure_s`, then go on
  from where they were at the smaller size (the global batch kept: progress per second in
  proportion to the workers). Shrunk gangs grow back when whole workers free up, pausing
  `reconfigure_s` again.

Cordoned capacity comes back after the scope's repair time. A GPU's repair does not interrupt
other jobs on its host (a reset in place, or a replacement deferred until the host drains): an
assumption of GPU-level isolation, stated with the results. Jobs are placed in FIFO order,
restarts first (a waiting head blocks the rest, so a large gang is not starved by small ones).

Progress is counted in full-size seconds of work. Useful GPU-hours are kept progress x the
gang's full GPUs; allocated GPU-hours are every second a GPU is held by a gang (running,
hung, starting or pausing); lost GPU-hours are allocated minus useful. Everything random comes
from one seeded generator drawn before the run, so two policies see the same faults and jobs.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from voltpack.scheduler.fault_recovery import (
    FaultScope,
    GangShape,
    RecoveryKind,
    RecoveryPolicy,
    RestartBudget,
    isolation_for,
    recovery_for,
    restart_workers,
)
from voltpack.sim.events import SAME_PRIORITY, Event, EventKind, EventLoop, EventQueue
from voltpack.sim.traces.failures import (
    LLAMA3_FAILURES_PER_GPU_DAY,
    FailureCatalog,
    load_failure_catalog,
)

DAY_S = 86_400.0


@dataclass(frozen=True)
class FaultSimConfig:
    """The cluster, the fault process and the recovery costs."""

    nodes: int = 128
    gpus_per_node: int = 8
    days: float = 30.0
    failures_per_gpu_day: float = LLAMA3_FAILURES_PER_GPU_DAY
    detection_delay_s: float = 600.0
    """From the fault to the decision (PyTorch's default NCCL timeout is 10 minutes)."""
    restart_cost_s: float = 600.0
    """Placing, loading the checkpoint and warming up a restarted gang."""
    reconfigure_s: float = 120.0
    """An in-place shrink or grow: new communicators, resharded batch."""
    checkpoint_interval_s: float = 3600.0
    gpu_repair_s: float = DAY_S
    node_repair_s: float = 12 * 3600.0

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1 or self.days <= 0:
            raise ValueError("nodes, gpus_per_node must be >= 1 and days > 0")
        if min(self.detection_delay_s, self.restart_cost_s, self.reconfigure_s) < 0:
            raise ValueError("delays and costs must be >= 0")
        if self.checkpoint_interval_s <= 0 or self.failures_per_gpu_day < 0:
            raise ValueError("checkpoint_interval_s must be > 0, failures_per_gpu_day >= 0")

    def repair_s(self, scope: FaultScope) -> float:
        return {FaultScope.GPU: self.gpu_repair_s, FaultScope.NODE: self.node_repair_s}.get(
            scope, 0.0
        )


@dataclass(frozen=True)
class FaultJob:
    """A job of the simulation: `full_workers` workers of `gpus_per_worker` GPUs each."""

    name: str
    arrival_s: float
    full_workers: int
    gpus_per_worker: int
    work_s: float
    """Run time at full size."""
    min_workers: int
    large: bool = False
    """Counted in the large jobs' effective training time."""


@dataclass(frozen=True)
class Fault:
    time_s: float
    node: int
    gpu: int
    component: str
    scope: FaultScope


class JobState(StrEnum):
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    HUNG = "hung"
    """Hit by a fault, not yet detected: GPUs held, no progress."""
    PAUSED = "paused"
    """Reconfiguring in place (shrink or grow)."""
    DONE = "done"


@dataclass(frozen=True)
class SimRecord:
    """One entry of a run's log: a placement (`place`, `grow`, `restart`) or a `cordon`."""

    kind: str
    time_s: float
    job: str = ""
    workers: tuple[tuple[int, tuple[int, ...]], ...] = ()
    """(node, GPUs) per worker placed; for a cordon, the GPUs taken out."""
    total_workers: int = 0
    """Workers the job holds after the placement."""
    until_s: float = 0.0
    """End of a cordon."""


@dataclass
class _Job:
    spec: FaultJob
    state: JobState = JobState.QUEUED
    workers: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    progress_s: float = 0.0
    checkpoint_s: float = 0.0
    since_checkpoint_s: float = 0.0
    recovering_since_s: float | None = None
    ready_s: float = 0.0
    """Earliest time it may be placed again (the restart budget's backoff)."""
    after_pause: RecoveryKind | None = None

    @property
    def rate(self) -> float:
        return len(self.workers) / self.spec.full_workers if self.state is JobState.RUNNING else 0

    @property
    def gpus(self) -> int:
        return len(self.workers) * self.spec.gpus_per_worker

    def shape(self) -> GangShape:
        return GangShape(len(self.workers), self.spec.full_workers, self.spec.min_workers)


@dataclass
class FaultSimResult:
    """Totals of one run."""

    policy: str
    allocated_gpu_h: float
    useful_gpu_h: float
    rollback_gpu_h: float
    faults: int
    faults_hitting_jobs: int
    restarts: int
    shrinks: int
    grows: int
    recovery_times_s: list[float]
    large_effective_pct: list[float]
    cordoned_gpu_h: float
    jobs_done: int

    @property
    def lost_gpu_h(self) -> float:
        return self.allocated_gpu_h - self.useful_gpu_h

    @property
    def goodput_pct(self) -> float:
        return 100.0 * self.useful_gpu_h / self.allocated_gpu_h if self.allocated_gpu_h else 0.0


def draw_faults(
    config: FaultSimConfig, catalog: FailureCatalog, rng: np.random.Generator
) -> list[Fault]:
    """Poisson faults over every GPU for the whole run, causes drawn from `catalog`."""
    gpus = config.nodes * config.gpus_per_node
    expected = config.failures_per_gpu_day * gpus * config.days
    count = int(rng.poisson(expected))
    times = np.sort(rng.uniform(0.0, config.days * DAY_S, size=count))
    cells = rng.integers(0, gpus, size=count)
    causes = catalog.sample(rng, count)
    return [
        Fault(float(t), int(c) // config.gpus_per_node, int(c) % config.gpus_per_node,
              cause.component, cause.scope)
        for t, c, cause in zip(times, cells, causes, strict=True)
    ]  # fmt: skip


class FaultSimulation:
    """One run of `jobs` under `faults` with `policy`; call `run()` once."""

    def __init__(
        self,
        config: FaultSimConfig,
        jobs: Sequence[FaultJob],
        faults: Sequence[Fault],
        policy: RecoveryPolicy,
        name: str,
    ) -> None:
        for job in jobs:
            if job.gpus_per_worker > config.gpus_per_node:
                raise ValueError(f"job {job.name}: a worker needs more GPUs than a node has")
        self.config = config
        self.policy = policy
        self.name = name
        self.jobs = [_Job(spec) for spec in sorted(jobs, key=lambda j: j.arrival_s)]
        self._active: set[int] = set()
        """Jobs holding GPUs (not queued, not done)."""
        self._elastic = [
            i for i, job in enumerate(self.jobs) if job.spec.min_workers < job.spec.full_workers
        ]
        self.faults = list(faults)
        shape = (config.nodes, config.gpus_per_node)
        self.owner = np.full(shape, -1, dtype=np.int64)  # job index per GPU
        self.cordoned_until = np.zeros(shape)
        self.budget = RestartBudget(policy)
        self.now_s = 0.0
        self.restart_queue: deque[int] = deque()
        self.arrival_queue: deque[int] = deque()
        self.loop = EventLoop(
            EventQueue(SAME_PRIORITY),
            handlers={
                EventKind.ARRIVAL: lambda event: self.arrival_queue.append(event.subject),
                EventKind.FAULT: lambda event: self._fault(self.faults[event.subject]),
                EventKind.WAKE: lambda event: self._wake(event.subject),
                EventKind.DEPARTURE: lambda event: self._finish(event.subject),
                EventKind.RETRY: lambda event: None,
            },
            before_event=lambda event: self._advance(event.time_s),
            after_event=lambda event: self._schedule(),
            on_stale=self._stale,
        )
        """Events at equal times in push order; a job's wake and finish go stale when its
        state changes (`_set`)."""
        self.allocated_gpu_s = 0.0
        self.rollback_gpu_s = 0.0
        self.cordoned_gpu_s = 0.0
        self.restarts = self.shrinks = self.grows = self.hits = 0
        self.recovery_times_s: list[float] = []
        self.log: list[SimRecord] = []
        """Every placement and cordon, in time order (for checks and reports)."""

    # -- events ---------------------------------------------------------------------------
    def run(self) -> FaultSimResult:
        """Simulate until the configured end and return the totals."""
        end_s = self.config.days * DAY_S
        queue = self.loop.queue
        for index, job in enumerate(self.jobs):
            queue.push(job.spec.arrival_s, EventKind.ARRIVAL, index)
        for index, fault in enumerate(self.faults):
            queue.push(fault.time_s, EventKind.FAULT, index)
        self.loop.run(until_s=end_s)
        self._advance(end_s)
        return self._result()

    def _stale(self, event: Event) -> None:
        """A superseded finish still gets a scheduling pass, a superseded wake does not (as
        the published figures were made; a pass matters since cordons end without an event)."""
        if event.kind is EventKind.DEPARTURE:
            self._schedule()

    def _advance(self, time_s: float) -> None:
        dt = time_s - self.now_s
        if dt <= 0:
            return
        interval = self.config.checkpoint_interval_s
        for index in self._active:
            job = self.jobs[index]
            self.allocated_gpu_s += job.gpus * dt
            if job.state is not JobState.RUNNING:
                continue
            total = job.since_checkpoint_s + dt
            if total >= interval:
                remainder = math.fmod(total, interval)
                job.checkpoint_s = job.progress_s + job.rate * (dt - remainder)
                job.since_checkpoint_s = remainder
            else:
                job.since_checkpoint_s = total
            job.progress_s += job.rate * dt
        if self.cordoned_until.max() > self.now_s:
            self.cordoned_gpu_s += float(np.clip(self.cordoned_until - self.now_s, 0, dt).sum())
        self.now_s = time_s

    # -- state changes --------------------------------------------------------------------
    def _set(self, index: int, state: JobState, until_s: float | None = None) -> None:
        job = self.jobs[index]
        job.state = state
        queue = self.loop.queue
        queue.supersede(index)
        if state in (JobState.QUEUED, JobState.DONE):
            self._active.discard(index)
        else:
            self._active.add(index)
        if until_s is not None:
            queue.push(until_s, EventKind.WAKE, index, guard=True)
        if state is JobState.RUNNING:
            if job.recovering_since_s is not None:
                self.recovery_times_s.append(self.now_s - job.recovering_since_s)
                job.recovering_since_s = None
            left_s = (job.spec.work_s - job.progress_s) / job.rate
            queue.push(self.now_s + left_s, EventKind.DEPARTURE, index, guard=True)

    def _wake(self, index: int) -> None:
        job = self.jobs[index]
        if job.state is JobState.HUNG:
            self._release(index)
            job.progress_s = job.checkpoint_s
            job.since_checkpoint_s = 0.0
            job.ready_s = self.budget.next_allowed_s(job.spec.name, self.now_s)
            self._set(index, JobState.QUEUED)
            self.restart_queue.append(index)
        elif job.state in (JobState.STARTING, JobState.PAUSED):
            self._set(index, JobState.RUNNING)

    def _finish(self, index: int) -> None:
        self.jobs[index].progress_s = self.jobs[index].spec.work_s
        self._release(index)
        self._set(index, JobState.DONE)

    def _release(self, index: int) -> None:
        """Free every GPU of the job."""
        job = self.jobs[index]
        for node, gpus in job.workers:
            self.owner[node, list(gpus)] = -1
        job.workers = []

    def _drop_hit_workers(self, index: int) -> None:
        """Free the workers on cordoned GPUs; the others keep running."""
        job = self.jobs[index]
        kept = []
        for worker in job.workers:
            if self._worker_hit(worker):
                self.owner[worker[0], list(worker[1])] = -1
            else:
                kept.append(worker)
        job.workers = kept

    def _worker_hit(self, worker: tuple[int, tuple[int, ...]]) -> bool:
        node, gpus = worker
        return bool((self.cordoned_until[node, list(gpus)] > self.now_s).any())

    def _fault(self, fault: Fault) -> None:
        isolation = isolation_for(fault.scope, fault.node, fault.gpu, self.policy)
        repair_until = self.now_s + self.config.repair_s(fault.scope)
        for node in isolation.nodes:
            self.cordoned_until[node] = np.maximum(self.cordoned_until[node], repair_until)
        for node, gpu in isolation.gpus:
            self.cordoned_until[node, gpu] = max(self.cordoned_until[node, gpu], repair_until)
        taken = [(n, tuple(range(self.config.gpus_per_node))) for n in sorted(isolation.nodes)]
        taken += [(n, (g,)) for n, g in sorted(isolation.gpus)]
        if taken:
            self.log.append(
                SimRecord("cordon", self.now_s, workers=tuple(taken), until_s=repair_until)
            )
        if fault.scope is FaultScope.JOB:
            hit = {int(self.owner[fault.node, fault.gpu])} - {-1}
        else:
            cells = [(n, g) for n in isolation.nodes for g in range(self.config.gpus_per_node)]
            cells += list(isolation.gpus)
            hit = {int(self.owner[n, g]) for n, g in cells} - {-1}
        for index in sorted(hit):
            self._hit(index, fault.scope)

    def _hit(self, index: int, scope: FaultScope) -> None:
        job = self.jobs[index]
        if job.state in (JobState.QUEUED, JobState.DONE, JobState.HUNG):
            return
        self.hits += 1
        lost = sum(1 for w in job.workers if self._worker_hit(w))
        kind = recovery_for(scope, job.shape(), lost, self.policy)
        if job.recovering_since_s is None:
            job.recovering_since_s = self.now_s
        if kind is RecoveryKind.SHRINK:
            self.shrinks += 1
            self._drop_hit_workers(index)
            pause = self.config.detection_delay_s + self.config.reconfigure_s
            self._set(index, JobState.PAUSED, self.now_s + pause)
            return
        self.restarts += 1
        self.rollback_gpu_s += (
            (job.progress_s - job.checkpoint_s) * job.spec.full_workers * (job.spec.gpus_per_worker)
        )
        self._set(index, JobState.HUNG, self.now_s + self.config.detection_delay_s)

    # -- placement ------------------------------------------------------------------------
    def _free_slots(self, gpus_per_worker: int) -> list[tuple[int, tuple[int, ...]]]:
        """One candidate worker per fitting slot: nodes with the fewest free GPUs first."""
        healthy_free = (self.owner < 0) & (self.cordoned_until <= self.now_s)
        counts = healthy_free.sum(axis=1)
        fitting = np.flatnonzero(counts >= gpus_per_worker)
        slots = []
        for node in fitting[np.argsort(counts[fitting], kind="stable")]:
            free = list(np.flatnonzero(healthy_free[node]))
            while len(free) >= gpus_per_worker:
                slots.append((int(node), tuple(int(g) for g in free[:gpus_per_worker])))
                free = free[gpus_per_worker:]
        return slots

    def _place(
        self, index: int, workers: int, slots: list[tuple[int, tuple[int, ...]]], kind: str
    ) -> None:
        job = self.jobs[index]
        for node, gpus in slots[:workers]:
            self.owner[node, list(gpus)] = index
            job.workers.append((node, gpus))
        record = SimRecord(
            kind, self.now_s, job.spec.name, tuple(slots[:workers]), len(job.workers)
        )
        self.log.append(record)

    def _schedule(self) -> None:
        for queue, restart in ((self.restart_queue, True), (self.arrival_queue, False)):
            while queue:
                index = queue[0]
                job = self.jobs[index]
                if job.ready_s > self.now_s:
                    self.loop.queue.push(job.ready_s, EventKind.RETRY)
                    return
                slots = self._free_slots(job.spec.gpus_per_worker)
                shape = GangShape(0, job.spec.full_workers, job.spec.min_workers)
                workers = restart_workers(shape, len(slots), self.policy)
                if workers is None:
                    return  # FIFO: the head waits, nothing behind it jumps
                queue.popleft()
                self._place(index, workers, slots, "restart" if restart else "place")
                if restart:
                    self.budget.record(job.spec.name, self.now_s)
                self._set(index, JobState.STARTING, self.now_s + self.config.restart_cost_s)
        self._grow()

    def _grow(self) -> None:
        if not self.policy.shrink:
            return
        for index in self._elastic:
            job = self.jobs[index]
            missing = job.spec.full_workers - len(job.workers)
            if job.state is not JobState.RUNNING or missing <= 0:
                continue
            if self.budget.next_allowed_s(job.spec.name, self.now_s) > self.now_s:
                continue
            slots = self._free_slots(job.spec.gpus_per_worker)
            if not slots:
                continue
            self.grows += 1
            self.budget.record(job.spec.name, self.now_s)
            self._place(index, min(missing, len(slots)), slots, "grow")
            self._set(index, JobState.PAUSED, self.now_s + self.config.reconfigure_s)

    def _result(self) -> FaultSimResult:
        for job in self.jobs:
            if job.state is JobState.HUNG:  # still undetected at the end: it will roll back
                job.progress_s = job.checkpoint_s
        useful_s = sum(
            j.progress_s * j.spec.full_workers * j.spec.gpus_per_worker for j in self.jobs
        )
        end_s = self.config.days * DAY_S
        effective = [
            100.0 * j.progress_s / (end_s - j.spec.arrival_s)
            for j in self.jobs
            if j.spec.large and j.spec.arrival_s < end_s
        ]
        return FaultSimResult(
            policy=self.name,
            allocated_gpu_h=self.allocated_gpu_s / 3600,
            useful_gpu_h=useful_s / 3600,
            rollback_gpu_h=self.rollback_gpu_s / 3600,
            faults=len([f for f in self.faults if f.time_s <= end_s]),
            faults_hitting_jobs=self.hits,
            restarts=self.restarts,
            shrinks=self.shrinks,
            grows=self.grows,
            recovery_times_s=self.recovery_times_s,
            large_effective_pct=effective,
            cordoned_gpu_h=self.cordoned_gpu_s / 3600,
            jobs_done=sum(1 for j in self.jobs if j.state is JobState.DONE),
        )


def simulate_faults(
    config: FaultSimConfig,
    jobs: Sequence[FaultJob],
    policy: RecoveryPolicy,
    name: str,
    seed: int,
    catalog: FailureCatalog | None = None,
) -> FaultSimResult:
    """One run with faults drawn from `seed` (the same seed: the same faults for any policy)."""
    faults = draw_faults(config, catalog or load_failure_catalog(), np.random.default_rng(seed))
    return FaultSimulation(config, jobs, faults, policy, name).run()
