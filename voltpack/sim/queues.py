"""A discrete-event queue simulator that drives the core's scheduling session (`session.decide`).

Jobs (gangs of pods, each in a queue, with a priority, a preemptible flag and a duration)
arrive; every scheduling round (a fixed period of simulated time, run only while there is work
waiting) the simulator builds the session's input as the operator does (`PendingWork` oldest
first, `SessionQueues` with the running gangs, the queue tree, the policy's ordering and
preemption rules, the time), calls `decide`, and applies the plan: evicted gangs are requeued
(they restart from scratch; the GPU-hours they had run are counted as lost), an elastic gang
shrunk by preemption runs on without the pods it gave up (those wait as a gang of their own
and rejoin it), placed gangs start and depart after their duration.

The strategy, its tie-break ranks and the decision generator are built from the policy and
the seed exactly as the operator builds them, so one scenario gives the same placements here
and through the operator (`tests/integration/test_queue_sim_matches_operator.py`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from voltpack.model.cluster import MILLI_PER_GPU, Node
from voltpack.model.decision import Placement
from voltpack.model.resources.queue import ANY_GPU_MODEL, QueueSpec
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.work import Eviction, PendingWork, RunningGang
from voltpack.model.workload import Pod, PodGroup
from voltpack.policies.fair_share import make_ordering
from voltpack.policies.registry import make_strategy
from voltpack.policies.schema import PolicyFile
from voltpack.scheduler.placement import Scheduler
from voltpack.scheduler.preemption import PreemptionRules
from voltpack.scheduler.queues import QueueTree
from voltpack.scheduler.session import SessionQueues, decide
from voltpack.sim.events import Event, EventKind, EventLoop

"""Event kinds, in the order they are handled at one instant."""


@dataclass(frozen=True)
class QueueJob:
    """A job: a gang of pods in a queue that runs `duration_s` once placed whole."""

    name: str
    queue: str
    pods: tuple[Pod, ...]
    duration_s: float
    arrival_s: float = 0.0
    priority: int = 0
    preemptible: bool = False
    min_pods: int | None = None
    """Elastic: preemption may shrink it to this many pods; None: evicted whole."""

    @classmethod
    def gang(
        cls, name: str, queue: str, workers: int, gpus_per_worker: int, duration_s: float,
        gpu_models: tuple[str, ...] = (), arrival_s: float = 0.0, priority: int = 0,
        preemptible: bool = False, min_pods: int | None = None,
    ) -> QueueJob:  # fmt: skip
        """A job of `workers` pods named `<name>-<i>`, each with `gpus_per_worker` whole GPUs
        (of `gpu_models`; empty: any), 1 CPU and 1 GiB."""
        pods = tuple(
            Pod(name=f"{name}-{i}", cpu_milli=1000, memory_mib=1024, num_gpu=gpus_per_worker,
                gpu_milli=MILLI_PER_GPU if gpus_per_worker else 0, gpu_models=gpu_models,
                priority=priority)
            for i in range(workers)
        )  # fmt: skip
        return cls(name, queue, pods, duration_s, arrival_s, priority, preemptible, min_pods)

    @property
    def gpus(self) -> float:
        """GPUs the whole job asks for."""
        return _gpus(self.pods)


@dataclass(frozen=True)
class PlacementRecord:
    """One pod placed: when, which job, on which node and GPUs."""

    time_s: float
    round: int
    job: str
    pod: str
    node: str
    gpu_indices: tuple[int, ...]


@dataclass(frozen=True)
class EvictionRecord:
    """One gang evicted (or shrunk): when, by whom, why, and the GPU-hours lost."""

    time_s: float
    round: int
    job: str
    queue: str
    by: str
    kind: str
    """'reclaim' or 'priority'."""
    pods: tuple[str, ...]
    shrink: bool
    lost_gpu_hours: float


@dataclass
class QueueFigures:
    """What one queue got over the run."""

    guaranteed_share: float
    gpu_hours: float = 0.0
    mean_share: float = 0.0
    """Time-weighted share of the cluster's GPUs over the run."""
    below_guarantee_waiting_s: float = 0.0
    """Time it held less than its guarantee while it had gangs waiting."""
    reclaimed_from: int = 0
    preempted: int = 0
    reclaims_made: int = 0
    lost_gpu_hours: float = 0.0
    completed: int = 0
    jct_p50_s: float | None = None
    jct_p95_s: float | None = None


@dataclass
class QueueSimResult:
    """Per-queue figures, the placement and eviction logs, and the run's extent."""

    queues: dict[str, QueueFigures]
    placements: list[PlacementRecord]
    evictions: list[EvictionRecord]
    makespan_s: float
    rounds: int
    unfinished: list[str] = field(default_factory=list)


@dataclass
class _Live:
    """A job that runs: its pods where they run, since when, and its departure's generation."""

    job: QueueJob
    pods: list[tuple[Pod, int, tuple[int, ...]]]
    started_s: float


