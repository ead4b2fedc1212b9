"""The one discrete-event engine of the simulators: a typed event queue and a loop with hooks.

Every simulator (`engine.Simulator` for pod packing, `faults.FaultSimulation`,
`topology_training`) is a set of handlers on an `EventLoop`:

- **Order.** Events pop by time, then by the kind's priority (`DEFAULT_PRIORITY`: departures
  first, so freed resources are usable by arrivals at the same instant; rounds last, so a round
  sees everything that happened at its instant; `SAME_PRIORITY` for plain FIFO), then in the
  order they were pushed (a sequence counter): the order is total, so runs are deterministic.
- **Stale events.** An event pushed with `guard=True` belongs to its subject's current version;
  `EventQueue.supersede(subject)` makes every guarded event of that subject stale (its state
  changed: a new end time was pushed). `EventQueue.cancel(event)` drops one event. Stale events
  skip their handler.
- **Hooks.** `before_event` (every popped event within the horizon, stale ones too: advance
  clocks), a handler per kind, `after_event` (after each handled event: retry what waits),
  `after_instant` (once all events at one time are handled), `on_stale`.
- **Rounds and rate changes.** `EventLoop.every` pushes a `ROUND` every `period_s` (re-armed
  while other events are queued, or up to the horizon); `Progress` is work done at a
  piecewise-constant rate, whose `RATE_CHANGE` moves its completion (`EventLoop.reschedule`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum


class EventKind(IntEnum):
    """What happens; the value is the default order at equal times (lowest first)."""

    DEPARTURE = 0
    """A pod or job leaves (ended or completed) and frees its resources."""
    FAULT = 1
    RATE_CHANGE = 2
    """A job's progress rate changes (e.g. another job starts or ends on shared links)."""
    ARRIVAL = 3
    WAKE = 4
    """A timed state ends (a hang is detected, a start-up or a pause is over)."""
    RETRY = 5
    """Nothing but a chance to retry what waits (e.g. at the end of a backoff)."""
    ROUND = 6
    """A periodic scheduling round."""


DEFAULT_PRIORITY: Mapping[EventKind, int] = {kind: int(kind) for kind in EventKind}
SAME_PRIORITY: Mapping[EventKind, int] = dict.fromkeys(EventKind, 0)
"""Events at equal times in the order they were pushed, whatever their kind."""


@dataclass(slots=True, eq=False)
class Event:
    """One event; `subject` is the simulator's index of the pod, job or fault it is about."""

    time_s: float
    kind: EventKind
    subject: int = -1
    value: float = 0.0
    """A kind's number, e.g. the new rate of a `RATE_CHANGE`."""
    version: int | None = None
    """The subject's version when pushed (guarded events); None: never stale."""
    cancelled: bool = False


@dataclass
class EventQueue:
    """Events ordered by (time, kind priority, push order), with stale-event detection."""

    priority: Mapping[EventKind, int] = field(default_factory=lambda: DEFAULT_PRIORITY)
    _heap: list[tuple[float, int, int, Event]] = field(default_factory=list)
    _sequence: itertools.count[int] = field(default_factory=itertools.count)
    _versions: dict[int, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._heap)

    def push(
        self,
        time_s: float,
        kind: EventKind,
        subject: int = -1,
        value: float = 0.0,
        *,
        guard: bool = False,
    ) -> Event:
        """Queue an event; `guard`: it goes stale when `subject` is superseded."""
        version = self._versions.get(subject, 0) if guard else None
        event = Event(time_s, kind, subject, value, version)
        heapq.heappush(self._heap, (time_s, self.priority[kind], next(self._sequence), event))
        return event

    def peek_time_s(self) -> float:
        """Time of the next event (the queue must not be empty)."""
        return self._heap[0][0]

    def pop(self) -> Event:
        return heapq.heappop(self._heap)[3]

    def supersede(self, subject: int) -> None:
        """Every guarded event of `subject` queued so far goes stale."""
        self._versions[subject] = self._versions.get(subject, 0) + 1

    def cancel(self, event: Event) -> None:
        """Drop one queued event (it stays in the heap, skipped when popped)."""
        event.cancelled = True

    def is_stale(self, event: Event) -> bool:
        if event.cancelled:
            return True
        return event.version is not None and event.version != self._versions.get(event.subject, 0)


Handler = Callable[[Event], None]


@dataclass
class EventLoop:
    """Pops events in order and runs the hooks; see the module docstring."""

    queue: EventQueue = field(default_factory=EventQueue)
    handlers: dict[EventKind, Handler] = field(default_factory=dict)
    before_event: Handler | None = None
    after_event: Handler | None = None
    after_instant: Callable[[float], None] | None = None
    on_stale: Handler | None = None
    now_s: float = 0.0
    _round_period_s: float | None = None
    _rounds_queued: int = 0

    def every(self, period_s: float, first_s: float = 0.0) -> None:
        """A `ROUND` at `first_s` and then every `period_s` (needs a `ROUND` handler)."""
        if period_s <= 0:
            raise ValueError(f"period_s must be > 0, got {period_s}")
        self._round_period_s = period_s
        self._push_round(first_s)

    def reschedule(self, time_s: float, kind: EventKind, subject: int) -> Event:
        """Supersede `subject`'s guarded events and push its new one (e.g. a completion
        moved by a rate change)."""
        self.queue.supersede(subject)
        return self.queue.push(time_s, kind, subject, guard=True)

    def run(self, until_s: float | None = None) -> None:
        """Handle events until none is left or the next is after `until_s`."""
        queue = self.queue
        while queue and (until_s is None or queue.peek_time_s() <= until_s):
            now_s = queue.peek_time_s()
            while queue and queue.peek_time_s() == now_s:
                event = queue.pop()
                self.now_s = now_s
                if event.kind is EventKind.ROUND:
                    self._rounds_queued -= 1
                if self.before_event is not None:
                    self.before_event(event)
                if queue.is_stale(event):
                    if self.on_stale is not None:
                        self.on_stale(event)
                    continue
                handler = self.handlers.get(event.kind)
                if handler is None:
                    raise ValueError(f"no handler for {event.kind.name} events")
                handler(event)
                if event.kind is EventKind.ROUND:
                    self._rearm_round(now_s, until_s)
                if self.after_event is not None:
                    self.after_event(event)
            if self.after_instant is not None:
                self.after_instant(now_s)

    def _push_round(self, time_s: float) -> None:
        self._rounds_queued += 1
        self.queue.push(time_s, EventKind.ROUND)

    def _rearm_round(self, now_s: float, until_s: float | None) -> None:
        if self._round_period_s is None:
            return
        next_s = now_s + self._round_period_s
        others_queued = len(self.queue) > self._rounds_queued
        if (until_s is not None and next_s <= until_s) or (until_s is None and others_queued):
            self._push_round(next_s)


@dataclass
class Progress:
    """Work done at a piecewise-constant rate (work seconds per second)."""

    work_s: float
    rate: float = 1.0
    done_s: float = 0.0
    since_s: float = 0.0

    def advance(self, now_s: float) -> None:
        self.done_s += self.rate * (now_s - self.since_s)
        self.since_s = now_s

    def set_rate(self, now_s: float, rate: float) -> None:
        """Count the work done so far at the old rate, then go on at `rate`."""
        self.advance(now_s)
        self.rate = rate

    def finish_s(self) -> float:
        """When the work ends at the current rate (inf when stopped)."""
        left_s = max(self.work_s - self.done_s, 0.0)
        return self.since_s + left_s / self.rate if self.rate > 0 else float("inf")
