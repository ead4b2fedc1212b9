"""`BufferedStore`: how the operator and the power loop write history without depending on it.

Writes never raise into the caller. While the database is unreachable, records wait in a
bounded buffer (the oldest are dropped beyond `capacity` and counted in
`voltpack_store_records_dropped_total{table}`); they are written, in order, once it answers
again. Readers (the admin API) go through `read()`, which raises `StoreUnavailableError` while
the database is down, so that the API can answer 503 with a clear message.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge
from sqlalchemy import URL

from voltpack.store.errors import StoreConfigError, StoreUnavailableError
from voltpack.store.records import AuditEntry, DecisionRecord, JobRecord, PowerSample
from voltpack.store.store import WRITE_BATCH, Store
from voltpack.store.url import create_store_engine, resolve_url

log = logging.getLogger(__name__)

T = TypeVar("T")

TABLES = ("decisions", "job_history", "power_samples", "audit")
"""The tables written through a `BufferedStore` (the metrics' `table` label)."""


@dataclass(frozen=True)
class StoreMetrics:
    """The buffer's Prometheus metrics."""

    dropped: Counter
    buffered: Gauge
    available: Gauge


_METRICS: weakref.WeakKeyDictionary[CollectorRegistry, StoreMetrics] = weakref.WeakKeyDictionary()
_METRICS_LOCK = threading.Lock()


def store_metrics(registry: CollectorRegistry = REGISTRY) -> StoreMetrics:
    """The store metrics registered in `registry` (registered on first use, then shared)."""
    with _METRICS_LOCK:
        metrics = _METRICS.get(registry)
        if metrics is None:
            metrics = StoreMetrics(
                dropped=Counter(
                    "voltpack_store_records_dropped",
                    "History records dropped: the buffer was full while the database was "
                    "unreachable, or the database refused the record.",
                    ["table"],
                    registry=registry,
                ),
                buffered=Gauge(
                    "voltpack_store_records_buffered",
                    "History records waiting to be written to the database.",
                    ["table"],
                    registry=registry,
                ),
                available=Gauge(
                    "voltpack_store_available",
                    "1 while the history database answers, 0 while it is unreachable.",
                    registry=registry,
                ),
            )
            _METRICS[registry] = metrics
        return metrics


@dataclass(frozen=True)
class _Pending:
    table: str
    record: Any
    domain: str = ""


class BufferedStore:
    """Writes to a `Store` that never raise into the caller and survive database outages.

    Each write appends to the buffer and then writes the buffer out if the database is
    available (or `retry_interval_s` has passed since it was last found unreachable): in the
    caller's thread, or, after `start()`, in a background thread so that a slow database never
    holds up the caller. Call `flush()` to try at once. Records keep the order they were
    written in.
    """

    def __init__(
        self,
        store: Store,
        *,
        capacity: int = 100_000,
        retry_interval_s: float = 5.0,
        migrate: bool = True,
        registry: CollectorRegistry = REGISTRY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`capacity`: records kept while the database is down; `migrate`: bring the schema to
        the newest revision before the first write and after every outage (a recreated
        database gets its tables back)."""
        if capacity < 1:
            raise StoreConfigError(f"buffer capacity must be at least 1 record, got {capacity}")
        self._store = store
        self.capacity = capacity
        self.retry_interval_s = retry_interval_s
        self._migrate = migrate
        self._schema_ready = not migrate
        self._clock = clock
        self._metrics = store_metrics(registry)
        self._lock = threading.RLock()
        """Guards the buffer and the state; never held while talking to the database."""
        self._flush_lock = threading.Lock()
        """One flush at a time."""
        self._writer: threading.Thread | None = None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._buffer: deque[_Pending] = deque()
        self._counts = dict.fromkeys(TABLES, 0)
        self._available = True
        self._retry_at = 0.0
        self.last_error: str | None = None
        """Why the database was last found unreachable (None: it never was)."""
        self._metrics.available.set(1)
        for table in TABLES:
            self._metrics.buffered.labels(table).set(0)

    @classmethod
    def open(
        cls,
        url: str | URL | None = None,
        *,
        capacity: int = 100_000,
        retry_interval_s: float = 5.0,
        power_bucket_s: float = 60.0,
        registry: CollectorRegistry = REGISTRY,
    ) -> BufferedStore:
        """Open the database at `url` for the operator: never fails because it is down.

        Tries `Store.open(url)` (create and migrate); if the database cannot be reached, starts
        unavailable with a store that connects lazily, and migrates when it is back. Raises only
        `StoreConfigError` (a bad URL or setting).
        """
        error: StoreUnavailableError | None = None
        try:
            store = Store.open(url, power_bucket_s=power_bucket_s)
        except StoreUnavailableError as unavailable:
            error = unavailable
            store = Store(create_store_engine(resolve_url(url)), power_bucket_s=power_bucket_s)
        buffered = cls(
            store,
            capacity=capacity,
            retry_interval_s=retry_interval_s,
            migrate=True,
            registry=registry,
        )
        if error is None:
            buffered._schema_ready = True
        else:
            with buffered._lock:
                buffered._set_unavailable(error)
        return buffered

    @property
    def store(self) -> Store:
        """The wrapped store (its methods raise `StoreUnavailableError` during an outage)."""
        return self._store

    @property
    def available(self) -> bool:
        """False from a failed attempt to reach the database until a successful one."""
        return self._available

    @property
    def buffered(self) -> int:
        """Records waiting to be written."""
        return len(self._buffer)

    # --------------------------------------------------------------------------------- writes

    def add_decisions(self, records: Iterable[DecisionRecord]) -> None:
        self._enqueue(_Pending("decisions", r) for r in records)

    def record_job(self, record: JobRecord) -> None:
        self._enqueue([_Pending("job_history", record)])

    def add_power_samples(self, domain: str, samples: Iterable[PowerSample]) -> None:
        self._enqueue(_Pending("power_samples", s, domain) for s in samples)

    def audit(
        self,
        user: str,
        action: str,
        target: str,
        detail: dict[str, Any] | None = None,
        outcome: str = "ok",
        *,
        at_s: float | None = None,
    ) -> None:
        """Record an administrative action, timed now (when it happened, not when written)."""
        entry = AuditEntry(
            at_s=self._store.clock() if at_s is None else at_s,
            user=user,
            action=action,
            target=target,
            detail=detail or {},
            outcome=outcome,
        )
        self._enqueue([_Pending("audit", entry)])

    def _enqueue(self, pending: Iterable[_Pending]) -> None:
        with self._lock:
            for item in pending:
                self._buffer.append(item)
                self._count(item.table, 1)
            while len(self._buffer) > self.capacity:
                oldest = self._buffer.popleft()
                self._count(oldest.table, -1)
                self._metrics.dropped.labels(oldest.table).inc()
            due = self._available or self._clock() >= self._retry_at
        if self._writer is not None:
            if due:
                self._wake.set()
        elif due:
            self.flush()

    def _count(self, table: str, delta: int) -> None:
        self._counts[table] += delta
        self._metrics.buffered.labels(table).set(self._counts[table])

    # -------------------------------------------------------------------------------- flushing

    def flush(self) -> bool:
        """Write out the buffer now. True if it is empty afterwards; never raises.

        The database is written outside the buffer's lock: writers keep appending meanwhile.
        """
        with self._flush_lock:
            try:
                if not self._schema_ready and self._buffer:
                    self._store.migrate()
                    self._schema_ready = True
                while self._write_front():
                    pass
            except StoreUnavailableError as error:
                with self._lock:
                    self._set_unavailable(error)
                return False
            except Exception:
                # not an outage and not one bad record (those are handled per record): a bug
                log.exception("writing history failed; %d records stay buffered", self.buffered)
                with self._lock:
                    self._retry_at = self._clock() + self.retry_interval_s
                return False
            with self._lock:
                self._set_available()
                return not self._buffer

    def _write_front(self) -> bool:
        """Write the run of same-table records at the front of the buffer, then drop them from
        it. False when the buffer is empty."""
        with self._lock:
            if not self._buffer:
                return False
            first = self._buffer[0]
            group = [first]
            for index in range(1, min(len(self._buffer), WRITE_BATCH)):
                item = self._buffer[index]
                if item.table != first.table or item.domain != first.domain:
                    break
                group.append(item)
        try:
            self._write(group)
        except StoreUnavailableError:
            raise
        except Exception:
            self._write_one_by_one(group)
        with self._lock:
            # the oldest may have been dropped meanwhile (a full buffer): remove what is left
            for item in group:
                if self._buffer and self._buffer[0] is item:
                    self._buffer.popleft()
                    self._count(item.table, -1)
        return True

    def _write_one_by_one(self, group: list[_Pending]) -> None:
        """After a batch was refused: write each record alone, dropping only those refused."""
        for item in group:
            try:
                self._write([item])
            except StoreUnavailableError:
                raise
            except Exception as error:
                log.error("the database refused a %s record, dropped: %s", item.table, error)
                self._metrics.dropped.labels(item.table).inc()

    def _write(self, group: list[_Pending]) -> None:
        table = group[0].table
        if table == "decisions":
            self._store.add_decisions(item.record for item in group)
        elif table == "job_history":
            self._store.record_jobs(item.record for item in group)
        elif table == "power_samples":
            self._store.add_power_samples(group[0].domain, (item.record for item in group))
        else:
            self._store.add_audit(item.record for item in group)

    def _set_unavailable(self, error: StoreUnavailableError) -> None:
        if self._available:
            log.warning(
                "history database unreachable, buffering up to %d records: %s",
                self.capacity,
                error,
            )
        self._available = False
        self._schema_ready = not self._migrate
        self.last_error = str(error)
        self._retry_at = self._clock() + self.retry_interval_s
        self._metrics.available.set(0)

    def _set_available(self) -> None:
        if not self._available:
            log.info("history database reachable again")
        self._available = True
        self._metrics.available.set(1)

    # ---------------------------------------------------------------------------------- reads

    def read(self, query: Callable[[Store], T]) -> T:
        """Run `query` on the store, e.g. `read(lambda s: s.query_decisions(job="j"))`.

        Raises `StoreUnavailableError` (answer 503) while the database is down, at once
        between retries, with a message that says history is unavailable and control goes on.
        """
        if not self._available and self._clock() < self._retry_at:
            raise StoreUnavailableError(self._unavailable_message())
        try:
            result = query(self._store)
        except StoreUnavailableError as error:
            with self._lock:
                self._set_unavailable(error)
            raise StoreUnavailableError(self._unavailable_message()) from error
        if not self._available:
            if self._writer is not None:
                self._wake.set()
            else:
                self.flush()
        return result

    def _unavailable_message(self) -> str:
        return (
            f"history is unavailable: {self.last_error}. Scheduling and power control go on; "
            f"{self.buffered} records are buffered and will be written when it is back"
        )

    # ------------------------------------------------------------------------ background writer

    def start(self, interval_s: float = 1.0) -> None:
        """Write from a background thread from now on: writes only append to the buffer, so a
        slow or unreachable database (a connect timeout) never holds up the caller's loop. The
        thread writes when woken by a write, and every `interval_s`."""
        if self._writer is not None:
            return
        self._stopping.clear()
        self._writer = threading.Thread(
            target=self._run_writer, args=(interval_s,), name="voltpack-store-writer", daemon=True
        )
        self._writer.start()

    def _run_writer(self, interval_s: float) -> None:
        while not self._stopping.is_set():
            self._wake.wait(interval_s)
            self._wake.clear()
            if self._stopping.is_set():
                return
            with self._lock:
                due = bool(self._buffer) and (self._available or self._clock() >= self._retry_at)
            if due:
                self.flush()

    def stop(self) -> None:
        """Stop the background writer (if started), then try a last flush."""
        writer, self._writer = self._writer, None
        if writer is not None:
            self._stopping.set()
            self._wake.set()
            writer.join()
        self.flush()

    def close(self) -> None:
        """Stop the writer and try a last flush, then close the store. Records still buffered
        are lost (logged)."""
        self.stop()
        if self._buffer:
            log.warning("closing with %d history records unwritten", self.buffered)
        self._store.close()
