"""`Store`: voltpack's history (decisions, jobs, power, simulations, audit) in one database.

Every method opens its own short transaction, so one `Store` may be shared by threads. When the
database cannot be reached, every method raises `StoreUnavailableError` (the admin API answers
503); the operator writes through `BufferedStore`, which keeps records until the database is
back.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self, cast

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import (
    URL,
    ColumnElement,
    Connection,
    Engine,
    RowMapping,
    Table,
    and_,
    case,
    delete,
    func,
    insert,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from voltpack.store.errors import (
    InvalidCursorError,
    InvalidRecordError,
    RecordNotFoundError,
    StoreConfigError,
    StoreUnavailableError,
)
from voltpack.store.records import (
    SIMULATION_STATUSES,
    AuditEntry,
    DecisionPage,
    DecisionRecord,
    DecisionSummary,
    JobRecord,
    PowerBucket,
    PowerHistoryVersion,
    PowerRollup,
    PowerSample,
    RetentionSettings,
    SimulationRun,
    SimulationStatus,
)
from voltpack.store.schema import (
    COUNT_BUCKET_S,
    AuditRow,
    DecisionCountRow,
    DecisionRow,
    JobHistoryRow,
    PowerSampleRow,
    SimulationRunRow,
)
from voltpack.store.url import create_store_engine, resolve_url, sqlite_file

DECISIONS = cast(Table, DecisionRow.__table__)
DECISION_COUNTS = cast(Table, DecisionCountRow.__table__)
JOB_HISTORY = cast(Table, JobHistoryRow.__table__)
POWER_SAMPLES = cast(Table, PowerSampleRow.__table__)
SIMULATION_RUNS = cast(Table, SimulationRunRow.__table__)
AUDIT = cast(Table, AuditRow.__table__)

MIGRATIONS = "voltpack.store:migrations"
"""Alembic's script location: the migrations ship inside the package."""

MAX_PAGE = 1000
"""The largest page a query returns."""

WRITE_BATCH = 5000
"""Rows per INSERT statement when writing many records."""

DAY_S = 86400.0


def is_unavailable(error: BaseException) -> bool:
    """Whether a database error means "cannot reach the database" (rather than a bad statement).

    SQLite reports a missing or unreadable file, PostgreSQL a refused or dropped connection, as
    `OperationalError`; psycopg reports a closed connection as `InterfaceError`.
    """
    if isinstance(error, StoreUnavailableError):
        return True
    if isinstance(error, OperationalError | InterfaceError):
        return True
    return isinstance(error, DBAPIError) and error.connection_invalidated


def _first_line(error: BaseException) -> str:
    inner = error.orig if isinstance(error, DBAPIError) and error.orig is not None else error
    text = str(inner).strip()
    return text.splitlines()[0] if text else type(inner).__name__