class QueueSimulator:
    """Replays jobs through the core's scheduling session on `nodes`, round by round."""

    def __init__(
        self,
        nodes: Sequence[Node],
        queues: Mapping[str, QueueSpec],
        policy: PolicyFile,
        seed: int = 0,
        round_s: float = 10.0,
    ) -> None:
        if round_s <= 0:
            raise ValueError(f"round_s={round_s}: the round period must be positive")
        self.nodes = sorted(nodes, key=lambda n: n.name)  # the operator's snapshot order
        self.tree = QueueTree.build(dict(queues))
        queueing = policy.spec.queueing
        self.rules = PreemptionRules.of(queueing)
        self.ordering = make_ordering(queueing.ordering, queueing.params)
        strategy = make_strategy(policy.spec.scoring.strategy, policy.spec.scoring.params)
        self.scheduler = Scheduler.with_random_ranks(
            strategy, len(self.nodes), np.random.default_rng(seed)
        )
        self.rng = np.random.default_rng(seed)
        self.round_s = round_s
        self.capacity_gpus = float(sum(n.gpu_count for n in self.nodes))
        self.guarantees = {name: _guaranteed_gpus(spec) for name, spec in queues.items()}

    def run(self, jobs: Sequence[QueueJob]) -> QueueSimResult:
        """Every job to completion (or until no round can place anything more)."""
        return _Run(self, jobs).execute()


def _gpus(pods: Iterable[Pod]) -> float:
    """GPUs `pods` hold together (a share counts as its fraction)."""
    return sum(p.num_gpu * p.gpu_milli for p in pods) / MILLI_PER_GPU


def _guaranteed_gpus(spec: QueueSpec) -> float:
    """A queue's guarantee in GPUs: its `*` entry, else the sum of its per-model entries."""
    every = [q.guaranteed for q in spec.quotas if q.gpu_model == ANY_GPU_MODEL]
    return every[0] if every else sum(q.guaranteed for q in spec.quotas)


