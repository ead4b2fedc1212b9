"""Events written off the caller's thread, as kube-scheduler's event broadcaster writes them.

kube-scheduler records its `Scheduled` Event into a queue that a goroutine of its own writes out;
its binding cycle never waits for an Event. voltpack's binding threads did wait, one Event per
bound pod, so half of their round trips were Events. `EventQueue` takes them instead: a few
threads of their own write them in order of arrival; with the operator's `AsyncPoster` they
are posted from its loop, without a thread each. At most `capacity` Events wait; more are
dropped and counted (the broadcaster drops too when its queue is full): an Event is a record for
people, never state voltpack reads back.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kubernetes.client import CoreV1Api

from voltpack.operator.kube.async_post import attached
from voltpack.operator.kube.binder import event_outcome, event_request, record_event
from voltpack.operator.kube.client import REQUEST_TIMEOUT_S

log = logging.getLogger(__name__)

EVENT_WORKERS = 8
"""With 2, at 1,000 pods bound on 500 nodes a quarter of their Events were written when the last
pod was bound (kube-scheduler's: all) and the last one 8.5 s later."""
EVENT_CAPACITY = 10_000
"""Events waiting at most; 10,000 pods bound in one cycle fit."""


class EventQueue:
    """Records Events from `workers` threads of its own."""

    def __init__(
        self, core: CoreV1Api, workers: int = EVENT_WORKERS, capacity: int = EVENT_CAPACITY
    ) -> None:
        self.core = core
        self.capacity = capacity
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="events")
        self._lock = threading.Lock()
        self._waiting = 0
        self.dropped = 0
        self.written = 0
        self._idle = threading.Event()
        self._idle.set()

    def record(self, obj: dict[str, Any], reason: str, message: str, kind: str = "Normal") -> bool:
        """Queue one Event (`record_event`'s arguments, posted raw); False when dropped."""
        with self._lock:
            if self._waiting >= self.capacity:
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    log.warning("%d Events dropped: more than %d waiting", self.dropped,
                                self.capacity)  # fmt: skip
                return False
            self._waiting += 1
            self._idle.clear()
        poster = attached(self.core.api_client)
        try:
            if poster is None:
                self._pool.submit(self._write, obj, reason, message, kind)
            else:  # posted from the poster's loop: no thread of this queue waits on it
                path, body = event_request(obj, reason, message, kind)
                name = obj["metadata"]["name"]
                future = poster.submit(path, body, REQUEST_TIMEOUT_S)
                future.add_done_callback(lambda done: self._posted(name, done))
        except RuntimeError:  # shut down: the operator is stopping
            self._done(False)
            return False
        return True

    def _posted(self, name: str, done: Future[dict[str, Any]]) -> None:
        """A posted Event's answer (in the poster's loop)."""
        self._done(not done.cancelled() and event_outcome(self.core, name, done.exception()))

    def _write(self, obj: dict[str, Any], reason: str, message: str, kind: str) -> None:
        written = False
        try:
            written = record_event(self.core, obj, reason, message, kind, raw=True)
        finally:
            self._done(written)

    def _done(self, written: bool) -> None:
        with self._lock:
            self._waiting -= 1
            self.written += int(written)
            if self._waiting == 0:
                self._idle.set()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no Event waits (True), or `timeout_s` passed (False)."""
        return self._idle.wait(timeout_s)

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what waits (for up to `timeout_s`), then stop the threads."""
        self.wait_idle(timeout_s)
        self._pool.shutdown(wait=False, cancel_futures=True)
