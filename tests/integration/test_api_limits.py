"""The admin API bounds what a request may cost: bodies over the limit get 413 unread (declared
or streamed), authentication comes before any body is read, caps are strictly typed and within
what the domain can honour, hostile YAML gets a short error, and simulations and dry runs
are bounded.

Requests that must not be read are sent over a raw socket, so the test sees exactly how much of
a body the server took before it answered.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from kubernetes import client

from tests import hostile_yaml
from tests.dry_runs import finished_dry_run
from tests.integration.conftest import serving, wait_for
from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens
from voltpack.api.dry_runs import DryRunRunner
from voltpack.api.simulations import SimulationRunner
from voltpack.emulator import RunningEmulator
from voltpack.model.admin import DryRunResult
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.operator.kube.crds import install_crds
from voltpack.policies.schema import PolicyFile, example_policy_path, load_policy, parse_policy

ADMIN = "limits-admin-token"
LIMIT = 256 * 1024
VALIDATE = "/api/v1/policy/validate"
SMALL_TRACE = "physical_cluster/small_test.trace"


@dataclass
class Api:
    url: str
    runner: SimulationRunner
    dry_runs: DryRunRunner
    source: KubeAdminSource
    emulator: RunningEmulator

    def send(self, method: str, path: str, body: Any, token: str | None = ADMIN) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.request(method, self.url + path, json=body, headers=headers, timeout=30)


@pytest.fixture
def api(emulator: RunningEmulator, tmp_path: Path) -> Iterator[Api]:
    kube = client.ApiClient(client.Configuration(host=emulator.url))
    install_crds(client.ApiextensionsV1Api(kube))
    client.CoreV1Api(kube).create_namespace({"metadata": {"name": "voltpack-system"}})
    tokens_file = tmp_path / "tokens.csv"
    tokens_file.write_text(f"{ADMIN},ada,admin\n")
    tokens = StaticTokens.from_file(tokens_file)
    path = example_policy_path("fgd")
    source = KubeAdminSource(kube, load_policy(path), path.read_text())
    runner = SimulationRunner(max_active=2, max_finished=3)
    dry_runs = DryRunRunner(max_active=1, max_finished=2)
    deps = ApiDependencies(
        cluster=source,
        policies=source,
        authenticator=tokens,
        authorizer=tokens,
        simulations=runner,
        dry_runs=dry_runs,
        max_body_bytes=LIMIT,
    )
    with serving(create_app(deps)) as url:
        yield Api(url, runner, dry_runs, source, emulator)
    runner.shutdown()
    dry_runs.shutdown()
    source.close()
    kube.close()


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=10)


def _head(path: str, token: str | None, length: int | None) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: test", "Content-Type: application/json"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _status(sock: socket.socket) -> tuple[int, str]:
    """The response's status and what it carried, read until the server closes or 10 s."""
    data = b""
    deadline = time.monotonic() + 10
    while b"\r\n\r\n" not in data or time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
        if b"\r\n\r\n" in data and data.split(b"\r\n\r\n", 1)[1].rstrip().endswith(b"}"):
            break
    assert data, "no answer: the server waited for a body it should not read"
    return int(data.split(b" ", 2)[1]), data.decode(errors="replace")


def test_a_declared_body_over_the_limit_gets_413_before_it_is_sent(api: Api) -> None:
    for token in (ADMIN, None, "not-a-token"):
        with _connect(api.url) as sock:
            sock.sendall(_head(VALIDATE, token, 200_000_000))  # headers only: no body follows
            status, text = _status(sock)
        assert status == 413, text
        assert f"at most {LIMIT} bytes" in text


