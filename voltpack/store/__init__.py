"""Persistence: voltpack's history in SQL (SQLite by default, PostgreSQL in production).

What is kept: scheduling decisions with their reasons, job history, power samples rolled up per
domain, what-if simulation runs and their reports, and an audit of administrative actions. The
store keeps history, never the only copy of truth: the operator rebuilds its state from the
cluster.

- `Store.open(url)` opens the database (`VOLTPACK_DATABASE_URL`, default `./voltpack.db`) and
  migrates it (Alembic migrations shipped in `voltpack/store/migrations/`). Readers use it
  directly; it raises `StoreUnavailableError` when the database cannot be reached.
- `BufferedStore(store)` is for the operator's loops: writes never raise; during an outage
  records wait in a bounded buffer and are written when the database is back.
- `TemporaryPostgres` starts a throwaway PostgreSQL server from the installed binaries (tests,
  benchmarks).

See `docs/store.md`.
"""

from voltpack.store.buffered import TABLES, BufferedStore, StoreMetrics, store_metrics
from voltpack.store.errors import (
    InvalidCursorError,
    InvalidRecordError,
    RecordNotFoundError,
    StoreConfigError,
    StoreError,
    StoreUnavailableError,
)
from voltpack.store.postgres_server import PostgresNotFoundError, TemporaryPostgres, postgres_bin
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
from voltpack.store.store import MAX_PAGE, Store, is_unavailable
from voltpack.store.url import URL_ENV, resolve_url

__all__ = [
    "MAX_PAGE",
    "SIMULATION_STATUSES",
    "TABLES",
    "URL_ENV",
    "AuditEntry",
    "BufferedStore",
    "DecisionPage",
    "DecisionRecord",
    "DecisionSummary",
    "InvalidCursorError",
    "InvalidRecordError",
    "JobRecord",
    "PostgresNotFoundError",
    "PowerBucket",
    "PowerHistoryVersion",
    "PowerRollup",
    "PowerSample",
    "RecordNotFoundError",
    "RetentionSettings",
    "SimulationRun",
    "SimulationStatus",
    "Store",
    "StoreConfigError",
    "StoreError",
    "StoreMetrics",
    "StoreUnavailableError",
    "TemporaryPostgres",
    "is_unavailable",
    "postgres_bin",
    "resolve_url",
    "store_metrics",
]