class _Run:
    """One run's state: the event heap, what waits, what runs, and the figures so far."""

    def __init__(self, sim: QueueSimulator, jobs: Sequence[QueueJob]) -> None:
        self.sim = sim
        self.jobs = {job.name: job for job in jobs}
        if len(self.jobs) != len(jobs):
            raise ValueError("jobs: two jobs share a name; every job needs its own")
        self.names = list(self.jobs)
        """Job -> its index, the subject of its events (`events.py`)."""
        self.index = {name: i for i, name in enumerate(self.names)}
        self.loop = EventLoop(before_event=self._before_event)
        self.loop.handlers = {
            EventKind.ARRIVAL: self._arrive,
            EventKind.DEPARTURE: self._depart,
            EventKind.ROUND: self._on_round,
        }
        self.waiting: dict[str, tuple[float, tuple[Pod, ...]]] = {}
        """Job -> (queued at, the pods that wait)."""
        self.live: dict[str, _Live] = {}
        self.round_due: float | None = None
        self.rounds = 0
        self.observed: set[str] = set()
        self.last_s = 0.0
        self.done_s: dict[str, float] = {}
        self.figures = {
            q: QueueFigures(guaranteed_share=g / max(sim.capacity_gpus, 1.0))
            for q, g in sim.guarantees.items()
        }
        self.placements: list[PlacementRecord] = []
        self.evictions: list[EvictionRecord] = []
        for job in jobs:
            self.figures.setdefault(job.queue, QueueFigures(guaranteed_share=0.0))
            self.loop.queue.push(float(job.arrival_s), EventKind.ARRIVAL, self.index[job.name])

    def execute(self) -> QueueSimResult:
        """The event loop (`events.py`): at each instant departures, then arrivals, then a
        round; rounds repeat every period while gangs wait and something runs (that may free
        GPUs). An evicted gang's departure is stale (its subject superseded)."""
        self.loop.run()
        return self._result()

    def _before_event(self, event: Event) -> None:
        self._account(self.loop.now_s)

    def _arrive(self, event: Event) -> None:
        name = self.names[event.subject]
        self.waiting[name] = (event.time_s, self.jobs[name].pods)
        self._round_at(event.time_s)

    def _depart(self, event: Event) -> None:
        name = self.names[event.subject]
        del self.live[name]
        self.done_s[name] = event.time_s

    def _on_round(self, event: Event) -> None:
        self.round_due = None
        self._round(event.time_s)
        if self.waiting and self.live:
            self._round_at(event.time_s + self.sim.round_s)

    def _round_at(self, time_s: float) -> None:
        """A round at the first period boundary at or after `time_s` (one at a time)."""
        due = math.ceil(time_s / self.sim.round_s - 1e-9) * self.sim.round_s
        if self.round_due is None or due < self.round_due:
            self.round_due = due
            self.loop.queue.push(due, EventKind.ROUND)

    def _round(self, now: float) -> None:
        """Build the session's input as the operator does, decide, apply the plan."""
        snapshot = ClusterSnapshot.from_nodes(self.sim.nodes)
        running = []
        for name in sorted(self.live):
            live = self.live[name]
            for pod, node, gpus in live.pods:
                snapshot.allocate(node, pod, gpus)
            job = live.job
            running.append(
                RunningGang(name, job.queue, job.priority, job.preemptible, live.started_s,
                            tuple(live.pods), job.min_pods)
            )  # fmt: skip
        order = sorted(self.waiting.items(), key=lambda item: (item[1][0], item[0]))
        work = PendingWork(
            groups=[PodGroup(name=n, pods=pods, min_member=len(pods)) for n, (_, pods) in order]
        )
        context = SessionQueues(
            tree=self.sim.tree,
            ordering=self.sim.ordering,
            rules=self.sim.rules,
            running=running,
            gangs={n: (self.jobs[n].queue, self.jobs[n].preemptible) for n, _ in order},
            now_s=now,
        )
        plan = decide(self.sim.scheduler, snapshot, work, self.sim.rng, self.observed, context)
        for eviction in plan.evictions:
            self._evict(eviction, now)
        for decision in plan.decisions:
            if decision.placed:
                self._start(decision.subject, decision.placements, snapshot, now)
        self.rounds += 1

    def _start(
        self, name: str, placements: Sequence[Placement], snapshot: ClusterSnapshot, now: float
    ) -> None:
        job = self.jobs[name]
        pods = {p.name: p for p in self.waiting.pop(name)[1]}
        placed = [(pods[p.pod], snapshot.node_index(p.node), p.gpu_indices) for p in placements]
        self.placements.extend(
            PlacementRecord(now, self.rounds, name, p.pod, p.node, p.gpu_indices)
            for p in placements
        )
        joined = self.live.get(name)
        if joined is not None:  # pods an elastic gang gave up rejoin it
            joined.pods.extend(placed)
            return
        self.live[name] = _Live(job, placed, now)
        self.loop.reschedule(now + job.duration_s, EventKind.DEPARTURE, self.index[name])

    def _evict(self, eviction: Eviction, now: float) -> None:
        """Requeue the victim (whole: from scratch; shrunk: the pods it gave up)."""
        gang = eviction.gang
        live = self.live[gang.name]
        gone = {pod.name for pod, _, _ in gang.pods}
        lost = _gpus(pod for pod, _, _ in gang.pods) * (now - live.started_s) / 3600.0
        kind = eviction.kind
        self.evictions.append(
            EvictionRecord(now, self.rounds, gang.name, gang.queue, eviction.by, kind,
                           tuple(sorted(gone)), eviction.shrink, lost)
        )  # fmt: skip
        victim = self.figures[gang.queue]
        victim.lost_gpu_hours += lost
        if kind == "reclaim":
            victim.reclaimed_from += 1
            self.figures[self.jobs[eviction.by].queue].reclaims_made += 1
        else:
            victim.preempted += 1
        if eviction.shrink:
            live.pods = [entry for entry in live.pods if entry[0].name not in gone]
            self.waiting[gang.name] = (now, tuple(pod for pod, _, _ in gang.pods))
            return
        del self.live[gang.name]
        self.loop.queue.supersede(self.index[gang.name])  # its departure goes stale
        self.waiting[gang.name] = (now, self.jobs[gang.name].pods)

    # --- figures --------------------------------------------------------------------------

    def _account(self, now: float) -> None:
        """Integrate each queue's usage and time below its guarantee up to `now`."""
        span = now - self.last_s
        if span > 0:
            used = {q: 0.0 for q in self.figures}
            for live in self.live.values():
                used[live.job.queue] += _gpus(pod for pod, _, _ in live.pods)
            waiting = {self.jobs[n].queue for n in self.waiting}
            for queue, figures in self.figures.items():
                gpus = used[queue]
                figures.gpu_hours += gpus * span / 3600.0
                guarantee = self.sim.guarantees.get(queue, 0.0)
                if queue in waiting and gpus < guarantee - 1e-9:
                    figures.below_guarantee_waiting_s += span
        self.last_s = max(self.last_s, now)

    def _result(self) -> QueueSimResult:
        makespan = self.last_s
        for queue, figures in self.figures.items():
            if makespan > 0 and self.sim.capacity_gpus > 0:
                figures.mean_share = (
                    figures.gpu_hours * 3600.0 / (makespan * self.sim.capacity_gpus)
                )
            jcts = sorted(
                done - self.jobs[n].arrival_s
                for n, done in self.done_s.items()
                if self.jobs[n].queue == queue
            )
            figures.completed = len(jcts)
            if jcts:
                figures.jct_p50_s = float(np.percentile(jcts, 50))
                figures.jct_p95_s = float(np.percentile(jcts, 95))
        unfinished = sorted(set(self.jobs) - set(self.done_s))
        return QueueSimResult(
            self.figures, self.placements, self.evictions, makespan, self.rounds, unfinished
        )
