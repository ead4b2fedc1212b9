"""A throwaway PostgreSQL server from the installed binaries, for tests and benchmarks.

`TemporaryPostgres` runs `initdb` in a temporary folder, starts the server on a free port of
127.0.0.1 (its unix socket in the same folder), and removes everything on `close()`. PostgreSQL
refuses to run as root: as root, the binaries run as the `postgres` user (`runuser`). The
server is tuned for throwaway use (`fsync=off`): never point it at data you want to keep.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

import psycopg
from psycopg import sql

from voltpack.store.errors import StoreError

BIN_ENV = "VOLTPACK_POSTGRES_BIN"
"""Folder of PostgreSQL's server binaries, if not under /usr/lib/postgresql/*/bin or on PATH."""

NEEDED = ("initdb", "pg_ctl", "postgres")
SUPERUSER = "postgres"


class PostgresNotFoundError(StoreError):
    """PostgreSQL's server binaries (or, as root, the `postgres` user) are not installed."""


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", path.parent.name)) or (0,)


def postgres_bin() -> Path:
    """The folder holding `initdb`, `pg_ctl` and `postgres` (the newest installed version).

    Looks in `$VOLTPACK_POSTGRES_BIN`, then `/usr/lib/postgresql/*/bin`, then PATH. Raises
    `PostgresNotFoundError` naming the missing binary.
    """
    candidates: list[Path] = []
    if os.environ.get(BIN_ENV):
        candidates.append(Path(os.environ[BIN_ENV]))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key, reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for folder in candidates:
        missing = [name for name in NEEDED if not (folder / name).is_file()]
        if not missing:
            return folder
    looked = ", ".join(str(c) for c in candidates) or "nowhere"
    raise PostgresNotFoundError(
        f"PostgreSQL's initdb is not installed (looked in ${BIN_ENV}, "
        f"/usr/lib/postgresql/*/bin and PATH: {looked}); "
        "install it with `apt-get install postgresql` or set "
        f"{BIN_ENV} to the folder holding {', '.join(NEEDED)}"
    )


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TemporaryPostgres:
    """A PostgreSQL server of its own, in a temporary folder; use as a context manager.

    `url(database)` is the SQLAlchemy URL of a database on it; `create_database(name)` makes
    one. `stop()` and `start()` stop and restart the same server (same port, same data), to test
    outages.
    """

    def __init__(self, *, bin_dir: Path | None = None, settings: dict[str, str] | None = None):
        self.bin_dir = bin_dir or postgres_bin()
        self.settings = {
            "listen_addresses": "127.0.0.1",
            "fsync": "off",
            "full_page_writes": "off",
            "synchronous_commit": "off",
            "max_connections": "50",
            **(settings or {}),
        }
        self._prefix: list[str] = []
        self._owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self._owner = pwd.getpwnam(SUPERUSER)
            except KeyError:
                raise PostgresNotFoundError(
                    "PostgreSQL refuses to run as root and there is no 'postgres' user to run "
                    "it as; install the postgresql package (it creates the user)"
                ) from None
            runuser = shutil.which("runuser")
            if runuser:
                self._prefix = [runuser, "-u", SUPERUSER, "--"]
            else:
                self._prefix = []  # fall back to su (see _run)
        self.base = Path(tempfile.mkdtemp(prefix="voltpack-pg-"))
        self.data = self.base / "data"
        self.socket_dir = self.base / "sock"
        self.log_file = self.base / "postgres.log"
        self.socket_dir.mkdir()
        if self._owner is not None:
            for path in (self.base, self.socket_dir):
                os.chown(path, self._owner.pw_uid, self._owner.pw_gid)
        self.port = 0
        self.running = False
        self._initialised = False

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / argv[0]), *argv[1:]]
        if self._owner is not None and not self._prefix:
            command = ["su", SUPERUSER, "-s", "/bin/sh", "-c", " ".join(map(_quote, command))]
        else:
            command = [*self._prefix, *command]
        env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
        result = subprocess.run(
            command, cwd=self.base, env=env, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            log_tail = self.log_file.read_text()[-2000:] if self.log_file.exists() else ""
            raise StoreError(
                f"{argv[0]} failed ({result.returncode}): {result.stderr.strip()}\n{log_tail}"
            )
        return result

    def start(self) -> None:
        """Initialise (the first time) and start the server; returns once it accepts clients."""
        if self.running:
            return
        if not self._initialised:
            self._run(
                "initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
                "--locale=C", "--no-sync",
            )  # fmt: skip
            self._initialised = True
        attempts = 1 if self.port else 3
        for attempt in range(attempts):
            port = self.port or free_port()
            options = [f"-p {port}", f"-k {self.socket_dir}"]
            options += [f"-c {key}={value}" for key, value in self.settings.items()]
            try:
                self._run(
                    "pg_ctl", "-D", str(self.data), "-l", str(self.log_file), "-w", "-t", "60",
                    "-o", " ".join(options), "start",
                )  # fmt: skip
            except StoreError:
                if attempt == attempts - 1:
                    raise
                continue
            self.port = port
            self.running = True
            return

    def stop(self) -> None:
        """Stop the server (fast shutdown: clients are disconnected)."""
        if self.running:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
            self.running = False

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of `database` on this server (psycopg 3, trust authentication)."""
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create the database `name` and return its URL."""
        dsn = f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def close(self) -> None:
        """Stop the server and delete its folder."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        self.start()
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        self.close()


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"