def test_an_unauthenticated_body_is_refused_without_being_read(api: Api) -> None:
    for token in (None, "not-a-token"):
        with _connect(api.url) as sock:
            sock.sendall(_head(VALIDATE, token, LIMIT // 2))  # the body never comes
            status, text = _status(sock)
        assert status == 401, text
        assert "www-authenticate: bearer" in text.lower()


def _stream(api: Api, token: str | None, max_bytes: int) -> tuple[int, int]:
    """Send a chunked body until the server answers (or `max_bytes`); (status, bytes sent)."""
    chunk = b"x" * 16384
    sent = 0
    with _connect(api.url) as sock:
        sock.sendall(_head(VALIDATE, token, None))
        while sent < max_bytes:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            try:
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            except OSError:  # the server closed: it is not reading any more
                break
            sent += len(chunk)
        else:
            sock.sendall(b"0\r\n\r\n")
        status, _ = _status(sock)
    return status, sent


def test_a_streamed_body_is_cut_off_once_it_passes_the_limit(api: Api) -> None:
    status, sent = _stream(api, ADMIN, 64 * 1024 * 1024)
    assert status == 413
    # what the server read stopped at the limit; the rest of what was sent sat in socket buffers
    assert sent < 32 * 1024 * 1024, sent
    status, sent = _stream(api, None, 64 * 1024 * 1024)
    assert status == 401 and sent < 32 * 1024 * 1024, sent
    assert api.send("POST", VALIDATE, {"text": "x" * (LIMIT // 2)}).status_code == 200


@pytest.mark.parametrize(
    ("cap", "word"),
    [
        (True, "valid number"),
        ("12000", "valid number"),
        (float("inf"), "finite"),
        (0, "greater than 0"),
        (20001, "above the budget of power domain row-1 (20000 W)"),
        (50, "below 2200 W, the sum of the minimum power limits"),
    ],
)
def test_a_cap_is_a_number_of_watts_the_domain_can_honour(
    api: Api, emulator: RunningEmulator, cap: Any, word: str
) -> None:
    kube = client.ApiClient(client.Configuration(host=emulator.url))
    budget = {
        "apiVersion": "voltpack.io/v1alpha1",
        "kind": "PowerBudget",
        "metadata": {"name": "row-1"},
        "spec": {"nodeSelector": {"matchLabels": {}}, "budgetW": 20000},
    }
    client.CustomObjectsApi(kube).create_cluster_custom_object(
        "voltpack.io", "v1alpha1", "powerbudgets", budget
    )
    path = "/api/v1/power/domains/row-1/cap"
    wait_for(lambda: api.send("POST", path, {"cap_w": 20000}).status_code == 200, what="row-1")
    text = json.dumps({"cap_w": cap}, allow_nan=True)
    answer = httpx.post(
        api.url + path,
        content=text,
        headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 422, answer.text
    assert word in answer.text
    # the domain's cap is the last accepted one
    assert api.send("POST", path, {"cap_w": 2200.5}).json()["manual_cap_w"] == 2200.5
    kube.close()


@pytest.mark.parametrize("name", ["ALIAS_BOMB", "DEEP_NESTING", "RECURSIVE_ALIAS"])
def test_hostile_yaml_gets_a_short_error(api: Api, name: str) -> None:
    text = getattr(hostile_yaml, name)
    validated = api.send("POST", VALIDATE, {"text": text})
    assert validated.status_code == 200, validated.text[:500]
    assert validated.json()["valid"] is False and len(validated.content) < 1000
    assert "not valid YAML" in validated.json()["errors"][0]
    applied = api.send("PUT", "/api/v1/policy", {"text": text})
    assert applied.status_code == 422 and len(applied.content) < 1000, applied.text[:500]


def test_errors_echo_at_most_a_bounded_excerpt(api: Api) -> None:
    long_name = "N" * 200_000
    text = "apiVersion: voltpack.io/v1alpha1\nkind: SchedulingPolicy\n"
    text += f"metadata: {{name: {long_name}}}\nspec: {{scoring: {{strategy: fgd}}}}\n"
    answer = api.send("PUT", "/api/v1/policy", {"text": text})
    assert answer.status_code == 422 and len(answer.content) < 2000, len(answer.content)
    trace = api.send("POST", "/api/v1/simulations", {"policies": ["p" * 100_000]})
    assert trace.status_code == 422 and len(trace.content) < 3000, len(trace.content)


SIMULATION_WAIT_S = 240.0
"""The default trace's simulation takes seconds alone, over a minute on a loaded 2-core CI
machine (a fresh-clone rehearsal timed out at 60 s while Kubernetes' e2e run shared it)."""


def test_simulations_beyond_the_bound_get_429_and_finished_ones_are_forgotten(api: Api) -> None:
    quick = {"trace": SMALL_TRACE, "cluster": "2:2:2", "policies": ["fifo"]}
    slow = api.send("POST", "/api/v1/simulations", {})  # the default trace: seconds
    waiting = api.send("POST", "/api/v1/simulations", quick)  # queued behind it (one worker)
    assert (slow.status_code, waiting.status_code) == (202, 202), waiting.text
    refused = api.send("POST", "/api/v1/simulations", quick)
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["retry-after"]) > 0 and "queued or running" in refused.text
    ids = [slow.json()["id"], waiting.json()["id"]]

    def status(run_id: str) -> httpx.Response:
        return api.send("GET", f"/api/v1/simulations/{run_id}", None)

    for _ in range(3):  # as runs finish, new ones are accepted again
        answer = wait_for(
            lambda: (a := api.send("POST", "/api/v1/simulations", quick)).status_code == 202 and a,
            timeout_s=SIMULATION_WAIT_S,
            what="room for another simulation",
        )
        ids.append(answer.json()["id"])
    wait_for(
        lambda: status(ids[-1]).json()["status"] == "done",
        timeout_s=SIMULATION_WAIT_S,
        what="the last",
    )
    kept = [run_id for run_id in ids if status(run_id).status_code == 200]
    assert kept == ids[-3:], (kept, ids)  # the three newest finished runs; older ones forgotten


class HeldCluster:
    """The API's own cluster source, whose dry runs wait until the test lets them go: a run
    that is still running when the next one is submitted, whatever the machine's speed."""

    def __init__(self, source: KubeAdminSource) -> None:
        self.source = source
        self.go = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)

    def dry_run(self, policy: PolicyFile) -> DryRunResult:
        assert self.go.wait(60)
        return self.source.dry_run(policy)


def test_dry_runs_are_polled_bounded_and_forgotten(api: Api) -> None:
    text = example_policy_path("best-fit").read_text()
    auth = {"Authorization": f"Bearer {ADMIN}"}
    first = finished_dry_run(api.url, auth, text)
    assert first["status"] == "done" and first["result"]["policy"] == "best-fit", first
    unknown = api.send("GET", "/api/v1/policy/dry-runs/nope", None)
    assert unknown.status_code == 404 and "nope" in unknown.json()["detail"]
    bad = api.send("POST", "/api/v1/policy/dry-runs", {"text": "spec: {scoring: 1}"})
    assert bad.status_code == 422, bad.text  # refused at once, nothing queued

    held = HeldCluster(api.source)
    running = api.dry_runs.submit(held, parse_policy(text, "test"), "ada")  # the one slot
    refused = api.send("POST", "/api/v1/policy/dry-runs", {"text": text})
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["retry-after"]) > 0 and "queued or running" in refused.text
    polled = api.send("GET", f"/api/v1/policy/dry-runs/{running.id}", None).json()
    assert polled["status"] in ("queued", "running") and polled["result"] is None
    held.go.set()
    wait_for(lambda: running.status == "done", timeout_s=60, what="the held dry run")
    ids = [first["id"], running.id]
    for _ in range(2):  # room again; the oldest finished runs are forgotten beyond two
        ids.append(finished_dry_run(api.url, auth, text)["id"])
    kept = [
        i for i in ids if api.send("GET", f"/api/v1/policy/dry-runs/{i}", None).status_code == 200
    ]
    assert kept == ids[-2:], (kept, ids)


def test_a_dry_run_with_the_cluster_gone_fails_saying_so(api: Api) -> None:
    text = example_policy_path("best-fit").read_text()
    assert api.send("GET", "/api/v1/cluster", None).status_code == 200  # caches filled
    api.emulator.stop()
    wait_for(
        lambda: api.send("GET", "/api/v1/cluster", None).status_code == 503,
        timeout_s=120,
        what="the caches stale",
    )
    view = finished_dry_run(api.url, {"Authorization": f"Bearer {ADMIN}"}, text)
    assert view["status"] == "failed" and view["result"] is None, view
    assert view["error"].startswith("cluster unavailable"), view
