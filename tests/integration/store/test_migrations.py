"""Migrations up and down on both databases, URLs, and SQLite's settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from voltpack.store import (
    URL_ENV,
    Store,
    StoreConfigError,
    StoreUnavailableError,
    TemporaryPostgres,
    resolve_url,
)
from voltpack.store.schema import Base

TABLES = {
    "decisions",
    "decision_counts",
    "job_history",
    "power_samples",
    "simulation_runs",
    "audit",
}


def tables(store: Store) -> set[str]:
    return set(inspect(store.engine).get_table_names()) - {"alembic_version"}


def test_migrations_go_down_to_nothing_and_up_again(store: Store) -> None:
    assert tables(store) == TABLES
    assert store.schema_revision() == "0006"
    store.add_decisions([])
    store.downgrade("0001")
    assert tables(store) == {"decisions"}
    assert store.schema_revision() == "0001"
    store.downgrade("base")
    assert tables(store) == set()
    assert store.schema_revision() is None
    store.migrate()
    assert tables(store) == TABLES
    assert store.schema_revision() == "0006"
    indexes = {ix["name"] for ix in inspect(store.engine).get_indexes("decisions")}
    assert indexes == {
        "ix_decisions_at_s_id",
        "ix_decisions_job_at_s_id",
        "ix_decisions_node_at_s_id",
    }


def test_migrated_schema_matches_the_orm_tables(store: Store) -> None:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, Base.metadata)
    assert differences == []


def test_the_developers_alembic_command_sees_no_pending_change(
    store: Store, store_url: str
) -> None:
    ini = Path(__file__).resolve().parents[3] / "voltpack" / "store" / "alembic.ini"
    env = {**os.environ, URL_ENV: store_url}
    alembic = [sys.executable, "-m", "alembic", "-c", str(ini)]
    for command in (["upgrade", "head"], ["check"], ["current"]):
        result = subprocess.run(
            [*alembic, *command], env=env, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stderr
    assert "0006 (head)" in result.stdout


def test_migrating_twice_changes_nothing(store: Store) -> None:
    store.migrate()
    assert store.schema_revision() == "0006"


def test_sqlite_uses_wal_and_foreign_keys(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'v.db'}") as store, store.engine.connect() as c:
        assert c.execute(text("PRAGMA journal_mode")).scalar_one() == "wal"
        assert c.execute(text("PRAGMA foreign_keys")).scalar_one() == 1


def test_default_url_is_voltpack_db_in_the_working_dir_or_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(URL_ENV, raising=False)
    with Store.open() as store:
        assert store.dialect == "sqlite"
    assert (tmp_path / "voltpack.db").is_file()
    monkeypatch.setenv(URL_ENV, f"sqlite:///{tmp_path / 'from-env.db'}")
    with Store.open():
        pass
    assert (tmp_path / "from-env.db").is_file()


def test_postgres_urls_select_psycopg_3() -> None:
    for url in ("postgresql://u:p@db/v", "postgres://u:p@db/v", "postgresql+psycopg://u@db/v"):
        assert resolve_url(url).drivername == "postgresql+psycopg"


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("not a url", "not a url"),
        ("mysql://root:secret@db/voltpack", "mysql://root:***@db/voltpack"),
        ("postgresql+psycopg2://u:secret@db/v", "postgresql+psycopg2://u:***@db/v"),
    ],
)
def test_a_bad_url_is_a_voltpack_error_naming_it_without_its_password(url: str, named: str) -> None:
    with pytest.raises(StoreConfigError) as raised:
        Store.open(url)
    assert named in str(raised.value)
    assert "secret" not in str(raised.value)


def test_opening_without_create_needs_an_existing_file(tmp_path: Path) -> None:
    with pytest.raises(StoreConfigError, match="does not exist"):
        Store.open(f"sqlite:///{tmp_path / 'missing.db'}", create=False)
    assert not (tmp_path / "missing.db").exists()


def test_an_unreachable_postgresql_is_reported_as_unavailable(
    postgres_server: TemporaryPostgres,
) -> None:
    # a database that does not exist on a running server, then a port nothing listens on
    url = postgres_server.url("never_created")
    with pytest.raises(StoreUnavailableError, match="never_created"):
        Store.open(url)
    lazy = Store.open("postgresql://postgres@127.0.0.1:1/x", create=False)
    with pytest.raises(StoreUnavailableError, match="unavailable"):
        lazy.query_decisions()
    lazy.close()


def test_the_hourly_counts_are_backfilled_from_stored_decisions(store: Store) -> None:
    store.downgrade("0005")
    hour = 3600.0
    times = [10 * hour, 10 * hour - 1e-6, 10.5 * hour, 11 * hour, 13 * hour + 5, 20.0]
    with store.engine.begin() as connection:
        for i, at_s in enumerate(times):
            connection.execute(
                text(
                    "INSERT INTO decisions (at_s, subject, placed, reason, policy, cycle_id) "
                    "VALUES (:at_s, 'p', :placed, 'r', 'fgd', 1)"
                ),
                {"at_s": at_s, "placed": i % 2 == 0},
            )
    store.migrate()
    for since_s, until_s in [(None, None), (10 * hour, 11 * hour), (9 * hour, 12 * hour)]:
        kept = [
            (i, t)
            for i, t in enumerate(times)
            if (since_s is None or t >= since_s) and (until_s is None or t < until_s)
        ]
        summary = store.summarize_decisions(since_s=since_s, until_s=until_s)
        assert summary.decisions == len(kept)
        assert summary.placed == sum(1 for i, _ in kept if i % 2 == 0)
