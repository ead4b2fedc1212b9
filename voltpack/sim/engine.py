"""A discrete-event simulator: pod arrivals and departures drive the scheduling core.

The engine owns a snapshot; at each arrival it asks the scheduler for a decision and commits
it, at each departure it gives the pod's resources back. Pods that do not fit wait in a pending
queue and are retried, oldest first, whenever resources are released, unless `retry_pending`
is off (the FGD experiment protocol drops a pod that fails).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from voltpack.model.decision import Decision
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.workload import Pod
from voltpack.scheduler.cycle import Scheduler


class EventKind(IntEnum):
    """Departures sort before arrivals at the same instant, so freed resources are usable."""

    DEPARTURE = 0
    ARRIVAL = 1


@dataclass(frozen=True)
class SimEvent:
    """What happened at one step: the event, and the decision when it was an arrival."""

    time_s: float
    kind: EventKind
    pod: Pod
    decision: Decision | None
    touched_nodes: tuple[int, ...]


Observer = Callable[[ClusterSnapshot, SimEvent], None]


@dataclass
class _Run:
    """Mutable state of one `Simulator.run`."""

    pods: Sequence[Pod]
    with_departures: bool
    queue: list[tuple[float, int, int, int]] = field(default_factory=list)
    running: dict[int, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    pending: list[int] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    sequence: itertools.count[int] = field(default_factory=itertools.count)


@dataclass
class Simulator:
    """Replays pods through a scheduler on a snapshot; observers see every step."""

    snapshot: ClusterSnapshot
    scheduler: Scheduler
    rng: np.random.Generator
    retry_pending: bool = True
    observers: list[Observer] = field(default_factory=list)

    def run(self, pods: Sequence[Pod], with_departures: bool = True) -> list[Decision]:
        """Simulate every pod's arrival (and departure, when it has one); return the decisions.

        Arrivals at the same time keep the order of `pods`.
        """
        run = _Run(pods=pods, with_departures=with_departures)
        for index, pod in enumerate(pods):
            run.queue.append((pod.creation_time_s, EventKind.ARRIVAL, next(run.sequence), index))
        heapq.heapify(run.queue)
        while run.queue:
            time_s, kind, _, index = heapq.heappop(run.queue)
            if kind == EventKind.DEPARTURE:
                node, gpus = run.running.pop(index)
                self.snapshot.release(node, pods[index], gpus)
                self._notify(SimEvent(time_s, EventKind.DEPARTURE, pods[index], None, (node,)))
                if self.retry_pending and run.pending:
                    waiting, run.pending = run.pending, []
                    for waiting_index in waiting:
                        self._arrive(run, waiting_index, time_s, retry=True)
            else:
                self._arrive(run, index, time_s, retry=False)
        return run.decisions

    def _arrive(self, run: _Run, index: int, time_s: float, *, retry: bool) -> None:
        pod = run.pods[index]
        if not retry:
            self.scheduler.observe_arrival(pod)
        decision = self.scheduler.schedule_pod(self.snapshot, pod, self.rng)
        if not decision.placed:
            if self.retry_pending:
                run.pending.append(index)
            if not retry:
                run.decisions.append(decision)
                self._notify(SimEvent(time_s, EventKind.ARRIVAL, pod, decision, ()))
            return
        placement = decision.placements[0]
        node = self.snapshot.node_index(placement.node)
        run.running[index] = (node, placement.gpu_indices)
        run.decisions.append(decision)
        self._notify(SimEvent(time_s, EventKind.ARRIVAL, pod, decision, (node,)))
        if run.with_departures and pod.deletion_time_s is not None:
            departure_s = max(pod.deletion_time_s, time_s)
            heapq.heappush(run.queue, (departure_s, EventKind.DEPARTURE, next(run.sequence), index))

    def _notify(self, event: SimEvent) -> None:
        for observer in self.observers:
            observer(self.snapshot, event)
