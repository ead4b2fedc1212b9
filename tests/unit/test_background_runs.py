"""The API's background runner keeps its bounds whatever the work does: at most `max_active`
runs queued or running, the oldest finished forgotten first, a failing run still counted out."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from voltpack.api.background import BoundedRuns, RunQueueFullError


@dataclass
class Job:
    id: str
    status: str = "queued"


def runner(max_active: int = 2, max_finished: int = 2) -> BoundedRuns[Job]:
    return BoundedRuns(
        "jobs", workers=1, max_active=max_active, max_finished=max_finished, retry_after_s=5
    )


def wait_until_idle(runs: BoundedRuns[Job]) -> None:
    deadline = time.monotonic() + 10
    while runs.active_count() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert runs.active_count() == 0


def test_beyond_max_active_a_submission_is_refused_until_one_finishes() -> None:
    runs, gate = runner(), threading.Event()

    def held(job: Job) -> None:
        gate.wait(30)
        job.status = "done"

    for name in ("a", "b"):
        runs.reserve()
        runs.start(Job(name), held)
    with pytest.raises(RunQueueFullError, match="2 jobs are queued or running") as refused:
        runs.reserve()
    assert refused.value.retry_after_s == 5
    gate.set()
    wait_until_idle(runs)
    assert [runs.get(n).status for n in ("a", "b")] == ["done", "done"]  # type: ignore[union-attr]
    runs.reserve()  # room again


def test_shutdown_cancels_the_queued_runs_and_counts_them_out() -> None:
    runs, gate = runner(), threading.Event()
    started = threading.Event()

    def held(job: Job) -> None:
        started.set()
        gate.wait(30)
        job.status = "done"

    def abandoned(job: Job) -> None:
        job.status = "failed"

    for name in ("a", "b"):
        runs.reserve()
        runs.start(Job(name), held, abandoned)
    assert started.wait(10)
    stopping = threading.Thread(target=runs.shutdown)
    stopping.start()
    gate.set()
    stopping.join(30)
    assert runs.active_count() == 0
    assert [runs.get(n).status for n in ("a", "b")] == ["done", "failed"]  # type: ignore[union-attr]


def test_a_run_that_raises_is_counted_out_and_the_oldest_finished_are_forgotten() -> None:
    runs = runner(max_active=1, max_finished=2)

    def fails(job: Job) -> None:
        job.status = "failed"
        raise RuntimeError("boom")

    for name in ("a", "b", "c"):
        runs.reserve()  # max_active=1: refused unless the previous run was counted out
        runs.start(Job(name), fails)
        wait_until_idle(runs)
    assert runs.active_count() == 0
    assert [n for n in ("a", "b", "c") if runs.get(n)] == ["b", "c"]


def test_a_reservation_given_back_frees_its_place_and_shutdown_refuses_new_runs() -> None:
    runs = runner(max_active=1)
    runs.reserve()
    runs.release()
    runs.reserve()
    runs.shutdown()
    with pytest.raises(RuntimeError):
        runs.start(Job("late"), lambda job: None)
    assert runs.active_count() == 0 and runs.get("late") is None
