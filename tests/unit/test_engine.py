"""The discrete-event simulator: departures free resources, pending pods are retried."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tests.unit.builders import (
    assert_empty,
    cpu_pod,
    gpu_node,
    scheduler_for,
    snapshot_of,
    whole_pod,
)
from voltpack.model import Pod
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.sim.engine import EventKind, SimEvent, Simulator


def timed(pod: Pod, created: float, deleted: float | None) -> Pod:
    return pod.model_copy(update={"creation_time_s": created, "deletion_time_s": deleted})


@dataclass
class Recorder:
    """Observer that keeps, for every event, what happened and the free GPUs right after it."""

    steps: list[tuple[float, EventKind, str, bool | None, list[int]]] = field(default_factory=list)

    def __call__(self, snapshot: ClusterSnapshot, event: SimEvent) -> None:
        placed = None if event.decision is None else event.decision.placed
        free = snapshot.gpu_free_milli.sum(axis=1).tolist()
        self.steps.append((event.time_s, event.kind, event.pod.name, placed, free))


def simulator(snapshot: ClusterSnapshot, retry: bool = True) -> tuple[Simulator, Recorder]:
    recorder = Recorder()
    sim = Simulator(
        snapshot,
        scheduler_for("best-fit", snapshot),
        np.random.default_rng(0),
        retry_pending=retry,
        observers=[recorder],
    )
    return sim, recorder


ARRIVAL, DEPARTURE = EventKind.ARRIVAL, EventKind.DEPARTURE


def test_departure_frees_resources_at_deletion_time() -> None:
    snapshot = snapshot_of(gpu_node("n", 2, cpu=8000))
    sim, recorder = simulator(snapshot)
    pods = [
        timed(whole_pod("short", 1, cpu=3000), 0.0, 10.0),
        timed(whole_pod("long", 1, cpu=2000), 5.0, None),
    ]
    decisions = sim.run(pods)
    assert [d.placed for d in decisions] == [True, True]
    assert recorder.steps == [
        (0.0, ARRIVAL, "short", True, [1000]),
        (5.0, ARRIVAL, "long", True, [0]),
        (10.0, DEPARTURE, "short", None, [1000]),
    ]
    # "long" never leaves.
    assert snapshot.cpu_free_milli.tolist() == [6000]
    assert snapshot.gpu_free_milli.tolist() == [[1000, 0]]


def test_without_departures_nothing_is_freed() -> None:
    snapshot = snapshot_of(gpu_node("n", 2))
    sim, recorder = simulator(snapshot)
    sim.run([timed(whole_pod("w", 2), 0.0, 1.0)], with_departures=False)
    assert [step[1] for step in recorder.steps] == [ARRIVAL]
    assert snapshot.gpu_free_milli.tolist() == [[0, 0]]


def test_arrivals_are_processed_in_time_order_keeping_list_order_on_ties() -> None:
    snapshot = snapshot_of(gpu_node("n", 8))
    sim, _ = simulator(snapshot)
    pods = [
        timed(cpu_pod("c"), 3.0, None),
        timed(cpu_pod("a"), 1.0, None),
        timed(cpu_pod("b1"), 2.0, None),
        timed(cpu_pod("b2"), 2.0, None),
    ]
    assert [d.subject for d in sim.run(pods)] == ["a", "b1", "b2", "c"]


def test_a_departure_frees_resources_for_an_arrival_at_the_same_instant() -> None:
    snapshot = snapshot_of(gpu_node("n", 1))
    sim, recorder = simulator(snapshot, retry=False)
    decisions = sim.run(
        [timed(whole_pod("first", 1), 0.0, 5.0), timed(whole_pod("second", 1), 5.0, None)]
    )
    assert [d.placed for d in decisions] == [True, True]
    assert [(s[0], s[1], s[2]) for s in recorder.steps] == [
        (0.0, ARRIVAL, "first"),
        (5.0, DEPARTURE, "first"),
        (5.0, ARRIVAL, "second"),
    ]


def test_pending_pod_is_placed_after_a_departure() -> None:
    snapshot = snapshot_of(gpu_node("n", 1))
    sim, recorder = simulator(snapshot, retry=True)
    decisions = sim.run(
        [timed(whole_pod("holder", 1), 0.0, 10.0), timed(whole_pod("waiter", 1), 1.0, 50.0)]
    )
    assert [(d.subject, d.placed) for d in decisions] == [
        ("holder", True),
        ("waiter", False),
        ("waiter", True),
    ]
    assert decisions[1].reason.startswith(
        "0/1 nodes are available: 1 node(s) didn't have 1 free GPU(s)."
    )
    assert recorder.steps == [
        (0.0, ARRIVAL, "holder", True, [0]),
        (1.0, ARRIVAL, "waiter", False, [0]),
        (10.0, DEPARTURE, "holder", None, [1000]),
        (10.0, ARRIVAL, "waiter", True, [0]),
        (50.0, DEPARTURE, "waiter", None, [1000]),
    ]
    assert_empty(snapshot)


def test_pending_pods_are_retried_oldest_first() -> None:
    snapshot = snapshot_of(gpu_node("n", 2))
    sim, _ = simulator(snapshot, retry=True)
    decisions = sim.run(
        [
            timed(whole_pod("holder", 2), 0.0, 10.0),
            timed(whole_pod("older", 1), 1.0, None),
            timed(whole_pod("newer", 2), 2.0, None),
            timed(whole_pod("newest", 1), 3.0, None),
        ]
    )
    placed_after = [d.subject for d in decisions[4:] if d.placed]
    # At t=10 the two GPUs are free again: "older" goes first and takes one, so "newer" (two
    # GPUs) no longer fits and "newest" takes the other.
    assert placed_after == ["older", "newest"]
    assert snapshot.gpu_free_milli.tolist() == [[0, 0]]


def test_pod_retried_after_its_deletion_time_leaves_right_away() -> None:
    snapshot = snapshot_of(gpu_node("n", 1))
    sim, recorder = simulator(snapshot, retry=True)
    sim.run([timed(whole_pod("holder", 1), 0.0, 10.0), timed(whole_pod("late", 1), 1.0, 5.0)])
    assert [(s[0], s[1], s[2]) for s in recorder.steps[-2:]] == [
        (10.0, ARRIVAL, "late"),
        (10.0, DEPARTURE, "late"),
    ]
    assert_empty(snapshot)


def test_without_retry_a_pending_pod_stays_failed() -> None:
    snapshot = snapshot_of(gpu_node("n", 1))
    sim, recorder = simulator(snapshot, retry=False)
    decisions = sim.run(
        [timed(whole_pod("holder", 1), 0.0, 10.0), timed(whole_pod("waiter", 1), 1.0, 50.0)]
    )
    assert [(d.subject, d.placed) for d in decisions] == [("holder", True), ("waiter", False)]
    assert [(s[0], s[1], s[2]) for s in recorder.steps] == [
        (0.0, ARRIVAL, "holder"),
        (1.0, ARRIVAL, "waiter"),
        (10.0, DEPARTURE, "holder"),
    ]
    assert_empty(snapshot)


def test_pod_that_never_fits_stays_pending_without_error() -> None:
    snapshot = snapshot_of(gpu_node("n", 1))
    sim, _ = simulator(snapshot, retry=True)
    decisions = sim.run(
        [timed(whole_pod("holder", 1), 0.0, 10.0), timed(whole_pod("too-big", 4), 1.0, 20.0)]
    )
    assert [(d.subject, d.placed) for d in decisions] == [("holder", True), ("too-big", False)]
    assert_empty(snapshot)
