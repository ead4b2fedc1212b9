"""Long work the API runs in the background, one piece at a time, within bounds.

A route that would take longer than a request should (a what-if simulation, a dry run of a
whole scheduling cycle) submits the work here and answers 202 with the run's id; the client
polls the run. Both ends are bounded: at most `max_active` runs queued or running (a submission
beyond raises `RunQueueFullError`, which the API answers with 429 and Retry-After), and at most
`max_finished` finished runs kept, the oldest forgotten first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, Protocol, TypeVar

FINISHED_STATUSES = ("done", "failed")


class Run(Protocol):
    """What the runner needs of a run: its id and its status."""

    @property
    def id(self) -> str: ...

    @property
    def status(self) -> str: ...


RunT = TypeVar("RunT", bound=Run)


class RunQueueFullError(Exception):
    """As many runs are queued or running as the runner accepts."""

    def __init__(self, active: int, what: str, retry_after_s: int) -> None:
        super().__init__(
            f"{active} {what} are queued or running, the most this API accepts; "
            f"submit again after one finishes (about {retry_after_s} s)"
        )
        self.retry_after_s = retry_after_s


class BoundedRuns(Generic[RunT]):
    """Runs work in a thread pool; keeps the runs' state, within bounds."""

    def __init__(
        self,
        what: str,
        *,
        workers: int,
        max_active: int,
        max_finished: int,
        retry_after_s: int,
    ) -> None:
        self._what = what
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"voltpack-{what}")
        self._runs: dict[str, RunT] = {}  # in submission order
        self._lock = threading.Lock()
        self._max_active = max_active
        self._max_finished = max_finished
        self._retry_after_s = retry_after_s
        self._active = 0

    def reserve(self) -> None:
        """Count one more active run; RunQueueFullError when `max_active` are active. Follow
        with `start` (or `release` if the run is not started after all)."""
        with self._lock:
            if self._active >= self._max_active:
                raise RunQueueFullError(self._active, self._what, self._retry_after_s)
            self._active += 1

    def release(self) -> None:
        """Give back a reservation whose run was never started."""
        with self._lock:
            self._active -= 1

    def start(
        self,
        run: RunT,
        work: Callable[[RunT], None],
        cancelled: Callable[[RunT], None] = lambda _: None,
    ) -> None:
        """Keep `run` and call `work(run)` in the pool; `work` must leave the run finished, and
        `cancelled(run)` must, should `shutdown` cancel it before it starts. RuntimeError (and
        the reservation given back) after `shutdown`."""
        with self._lock:
            self._runs[run.id] = run
        try:
            future = self._pool.submit(self._execute, run, work)
        except RuntimeError:  # shut down
            with self._lock:
                self._active -= 1
                self._runs.pop(run.id, None)
            raise
        future.add_done_callback(
            lambda done: self._cancelled(run, cancelled) if done.cancelled() else None
        )

    def get(self, run_id: str) -> RunT | None:
        """A kept run by id."""
        with self._lock:
            return self._runs.get(run_id)

    def active_count(self) -> int:
        """Runs queued or running."""
        with self._lock:
            return self._active

    def shutdown(self) -> None:
        """Stop accepting runs; cancel the queued ones (counted out, `cancelled` told) and wait
        for the running one."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _execute(self, run: RunT, work: Callable[[RunT], None]) -> None:
        try:
            work(run)
        finally:
            self._finished()

    def _cancelled(self, run: RunT, cancelled: Callable[[RunT], None]) -> None:
        try:
            cancelled(run)
        finally:
            self._finished()

    def _finished(self) -> None:
        """Count a run out of the active ones; forget the oldest finished beyond the bound."""
        with self._lock:
            self._active -= 1
            finished = [key for key, kept in self._runs.items() if kept.status in FINISHED_STATUSES]
            for key in finished[: max(0, len(finished) - self._max_finished)]:
                del self._runs[key]
