"""A discrete-event simulator: pod arrivals and departures drive the scheduling core.

The engine owns a snapshot; at each arrival it asks the scheduler for a decision and commits
it, at each departure it gives the pod's resources back. Pods that do not fit wait in a pending
queue and are retried, oldest first, whenever resources are released, unless `retry_pending`
is off (the FGD experiment protocol drops a pod that fails). Arrivals and departures are
handlers on the shared event loop (`voltpack.sim.events`), the retry its after-event hook.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from voltpack.model.decision import Decision
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.workload import Pod
from voltpack.scheduler.placement import Scheduler
from voltpack.sim.events import Event, EventKind, EventLoop

__all__ = ["EventKind", "Observer", "SimEvent", "Simulator"]


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
    loop: EventLoop = field(default_factory=EventLoop)
    running: dict[int, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    pending: list[int] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)


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
        loop = run.loop
        for index, pod in enumerate(pods):
            loop.queue.push(pod.creation_time_s, EventKind.ARRIVAL, index)
        loop.handlers[EventKind.ARRIVAL] = lambda event: self._arrive(
            run, event.subject, event.time_s, retry=False
        )
        loop.handlers[EventKind.DEPARTURE] = lambda event: self._depart(run, event)
        if self.retry_pending:
            loop.after_event = lambda event: self._retry(run, event)
        loop.run()
        return run.decisions

    def _depart(self, run: _Run, event: Event) -> None:
        node, gpus = run.running.pop(event.subject)
        pod = run.pods[event.subject]
        self.snapshot.release(node, pod, gpus)
        self._notify(SimEvent(event.time_s, EventKind.DEPARTURE, pod, None, (node,)))

    def _retry(self, run: _Run, event: Event) -> None:
        """After a departure, every pending pod is tried again, oldest first."""
        if event.kind is EventKind.DEPARTURE and run.pending:
            waiting, run.pending = run.pending, []
            for waiting_index in waiting:
                self._arrive(run, waiting_index, event.time_s, retry=True)

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
            run.loop.queue.push(departure_s, EventKind.DEPARTURE, index)

    def _notify(self, event: SimEvent) -> None:
        for observer in self.observers:
            observer(self.snapshot, event)
