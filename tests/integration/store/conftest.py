"""Fixtures of the store tests: the same tests run on SQLite and on a real PostgreSQL.

PostgreSQL is a throwaway server started from the installed binaries (`TemporaryPostgres`,
as the `postgres` user when the tests run as root), one per test process, with a fresh
database per test. Without the binaries the PostgreSQL tests are skipped on a developer's
machine, with a message naming what is missing, and fail in CI (CI=true).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.services import missing_service
from voltpack.store import PostgresNotFoundError, Store, TemporaryPostgres

BACKENDS = ("sqlite", "postgresql")

_databases = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TemporaryPostgres]:
    """A running throwaway PostgreSQL server for this test process."""
    try:
        server = TemporaryPostgres()
    except PostgresNotFoundError as error:
        missing_service("PostgreSQL", str(error))
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The URL of an empty database on `backend`."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'history' / 'voltpack.db'}"
    server: TemporaryPostgres = request.getfixturevalue("postgres_server")
    return server.create_database(f"test_{os.getpid()}_{next(_databases)}")


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A migrated store on an empty database."""
    with Store.open(store_url) as opened:
        yield opened


@dataclass
class Outage:
    """Cuts the database off and brings it back, for real."""

    cut: Callable[[], None]
    restore: Callable[[], None]


@pytest.fixture
def outage(backend: str, store: Store, request: pytest.FixtureRequest) -> Iterator[Outage]:
    if backend == "postgresql":
        server: TemporaryPostgres = request.getfixturevalue("postgres_server")
        try:
            yield Outage(cut=server.stop, restore=server.start)
        finally:
            server.start()  # the next test needs the server
        return
    url = store.engine.url
    assert url.database is not None
    folder = Path(url.database).parent
    away = folder.with_name(folder.name + ".away")

    def cut() -> None:
        folder.rename(away)

    def restore() -> None:
        away.rename(folder)

    yield Outage(cut=cut, restore=restore)
