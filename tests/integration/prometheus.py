"""A real Prometheus server (and promtool) for integration tests.

The binaries come from the distribution (`apt install prometheus`). In CI (the `CI` environment
variable set) a missing binary fails the test with the install hint; elsewhere it skips,
naming the binary.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.integration.services import missing_service

READY_TIMEOUT_S = 60.0
"""How long to wait for Prometheus to start or a condition to hold before failing a test."""


def require_binary(name: str) -> str:
    """The path of `name`; fail in CI, skip elsewhere, when it is not installed."""
    fallback = Path("/usr/bin") / name
    path = shutil.which(name) or (str(fallback) if fallback.is_file() else None)
    if path is not None:
        return path
    missing_service("Prometheus", f"{name} is not installed (Debian's prometheus provides it)")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def promtool_check_metrics(exposition: bytes) -> subprocess.CompletedProcess[str]:
    """Run `promtool check metrics` on an exposition; returns the completed process."""
    promtool = require_binary("promtool")
    return subprocess.run(
        [promtool, "check", "metrics"],
        input=exposition.decode(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def http_get(url: str, timeout_s: float = 10.0) -> tuple[int, bytes]:
    """(status, body) of a GET; HTTP errors are returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read())


class PrometheusServer:
    """A running `prometheus` process; `query()` runs an instant PromQL query."""

    def __init__(self, process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
        self.process = process
        self.url = url
        self.log_path = log_path

    def log(self) -> str:
        """Prometheus' own output so far (for failure messages)."""
        return self.log_path.read_text(errors="replace")[-4000:]

    def api(self, path: str, **params: str) -> Any:
        """GET an HTTP API path and return its `data` (asserting status success)."""
        query = urllib.parse.urlencode(params)
        status, body = http_get(f"{self.url}{path}?{query}")
        assert status == 200, f"{path} {params}: HTTP {status}: {body[:500]!r}"
        payload = json.loads(body)
        assert payload["status"] == "success", payload
        return payload["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of `expr` now: a list of {"metric": labels, "value": [t, v]}."""
        data = self.api("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", data
        result: list[dict[str, Any]] = data["result"]
        return result

    def wait_until(
        self, what: str, condition: Callable[[], bool], timeout_s: float = READY_TIMEOUT_S
    ) -> None:
        """Poll `condition` until it holds; fail with `what` and Prometheus' log otherwise."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"prometheus exited:\n{self.log()}"
            if condition():
                return
            time.sleep(0.25)
        pytest.fail(f"timed out waiting for {what}; prometheus log:\n{self.log()}")

    def wait_for_query(
        self,
        expr: str,
        condition: Callable[[list[dict[str, Any]]], bool],
        timeout_s: float = READY_TIMEOUT_S,
    ) -> list[dict[str, Any]]:
        """Poll `expr` until `condition(result)` holds and return that result."""
        last: list[dict[str, Any]] = []

        def check() -> bool:
            nonlocal last
            last = self.query(expr)
            return condition(last)

        self.wait_until(f"{expr!r} (last result: {last})", check, timeout_s)
        return last

    def targets_up(self) -> bool:
        """Whether every active scrape target is up."""
        targets = self.api("/api/v1/targets")["activeTargets"]
        return bool(targets) and all(target["health"] == "up" for target in targets)


@contextmanager
def running_prometheus(
    tmp_path: Path, targets: list[str], scrape_interval_s: int = 1, rules: Path | None = None
) -> Iterator[PrometheusServer]:
    """Start Prometheus scraping `targets` ("host:port") and, given `rules`, evaluating them
    every scrape interval; wait until ready; kill it by PID."""
    binary = require_binary("prometheus")
    config = tmp_path / "prometheus.yml"
    rule_lines = (
        f"  evaluation_interval: {scrape_interval_s}s\nrule_files: [{json.dumps(str(rules))}]\n"
        if rules is not None
        else ""
    )
    config.write_text(
        "global:\n"
        f"  scrape_interval: {scrape_interval_s}s\n"
        f"  scrape_timeout: {scrape_interval_s}s\n" + rule_lines + "scrape_configs:\n"
        "  - job_name: voltpack-agent\n"
        "    static_configs:\n"
        f"      - targets: {json.dumps(targets)}\n"
    )
    port = free_port()
    log_path = tmp_path / "prometheus.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = PrometheusServer(process, f"http://127.0.0.1:{port}", log_path)
    try:
        server.wait_until("prometheus to be ready", lambda: _ready(server.url))
        yield server
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=20)


def _ready(url: str) -> bool:
    try:
        status, _ = http_get(f"{url}/-/ready", timeout_s=2.0)
    except OSError:
        return False
    return status == 200
