"""Alembic environment of voltpack's store.

Run programmatically by `Store.migrate()` (which hands over its own connection in
`config.attributes["connection"]`), or by a developer with the `alembic` command and the
`alembic.ini` described in `docs/store.md` (which uses `sqlalchemy.url` or
`VOLTPACK_DATABASE_URL`).
"""

from __future__ import annotations

import logging.config

from alembic import context
from sqlalchemy import Connection

from voltpack.store.schema import Base
from voltpack.store.url import create_store_engine, resolve_url


def run_with(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        run_with(connection)
        return
    if context.config.config_file_name is not None:
        logging.config.fileConfig(context.config.config_file_name, disable_existing_loggers=False)
    engine = create_store_engine(resolve_url(context.config.get_main_option("sqlalchemy.url")))
    try:
        with engine.connect() as own:
            run_with(own)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("voltpack's migrations run online only: give a database URL")
run_online()
