"""`voltpack api` as the chart runs it (a process of its own, `--database-url`): the history
routes answer from the database, and a policy dry run plans in its child process.

The command took `--database-url` but never opened it, so in a deployment `/decisions`,
`/audit` and the power forecast answered 503 "no database is configured".
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.dry_runs import finished_dry_run
from voltpack.api.server import free_port
from voltpack.emulator import RunningEmulator
from voltpack.policies.schema import example_policy_path
from voltpack.store import Store

TOKEN = "command-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def api_url(emulator: RunningEmulator, tmp_path: Path) -> Iterator[tuple[str, str]]:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f"{TOKEN},ada,admin\n")
    database = f"sqlite:///{tmp_path / 'history.db'}"
    port = free_port()
    command = [
        sys.executable, "-m", "voltpack", "api", f"--server={emulator.url}", f"--port={port}",
        f"--token-file={tokens}", f"--database-url={database}",
    ]  # fmt: skip
    log = (tmp_path / "api.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "api.log").read_text()
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "voltpack api did not start within 60 s"
            time.sleep(0.2)
        yield url, database
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def test_the_history_routes_answer_from_the_database_given(api_url: tuple[str, str]) -> None:
    url, database = api_url
    assert httpx.get(f"{url}/api/v1/decisions", headers=AUTH, timeout=30).status_code == 200
    text = example_policy_path("best-fit").read_text()
    applied = httpx.put(f"{url}/api/v1/policy", headers=AUTH, json={"text": text}, timeout=30)
    assert applied.status_code == 200, applied.text

    def audited() -> list[str]:
        answer = httpx.get(f"{url}/api/v1/audit", headers=AUTH, timeout=30)
        assert answer.status_code == 200, answer.text
        return [entry["action"] for entry in answer.json()]

    deadline = time.monotonic() + 30
    while "policy.apply" not in audited():  # the store buffers writes: a moment
        assert time.monotonic() < deadline, audited()
        time.sleep(0.2)
    with Store.open(database) as store:  # in the database itself, not only in memory
        assert [e.action for e in store.list_audit()] == ["policy.apply"]


def test_a_dry_run_of_the_command_plans_in_its_child(api_url: tuple[str, str]) -> None:
    url, _ = api_url
    view = finished_dry_run(url, AUTH, example_policy_path("fgd").read_text())
    assert view["status"] == "done" and view["result"]["policy"] == "fgd", view
