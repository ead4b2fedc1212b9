"""Database URLs and engines: SQLite (a file in WAL mode) by default, PostgreSQL via psycopg 3."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Engine, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import NullPool, StaticPool

from voltpack.store.errors import StoreConfigError

URL_ENV = "VOLTPACK_DATABASE_URL"
"""Environment variable read when no URL is given."""

DEFAULT_SQLITE_FILE = "voltpack.db"
"""The SQLite file, in the working directory, used when neither a URL nor the variable is set."""

EXAMPLES = (
    "sqlite:////var/lib/voltpack/voltpack.db (absolute path) "
    "or postgresql+psycopg://user:pass@host:5432/db"
)

_POSTGRES_ALIASES = {"postgres", "postgresql", "postgresql+psycopg"}
_SQLITE_ALIASES = {"sqlite", "sqlite+pysqlite"}

PG_CONNECT_TIMEOUT_S = 5
"""How long a PostgreSQL connection attempt may take before the database counts as unreachable."""


def resolve_url(url: str | URL | None) -> URL:
    """The URL to use: `url`, else `$VOLTPACK_DATABASE_URL`, else `sqlite:///./voltpack.db`.

    `postgresql://` and `postgres://` select psycopg 3. Raises `StoreConfigError` naming the
    URL (password hidden) when it is malformed or names a database voltpack does not support.
    """
    if url is None or url == "":
        url = os.environ.get(URL_ENV) or f"sqlite:///{Path(DEFAULT_SQLITE_FILE).resolve()}"
    shown = url if isinstance(url, str) else url.render_as_string(hide_password=True)
    try:
        parsed = make_url(url)
    except ArgumentError as error:
        shown = _hide_password(str(shown))
        raise StoreConfigError(
            f"database URL {shown!r} is malformed ({error}); use for example {EXAMPLES}"
        ) from error
    shown = parsed.render_as_string(hide_password=True)
    if parsed.drivername in _POSTGRES_ALIASES:
        return parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername in _SQLITE_ALIASES:
        return parsed.set(drivername="sqlite+pysqlite")
    raise StoreConfigError(
        f"database URL {shown!r} names {parsed.drivername!r}, which voltpack does not support; "
        f"use SQLite or PostgreSQL (psycopg 3), for example {EXAMPLES}"
    )


def _hide_password(text: str) -> str:
    """`scheme://user:secret@host` -> `scheme://user:***@host` for URLs that did not parse."""
    head, sep, rest = text.partition("://")
    if not sep or "@" not in rest:
        return text
    credentials, _, host = rest.rpartition("@")
    user, colon, _ = credentials.partition(":")
    return f"{head}://{user}{':***' if colon else ''}@{host}"


def is_sqlite_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite URL (None for an in-memory database)."""
    if url.get_backend_name() != "sqlite" or is_sqlite_memory(url):
        return None
    assert url.database is not None
    return Path(url.database)


def create_store_engine(url: URL) -> Engine:
    """An engine for `url` (from `resolve_url`).

    SQLite: WAL journal, foreign keys on, a 5 s busy timeout; a new connection per use
    (NullPool) so that a file that disappears is noticed at once instead of being written through
    a connection to the deleted file. PostgreSQL: psycopg 3, connections checked before use
    (`pool_pre_ping`, so a restarted server is picked up again), a connect timeout.
    """
    if url.get_backend_name() == "sqlite":
        if is_sqlite_memory(url):
            engine = create_engine(
                url, poolclass=StaticPool, connect_args={"check_same_thread": False}
            )
        else:
            engine = create_engine(url, poolclass=NullPool)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    connect_args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA busy_timeout = 5000")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()
