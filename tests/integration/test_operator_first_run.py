"""The operator's first run against a bare API server: each missing piece said once, in one line
with its fix, then quiet retries until it is fixed.

`voltpack operator` and `voltpack emulator` run as a user runs them (subprocesses); the fixes are
the commands the lines name, run with kubectl.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kubernetes import client

from tests.integration.conftest import Kubectl, operator_thread, pod_manifest, wait_for
from voltpack.emulator import RunningEmulator
from voltpack.operator.runner import OperatorConfig
from voltpack.policies.schema import policy_for_strategy

REPO = Path(__file__).resolve().parents[2]
DUMP_MARKERS = ("HTTP response headers", "HTTP response body", "Traceback", "Retrying (Retry")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def voltpack_process(log_path: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """`voltpack ARGS` in a subprocess, its output in `log_path`; interrupted on exit."""
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "voltpack", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=env,
        )
        try:
            yield process
        finally:
            process.terminate()
            process.wait(timeout=30)


def lines(log_path: Path, pattern: str) -> list[str]:
    return [line for line in log_path.read_text().splitlines() if re.search(pattern, line)]


def test_first_run_says_each_missing_piece_once_with_its_fix(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    operator_log = tmp_path / "operator.log"
    kubectl = Kubectl(url, tmp_path)
    with voltpack_process(
        operator_log, "operator", "--server", url, "--metrics-port", "-1",
        "--lease-seconds", "2", "--policy", "best-fit",
    ) as operator:  # fmt: skip
        unreachable = f"cannot reach the API server at {url} (Connection refused)"
        wait_for(  # the process starts and imports the operator first: seconds on a busy machine
            lambda: lines(operator_log, re.escape(unreachable)),
            timeout_s=30,
            what="unreachable line",
            explain=lambda: (
                operator_log.read_text(errors="replace")[-2000:] if operator_log.exists() else ""
            ),
        )
        time.sleep(2.0)  # the caches and the Lease retry meanwhile, quietly
        with voltpack_process(tmp_path / "emulator.log", "emulator", "--port", str(port)):
            wait_for(lambda: lines(operator_log, "fixed: unreachable"), timeout_s=60)
            namespace = wait_for(
                lambda: lines(operator_log, "namespace voltpack-system, where the operator"),
                timeout_s=30,
                what="namespace line",
            )
            crds = wait_for(
                lambda: lines(operator_log, "voltpack CRDs are not installed"), what="CRD line"
            )
            time.sleep(3.0)  # the Lease is retried every 0.5 s, the caches with backoff
            assert len(lines(operator_log, "namespace voltpack-system, where")) == 1
            assert "kubectl create namespace voltpack-system" in namespace[0]
            assert "or pass --namespace" in namespace[0]
            assert len(lines(operator_log, "voltpack CRDs are not installed")) == 1
            for plural in ("gpujobs", "gpunodes", "powerbudgets", "queues", "topologies"):
                assert f"{plural}.voltpack.io" in crds[0]
            assert "kubectl apply -f helm/voltpack/crds/" in crds[0]

            kubectl("create", "namespace", "voltpack-system")
            wait_for(lambda: lines(operator_log, "fixed: namespace voltpack-system"), timeout_s=20)
            kubectl("apply", "-f", str(REPO / "helm" / "voltpack" / "crds"))
            wait_for(lambda: lines(operator_log, "fixed: voltpack CRDs"), timeout_s=30)
            kubectl("create", "-f", "-", input_text=_pod_json("first"))
            wait_for(
                lambda: kubectl.json("get", "pod", "first")["spec"].get("nodeName"),
                timeout_s=30,
                what="the first pod bound",
            )
            operator.terminate()  # before the API server goes away
            operator.wait(timeout=30)
    text = operator_log.read_text()
    for marker in DUMP_MARKERS:
        assert marker not in text, text
    assert len(lines(operator_log, re.escape(unreachable))) == 1, text
    warnings = lines(operator_log, " WARNING ")
    assert len(warnings) == 3, text  # the API server, the namespace, the CRDs: once each


def _pod_json(name: str) -> str:
    return json.dumps({**pod_manifest(name, gpus=1), "metadata": {"name": name}})


def test_no_permission_names_the_call_once_with_the_fix(
    emulator: RunningEmulator, core: client.CoreV1Api, caplog: pytest.LogCaptureFixture
) -> None:
    """A 403 (the emulator answers as kube-apiserver's RBAC would) is one line with the
    server's words and the fix; retries stay quiet."""
    core.create_namespace({"metadata": {"name": "voltpack-system"}})
    denied = (
        'nodes is forbidden: User "system:serviceaccount:voltpack-system:voltpack-operator" '
        'cannot list resource "nodes" in API group "" at the cluster scope'
    )
    rule = emulator.faults.fail_next(
        6, status=403, path="/api/v1/nodes$", verb="list", message=denied
    )
    config = OperatorConfig(
        policy=policy_for_strategy("best-fit"),
        identity="op-first",
        cycle_interval_s=0.05,
        lease_duration_s=2,
        power=False,
    )
    with caplog.at_level(logging.INFO), operator_thread(emulator.url, config) as operator:
        wait_for(lambda: rule.hits >= 6, timeout_s=30, what="six denied lists")
        wait_for(lambda: operator.nodes.wait_synced(0), timeout_s=30, what="nodes listed")
    said = [r.getMessage() for r in caplog.records if "no permission" in r.getMessage()]
    assert said == [
        f"no permission: {denied}; grant it: the chart's RBAC (helm/voltpack/templates/rbac.yaml)"
        " gives the operator's account exactly what it needs; retrying quietly"
    ]
    fixed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("fixed: ")]
    assert fixed == [f"fixed: forbidden: {denied} (cache nodes works now)"]
    assert not [r for r in caplog.records if "HTTP response" in r.getMessage()]
