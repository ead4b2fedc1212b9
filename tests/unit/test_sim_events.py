"""The simulators' event engine: order at equal times, stale events, rounds, rate changes."""

from __future__ import annotations

import pytest

from voltpack.sim.events import (
    SAME_PRIORITY,
    Event,
    EventKind,
    EventLoop,
    EventQueue,
    Progress,
)


def recording_loop(queue: EventQueue | None = None) -> tuple[EventLoop, list[tuple[float, str]]]:
    """A loop whose every handler logs (time, kind name[:subject])."""
    seen: list[tuple[float, str]] = []
    loop = EventLoop(queue if queue is not None else EventQueue())
    for kind in EventKind:
        loop.handlers[kind] = lambda event: seen.append(
            (event.time_s, f"{event.kind.name}:{event.subject}")
        )
    return loop, seen


def test_departures_come_before_arrivals_and_rounds_last_at_one_instant() -> None:
    loop, seen = recording_loop()
    loop.queue.push(5.0, EventKind.ROUND)
    loop.queue.push(5.0, EventKind.ARRIVAL, 1)
    loop.queue.push(5.0, EventKind.DEPARTURE, 2)
    loop.queue.push(1.0, EventKind.ARRIVAL, 3)
    loop.run()
    assert seen == [(1.0, "ARRIVAL:3"), (5.0, "DEPARTURE:2"), (5.0, "ARRIVAL:1"), (5.0, "ROUND:-1")]


def test_equal_times_and_kinds_keep_push_order_and_same_priority_ignores_kinds() -> None:
    loop, seen = recording_loop()
    for subject in (4, 1, 3):
        loop.queue.push(2.0, EventKind.ARRIVAL, subject)
    loop.run()
    assert [name for _, name in seen] == ["ARRIVAL:4", "ARRIVAL:1", "ARRIVAL:3"]

    fifo, seen = recording_loop(EventQueue(SAME_PRIORITY))
    fifo.queue.push(2.0, EventKind.ARRIVAL, 1)
    fifo.queue.push(2.0, EventKind.DEPARTURE, 2)
    fifo.run()
    assert [name for _, name in seen] == ["ARRIVAL:1", "DEPARTURE:2"]


def test_superseded_and_cancelled_events_skip_their_handler() -> None:
    loop, seen = recording_loop()
    stale: list[str] = []
    loop.on_stale = lambda event: stale.append(f"{event.kind.name}:{event.subject}")
    loop.queue.push(1.0, EventKind.WAKE, 7, guard=True)
    loop.queue.push(2.0, EventKind.DEPARTURE, 7, guard=True)
    loop.queue.push(3.0, EventKind.ARRIVAL, 7)  # unguarded: never stale
    loop.queue.supersede(7)
    loop.queue.push(4.0, EventKind.WAKE, 7, guard=True)  # the subject's current version
    other = loop.queue.push(5.0, EventKind.WAKE, 8, guard=True)
    loop.queue.cancel(other)
    loop.run()
    assert seen == [(3.0, "ARRIVAL:7"), (4.0, "WAKE:7")]
    assert stale == ["WAKE:7", "DEPARTURE:7", "WAKE:8"]


def test_hooks_run_before_and_after_each_event_and_after_each_instant() -> None:
    calls: list[str] = []
    loop = EventLoop()
    loop.handlers[EventKind.ARRIVAL] = lambda event: calls.append(f"arrive {event.time_s}")
    loop.before_event = lambda event: calls.append(f"before {event.time_s}")
    loop.after_event = lambda event: calls.append(f"after {event.time_s}")

    def instant(now_s: float) -> None:
        calls.append(f"instant {now_s}")
        if now_s == 1.0 and "arrive 1.0" in calls and calls.count("instant 1.0") == 1:
            loop.queue.push(now_s, EventKind.ARRIVAL)  # at this very time: a new instant

    loop.after_instant = instant
    loop.queue.push(1.0, EventKind.ARRIVAL)
    loop.queue.push(1.0, EventKind.ARRIVAL)
    loop.run()
    one = ["before 1.0", "arrive 1.0", "after 1.0"]
    assert calls == [*one, *one, "instant 1.0", *one, "instant 1.0"]


def test_run_stops_at_the_horizon_and_an_unhandled_kind_is_named() -> None:
    loop, seen = recording_loop()
    loop.queue.push(1.0, EventKind.ARRIVAL)
    loop.queue.push(10.0, EventKind.ARRIVAL)
    loop.run(until_s=5.0)
    assert seen == [(1.0, "ARRIVAL:-1")] and len(loop.queue) == 1

    bare = EventLoop()
    bare.queue.push(0.0, EventKind.FAULT)
    with pytest.raises(ValueError, match="no handler for FAULT"):
        bare.run()


def test_a_round_every_period_while_other_events_wait_or_up_to_the_horizon() -> None:
    loop, seen = recording_loop()
    loop.every(10.0)
    loop.queue.push(35.0, EventKind.ARRIVAL)
    loop.run()
    assert seen == [
        (0.0, "ROUND:-1"),
        (10.0, "ROUND:-1"),
        (20.0, "ROUND:-1"),
        (30.0, "ROUND:-1"),
        (35.0, "ARRIVAL:-1"),
        (40.0, "ROUND:-1"),
    ]

    bounded, seen = recording_loop()
    bounded.every(10.0, first_s=5.0)
    bounded.run(until_s=30.0)
    assert [time_s for time_s, _ in seen] == [5.0, 15.0, 25.0]
    with pytest.raises(ValueError, match="period_s"):
        bounded.every(0.0)


def test_rate_changes_move_a_jobs_completion() -> None:
    """A job of 100 s of work at rate 1 slows to 0.5 at t=20, then speeds up to 2 at t=60:
    done 20 + 20 = 40 s of work at t=60, the other 60 s take 30 s: it ends at t=90."""
    progress = Progress(work_s=100.0)
    loop = EventLoop()
    completions: list[float] = []
    superseded: list[float] = []

    def rate_change(event: Event) -> None:
        progress.set_rate(event.time_s, event.value)
        loop.reschedule(progress.finish_s(), EventKind.DEPARTURE, event.subject)

    loop.handlers[EventKind.RATE_CHANGE] = rate_change
    loop.handlers[EventKind.DEPARTURE] = lambda event: completions.append(event.time_s)
    loop.on_stale = lambda event: superseded.append(event.time_s)
    loop.reschedule(progress.finish_s(), EventKind.DEPARTURE, 0)
    loop.queue.push(20.0, EventKind.RATE_CHANGE, 0, 0.5)
    loop.queue.push(60.0, EventKind.RATE_CHANGE, 0, 2.0)
    loop.run()
    assert completions == [90.0]
    assert superseded == [100.0, 180.0]
    progress.advance(90.0)
    assert progress.done_s == pytest.approx(100.0)
    assert Progress(work_s=1.0, rate=0.0).finish_s() == float("inf")