def encode_cursor(at_s: float, row_id: int) -> str:
    """The opaque cursor after the decision (at_s, id)."""
    return base64.urlsafe_b64encode(f"{at_s!r}:{row_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, int]:
    """(at_s, id) of a cursor from `encode_cursor`; `InvalidCursorError` for anything else."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii")
        at_text, _, id_text = text.partition(":")
        at_s, row_id = float(at_text), int(id_text)
    except (ValueError, binascii.Error, UnicodeError) as error:
        raise InvalidCursorError(
            f"cursor {cursor[:64]!r} is not one this API handed out; "
            "pass the next_cursor of the previous page unchanged, or omit it for the first page"
        ) from error
    if not math.isfinite(at_s) or row_id < 0:
        raise InvalidCursorError(f"cursor {cursor[:64]!r} is out of range; omit it to start over")
    return at_s, row_id


def bucket_start(at_s: float, bucket_s: float = COUNT_BUCKET_S) -> float:
    """The start of the bucket holding `at_s`: exactly `start <= at_s < start + bucket_s`."""
    start = math.floor(at_s / bucket_s) * bucket_s
    if at_s < start:
        return start - bucket_s
    if at_s >= start + bucket_s:
        return start + bucket_s
    return float(start)


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidRecordError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")


def _window(column: Any, since_s: float | None, until_s: float | None) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if since_s is not None:
        conditions.append(column >= since_s)
    if until_s is not None:
        conditions.append(column < until_s)
    return conditions


class Store:
    """voltpack's history in a SQL database. Open with `Store.open(url)`; close with `close()`."""

    def __init__(
        self,
        engine: Engine,
        *,
        power_bucket_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not power_bucket_s > 0:
            raise StoreConfigError(f"power_bucket_s must be positive, got {power_bucket_s}")
        self.engine = engine
        self.power_bucket_s = power_bucket_s
        """Width of the buckets that power samples are rolled up into."""
        self.clock = clock
        """Wall clock (epoch seconds) for records written without a time."""

    @classmethod
    def open(
        cls,
        url: str | URL | None = None,
        *,
        create: bool = True,
        power_bucket_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> Store:
        """Open the database at `url` (None: `$VOLTPACK_DATABASE_URL`, else `./voltpack.db`).

        `create=True` creates a missing SQLite file and its folder and migrates the schema to the
        newest revision (this connects, so it raises `StoreUnavailableError` if the database is
        down). `create=False` connects lazily and changes nothing: call `migrate()` yourself.
        Raises `StoreConfigError` for a malformed or unsupported URL, or (with `create=False`)
        a SQLite file that does not exist.
        """
        resolved = resolve_url(url)
        path = sqlite_file(resolved)
        if path is not None:
            if create:
                path.parent.mkdir(parents=True, exist_ok=True)
            elif not path.is_file():
                raise StoreConfigError(
                    f"SQLite database {str(path)!r} does not exist; "
                    "open it with create=True (or run `voltpack` once) to create it"
                )
        store = cls(create_store_engine(resolved), power_bucket_s=power_bucket_s, clock=clock)
        if create:
            try:
                store.migrate()
            except BaseException:
                store.close()
                raise
        return store

    @property
    def url(self) -> str:
        """The database URL with its password hidden (safe to log and show)."""
        return self.engine.url.render_as_string(hide_password=True)

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`."""
        return self.engine.dialect.name

    def close(self) -> None:
        """Close every pooled connection. The store can still be used (it reconnects)."""
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ----------------------------------------------------------------- connections, migrations

    @contextmanager
    def _begin(self) -> Iterator[Connection]:
        """A connection in a transaction, committed at the end; outages -> StoreUnavailableError."""
        try:
            with self.engine.begin() as connection:
                yield connection
        except (OperationalError, InterfaceError, DBAPIError) as error:
            if is_unavailable(error):
                raise StoreUnavailableError(
                    f"the database {self.url} is unavailable: {_first_line(error)}"
                ) from error
            raise

    def _alembic_config(self, connection: Connection) -> Config:
        config = Config()
        config.set_main_option("script_location", MIGRATIONS)
        config.attributes["connection"] = connection
        return config

    def migrate(self, revision: str = "head") -> None:
        """Upgrade the schema to `revision` (default: the newest) with the shipped migrations."""
        with self._begin() as connection:
            command.upgrade(self._alembic_config(connection), revision)

    def downgrade(self, revision: str = "base") -> None:
        """Downgrade the schema to `revision` (default: no tables). For developers and tests."""
        with self._begin() as connection:
            command.downgrade(self._alembic_config(connection), revision)

    def schema_revision(self) -> str | None:
        """The schema revision the database is at (None: never migrated)."""
        with self._begin() as connection:
            return MigrationContext.configure(connection).get_current_revision()

    def ping(self) -> None:
        """Raise `StoreUnavailableError` unless the database answers."""
        with self._begin() as connection:
            connection.execute(select(1))

    # ----------------------------------------------------------------------------- decisions

    def add_decisions(self, records: Iterable[DecisionRecord]) -> int:
        """Write decisions (their `id` is ignored; the store assigns one). Returns how many."""
        rows = [r.model_dump(exclude={"id"}) for r in records]
        if not rows:
            return 0
        counts: dict[float, list[int]] = {}
        for row in rows:
            bucket = counts.setdefault(bucket_start(row["at_s"]), [0, 0])
            bucket[0] += 1
            bucket[1] += row["placed"]
        dialect = postgresql if self.dialect == "postgresql" else sqlite
        upsert = dialect.insert(DECISION_COUNTS)
        upsert = upsert.on_conflict_do_update(
            index_elements=["bucket_start_s"],
            set_={
                "decisions": DECISION_COUNTS.c.decisions + upsert.excluded.decisions,
                "placed": DECISION_COUNTS.c.placed + upsert.excluded.placed,
            },
        )
        with self._begin() as connection:
            for start in range(0, len(rows), WRITE_BATCH):
                connection.execute(insert(DECISIONS), rows[start : start + WRITE_BATCH])
            connection.execute(
                upsert,
                [
                    {"bucket_start_s": start, "decisions": total, "placed": placed}
                    for start, (total, placed) in sorted(counts.items())
                ],
            )
        return len(rows)

    def _decision_filters(
        self,
        job: str | None,
        node: str | None,
        since_s: float | None,
        until_s: float | None,
        placed: bool | None,
    ) -> list[ColumnElement[bool]]:
        conditions = _window(DECISIONS.c.at_s, since_s, until_s)
        if job is not None:
            conditions.append(DECISIONS.c.job == job)
        if node is not None:
            conditions.append(DECISIONS.c.node == node)
        if placed is not None:
            conditions.append(DECISIONS.c.placed == placed)
        return conditions

    def query_decisions(
        self,
        *,
        job: str | None = None,
        node: str | None = None,
        since_s: float | None = None,
        until_s: float | None = None,
        placed: bool | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> DecisionPage:
        """Decisions newest first (`since_s <= at_s < until_s`), `limit` per page.

        Pages are keyset-paginated on (at_s, id): pass the previous page's `next_cursor` to get
        the next one. Decisions written meanwhile never shift or repeat later pages.
        """
        _check_limit(limit)
        conditions = self._decision_filters(job, node, since_s, until_s, placed)
        if cursor is not None:
            after_at_s, after_id = decode_cursor(cursor)
            conditions.append(tuple_(DECISIONS.c.at_s, DECISIONS.c.id) < (after_at_s, after_id))
        statement = (
            select(DECISIONS)
            .where(and_(True, *conditions))
            .order_by(DECISIONS.c.at_s.desc(), DECISIONS.c.id.desc())
            .limit(limit + 1)
        )
        with self._begin() as connection:
            rows = connection.execute(statement).mappings().all()
        items = tuple(DecisionRecord.model_validate(dict(row)) for row in rows[:limit])
        next_cursor = None
        if len(rows) > limit:
            last = items[-1]
            assert last.id is not None
            next_cursor = encode_cursor(last.at_s, last.id)
        return DecisionPage(items=items, next_cursor=next_cursor)

    def count_decisions(
        self,
        *,
        job: str | None = None,
        node: str | None = None,
        since_s: float | None = None,
        until_s: float | None = None,
        placed: bool | None = None,
    ) -> int:
        """How many decisions match (the same filters as `query_decisions`).

        Without a job or node, the count comes from the hourly counts (fast over any window).
        """
        if job is None and node is None:
            with self._begin() as connection:
                total, placed_count = self._window_counts(connection, since_s, until_s)
            if placed is None:
                return total
            return placed_count if placed else total - placed_count
        conditions = self._decision_filters(job, node, since_s, until_s, placed)
        statement = select(func.count()).select_from(DECISIONS).where(and_(True, *conditions))
        with self._begin() as connection:
            return int(connection.execute(statement).scalar_one())

    def summarize_decisions(
        self, *, since_s: float | None = None, until_s: float | None = None
    ) -> DecisionSummary:
        """Decisions, placed and unplaced, in `since_s <= at_s < until_s`."""
        with self._begin() as connection:
            total, placed = self._window_counts(connection, since_s, until_s)
        return DecisionSummary(decisions=total, placed=placed, unplaced=total - placed)

    def _window_counts(
        self, connection: Connection, since_s: float | None, until_s: float | None
    ) -> tuple[int, int]:
        """(decisions, placed) in `[since_s, until_s)`: whole buckets from `decision_counts`,
        the partial buckets at either end counted row by row."""
        if since_s is not None and until_s is not None and since_s >= until_s:
            return 0, 0
        width = COUNT_BUCKET_S
        first = None if since_s is None else math.ceil(since_s / width) * width
        end = None if until_s is None else math.floor(until_s / width) * width
        if first is not None and end is not None and first >= end:
            return self._row_counts(connection, since_s, until_s)
        statement = select(
            func.coalesce(func.sum(DECISION_COUNTS.c.decisions), 0),
            func.coalesce(func.sum(DECISION_COUNTS.c.placed), 0),
        ).where(and_(True, *_window(DECISION_COUNTS.c.bucket_start_s, first, end)))
        total, placed = (int(n) for n in connection.execute(statement).one())
        for edge in ((since_s, first), (end, until_s)):
            if edge[0] is not None and edge[1] is not None and edge[0] < edge[1]:
                more_total, more_placed = self._row_counts(connection, *edge)
                total, placed = total + more_total, placed + more_placed
        return total, placed

    def _row_counts(
        self, connection: Connection, since_s: float | None, until_s: float | None
    ) -> tuple[int, int]:
        placed = func.coalesce(func.sum(case((DECISIONS.c.placed, 1), else_=0)), 0)
        statement = select(func.count(), placed).where(
            and_(True, *_window(DECISIONS.c.at_s, since_s, until_s))
        )
        total, placed_count = connection.execute(statement).one()
        return int(total), int(placed_count)

    # ---------------------------------------------------------------------------- job history

    def record_jobs(self, records: Iterable[JobRecord]) -> int:
        """Write jobs; a job already stored (same namespace, job, submitted_at_s) is updated."""
        rows = [r.model_dump() for r in records]
        if not rows:
            return 0
        dialect = postgresql if self.dialect == "postgresql" else sqlite
        statement = dialect.insert(JOB_HISTORY)
        key = ("namespace", "job", "submitted_at_s")
        statement = statement.on_conflict_do_update(
            index_elements=list(key),
            set_={c: statement.excluded[c] for c in rows[0] if c not in key},
        )
        with self._begin() as connection:
            connection.execute(statement, rows)
        return len(rows)

    def record_job(self, record: JobRecord) -> None:
        """Write one job (see `record_jobs`)."""
        self.record_jobs([record])

    def job_history(
        self,
        *,
        namespace: str | None = None,
        queue: str | None = None,
        state: str | None = None,
        since_s: float | None = None,
        until_s: float | None = None,
        limit: int = 1000,
    ) -> list[JobRecord]:
        """Jobs submitted in `since_s <= submitted_at_s < until_s`, newest first."""
        filters = {"namespace": namespace, "queue": queue, "state": state}
        rows = self._newest(JOB_HISTORY, "submitted_at_s", filters, since_s, until_s, limit)
        return [
            JobRecord.model_validate({k: v for k, v in row.items() if k != "id"}) for row in rows
        ]

    # ---------------------------------------------------------------------------------- power

    def add_power_samples(self, domain: str, samples: Iterable[PowerSample]) -> int:
        """Roll `samples` of `domain` up into `power_bucket_s` buckets, merged with stored ones.

        Returns how many buckets were written. Samples may arrive in any grouping: a bucket's
        count, mean, maximum and actions come out the same.
        """
        bucket_s = self.power_bucket_s
        buckets: dict[float, list[PowerSample]] = {}
        for sample in samples:
            start = math.floor(sample.at_s / bucket_s) * bucket_s
            buckets.setdefault(start, []).append(sample)
        if not buckets:
            return 0
        rows = []
        for start, group in sorted(buckets.items()):
            budgets = [s.budget_w for s in sorted(group, key=lambda s: s.at_s) if s.budget_w]
            rows.append(
                {
                    "domain": domain,
                    "bucket_start_s": start,
                    "bucket_s": bucket_s,
                    "samples": len(group),
                    "mean_w": math.fsum(s.power_w for s in group) / len(group),
                    "max_w": max(s.power_w for s in group),
                    "budget_w": budgets[-1] if budgets else None,
                    "actions": sum(s.actions for s in group),
                }
            )
        dialect = postgresql if self.dialect == "postgresql" else sqlite
        statement = dialect.insert(POWER_SAMPLES)
        new, old = statement.excluded, POWER_SAMPLES.c
        statement = statement.on_conflict_do_update(
            index_elements=["domain", "bucket_start_s", "bucket_s"],
            set_={
                "samples": old.samples + new.samples,
                "mean_w": (old.mean_w * old.samples + new.mean_w * new.samples)
                / (old.samples + new.samples),
                "max_w": case((new.max_w > old.max_w, new.max_w), else_=old.max_w),
                "budget_w": func.coalesce(new.budget_w, old.budget_w),
                "actions": old.actions + new.actions,
            },
        )
        with self._begin() as connection:
            connection.execute(statement, rows)
        return len(rows)

    def power_history(
        self, domain: str, *, since_s: float | None = None, until_s: float | None = None
    ) -> list[PowerBucket]:
        """The buckets of `domain` that overlap `[since_s, until_s)`, oldest first."""
        statement = (
            select(POWER_SAMPLES)
            .where(*_power_window(domain, since_s, until_s))
            .order_by(POWER_SAMPLES.c.bucket_start_s)
        )
        with self._begin() as connection:
            rows = connection.execute(statement).mappings().all()
        return [PowerBucket.model_validate({k: v for k, v in r.items() if k != "id"}) for r in rows]

    def power_rollups(
        self, domain: str, *, since_s: float | None = None, until_s: float | None = None
    ) -> list[PowerRollup]:
        """What a forecast reads of the buckets `power_history` returns: start, length, peak
        and budget, as light tuples, oldest first."""
        c = POWER_SAMPLES.c
        statement = (
            select(c.bucket_start_s, c.bucket_s, c.max_w, c.budget_w)
            .where(*_power_window(domain, since_s, until_s))
            .order_by(c.bucket_start_s)
        )
        with self._begin() as connection:
            rows = connection.execute(statement).all()
        return list(map(PowerRollup._make, rows))

    def power_history_version(
        self, domain: str, *, since_s: float | None = None, until_s: float | None = None
    ) -> PowerHistoryVersion:
        """Bucket count, first and last start and sample sum of the buckets `power_history`
        returns: one aggregate over the (domain, start) index, to tell cheaply whether they
        changed."""
        c = POWER_SAMPLES.c
        statement = select(
            func.count(), func.min(c.bucket_start_s), func.max(c.bucket_start_s),
            func.coalesce(func.sum(c.samples), 0),
        ).where(*_power_window(domain, since_s, until_s))  # fmt: skip
        with self._begin() as connection:
            count, first, last, samples = connection.execute(statement).one()
        return PowerHistoryVersion(int(count), first, last, int(samples))

    def power_domains(self) -> list[str]:
        """The domains that have power history, sorted."""
        statement = select(POWER_SAMPLES.c.domain).distinct().order_by(POWER_SAMPLES.c.domain)
        with self._begin() as connection:
            return list(connection.execute(statement).scalars())

    # ------------------------------------------------------------------------ simulation runs

    def create_simulation(
        self, kind: str, request: dict[str, Any], *, created_at_s: float | None = None
    ) -> SimulationRun:
        """Record a simulation asked for (status `queued`, progress 0) and return it with its id."""
        _check_json("request", request)
        row = {
            "created_at_s": self.clock() if created_at_s is None else created_at_s,
            "kind": kind,
            "request": request,
            "status": "queued",
            "progress": 0.0,
            "report": None,
            "error": None,
        }
        with self._begin() as connection:
            run_id = connection.execute(
                insert(SIMULATION_RUNS).returning(SIMULATION_RUNS.c.id), row
            ).scalar_one()
        return SimulationRun(id=run_id, **row)

    def update_simulation(
        self,
        run_id: int,
        *,
        status: SimulationStatus | None = None,
        progress: float | None = None,
        report: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> SimulationRun:
        """Change a run's status, progress (0..1), report or error; returns the run as stored."""
        values: dict[str, Any] = {}
        if status is not None:
            if status not in SIMULATION_STATUSES:
                raise InvalidRecordError(
                    f"simulation status {status!r} is unknown; use one of {SIMULATION_STATUSES}"
                )
            values["status"] = status
        if progress is not None:
            if not 0.0 <= progress <= 1.0:
                raise InvalidRecordError(f"simulation progress must be in 0..1, got {progress}")
            values["progress"] = progress
        if report is not None:
            _check_json("report", report)
            values["report"] = report
        if error is not None:
            values["error"] = error
        with self._begin() as connection:
            if values:
                connection.execute(
                    update(SIMULATION_RUNS).where(SIMULATION_RUNS.c.id == run_id).values(values)
                )
            return self._simulation(connection, run_id)

    def _simulation(self, connection: Connection, run_id: int) -> SimulationRun:
        row = (
            connection.execute(select(SIMULATION_RUNS).where(SIMULATION_RUNS.c.id == run_id))
            .mappings()
            .one_or_none()
        )
        if row is None:
            raise RecordNotFoundError(f"simulation run {run_id} does not exist")
        return SimulationRun.model_validate(dict(row))

    def get_simulation(self, run_id: int) -> SimulationRun:
        """The run with this id; `RecordNotFoundError` if there is none."""
        with self._begin() as connection:
            return self._simulation(connection, run_id)

    def list_simulations(
        self, *, status: SimulationStatus | None = None, kind: str | None = None, limit: int = 100
    ) -> list[SimulationRun]:
        """Runs newest first."""
        _check_limit(limit)
        conditions: list[ColumnElement[bool]] = []
        if status is not None:
            conditions.append(SIMULATION_RUNS.c.status == status)
        if kind is not None:
            conditions.append(SIMULATION_RUNS.c.kind == kind)
        statement = (
            select(SIMULATION_RUNS)
            .where(and_(True, *conditions))
            .order_by(SIMULATION_RUNS.c.created_at_s.desc(), SIMULATION_RUNS.c.id.desc())
            .limit(limit)
        )
        with self._begin() as connection:
            rows = connection.execute(statement).mappings().all()
        return [SimulationRun.model_validate(dict(row)) for row in rows]

    # ---------------------------------------------------------------------------------- audit

    def audit(
        self,
        user: str,
        action: str,
        target: str,
        detail: dict[str, Any] | None = None,
        outcome: str = "ok",
        *,
        at_s: float | None = None,
    ) -> AuditEntry:
        """Record an administrative action (`at_s` None: now) and return it with its id."""
        entry = AuditEntry(
            at_s=self.clock() if at_s is None else at_s,
            user=user,
            action=action,
            target=target,
            detail=detail or {},
            outcome=outcome,
        )
        _check_json("detail", entry.detail)
        with self._begin() as connection:
            entry_id = connection.execute(
                insert(AUDIT).returning(AUDIT.c.id), entry.model_dump(exclude={"id"})
            ).scalar_one()
        return entry.model_copy(update={"id": entry_id})

    def add_audit(self, entries: Iterable[AuditEntry]) -> int:
        """Write audit entries recorded earlier (their `id` is ignored). Returns how many."""
        rows = [e.model_dump(exclude={"id"}) for e in entries]
        for row in rows:
            _check_json("detail", row["detail"])
        if rows:
            with self._begin() as connection:
                connection.execute(insert(AUDIT), rows)
        return len(rows)

    def list_audit(
        self,
        *,
        user: str | None = None,
        action: str | None = None,
        target: str | None = None,
        since_s: float | None = None,
        until_s: float | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """Audit entries in `since_s <= at_s < until_s`, newest first."""
        filters = {"user": user, "action": action, "target": target}
        rows = self._newest(AUDIT, "at_s", filters, since_s, until_s, limit)
        return [AuditEntry.model_validate(dict(row)) for row in rows]

    def _newest(
        self,
        table: Table,
        time_column: str,
        filters: dict[str, str | None],
        since_s: float | None,
        until_s: float | None,
        limit: int,
    ) -> Sequence[RowMapping]:
        """Rows of `table` in the time window matching the set filters, newest first."""
        _check_limit(limit)
        conditions = _window(table.c[time_column], since_s, until_s)
        for column, value in filters.items():
            if value is not None:
                conditions.append(table.c[column] == value)
        statement = (
            select(table)
            .where(and_(True, *conditions))
            .order_by(table.c[time_column].desc(), table.c.id.desc())
            .limit(limit)
        )
        with self._begin() as connection:
            return connection.execute(statement).mappings().all()

    # ------------------------------------------------------------------------------ retention

    def apply_retention(self, now_s: float, settings: RetentionSettings) -> dict[str, int]:
        """Delete what is older than each table's retention; returns rows deleted per table.

        Decisions go by `at_s`, from the start of the hour the cutoff falls in (up to an hour
        more than `decisions_days` is kept, so that the hourly counts stay exact); audit
        entries by `at_s`; power buckets by their end; simulation runs by `created_at_s`; jobs
        by their last known time (finished, else started, else submitted).
        """

        def cutoff(days: float | None) -> float | None:
            return None if days is None else now_s - days * DAY_S

        decisions_cutoff = cutoff(settings.decisions_days)
        if decisions_cutoff is not None:
            decisions_cutoff = bucket_start(decisions_cutoff)
        job_last_s = func.coalesce(
            JOB_HISTORY.c.finished_at_s, JOB_HISTORY.c.started_at_s, JOB_HISTORY.c.submitted_at_s
        )
        plan: list[tuple[Table, float | None, Any]] = [
            (DECISIONS, decisions_cutoff, DECISIONS.c.at_s),
            (DECISION_COUNTS, decisions_cutoff, DECISION_COUNTS.c.bucket_start_s),
            (JOB_HISTORY, cutoff(settings.job_history_days), job_last_s),
            (
                POWER_SAMPLES,
                cutoff(settings.power_samples_days),
                POWER_SAMPLES.c.bucket_start_s + POWER_SAMPLES.c.bucket_s,
            ),
            (
                SIMULATION_RUNS,
                cutoff(settings.simulation_runs_days),
                SIMULATION_RUNS.c.created_at_s,
            ),
            (AUDIT, cutoff(settings.audit_days), AUDIT.c.at_s),
        ]
        deleted: dict[str, int] = {}
        with self._begin() as connection:
            for table, before_s, column in plan:
                count = 0
                if before_s is not None:
                    count = int(connection.execute(delete(table).where(column < before_s)).rowcount)
                if table is not DECISION_COUNTS:
                    deleted[table.name] = count
        return deleted


def _power_window(
    domain: str, since_s: float | None, until_s: float | None
) -> list[ColumnElement[bool]]:
    """The buckets of `domain` that overlap `[since_s, until_s)`."""
    conditions: list[ColumnElement[bool]] = [POWER_SAMPLES.c.domain == domain]
    if since_s is not None:
        conditions.append(POWER_SAMPLES.c.bucket_start_s + POWER_SAMPLES.c.bucket_s > since_s)
    if until_s is not None:
        conditions.append(POWER_SAMPLES.c.bucket_start_s < until_s)
    return conditions


def _check_json(field: str, value: dict[str, Any]) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidRecordError(
            f"{field} must be a JSON object of plain values: {error}"
        ) from error
