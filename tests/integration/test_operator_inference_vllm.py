"""An InferenceService planned from its replicas' own vLLM counters (scaling.rateSource: vllm),
over the emulator, with each replica's metrics served by a real HTTP server speaking vLLM's
Prometheus format (the fake is the vLLM server itself: the lowest boundary).

The emulator gives Running pods unreachable 10.244.x.x IPs; the test points each replica at
its own fake server by writing the pod's status.podIP (127.0.0.N, one loopback address per
replica, one port for all) through the API, as a CNI would.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import wait_for
from tests.integration.test_operator_inference import (  # noqa: F401 (fixtures)
    condition,
    crds,
    create,
    emulator,
    events,
    get,
    replicas,
    settle,
)
from tests.integration.test_operator_inference import operator as operator_fixture  # noqa: F401
from voltpack.operator.runner import Operator

VLLM_PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="llama3-8b"}} {running}
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="llama3-8b"}} {waiting}
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="llama3-8b"}} {stop}
vllm:request_success_total{{engine="0",finished_reason="length",model_name="llama3-8b"}} {length}
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",model_name="llama3-8b"}} {prompt}
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="llama3-8b"}} {generation}
"""


@dataclass
class FakeVllm:
    """One replica's vLLM metrics endpoint; `finished` grows as the test's load says."""

    server: ThreadingHTTPServer
    finished: float = 0.0
    waiting: float = 0.0
    broken: bool = False
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    prompt_per_s: float = 0.0
    """Prompt tokens it prefills per second (the token counters grow every tick)."""
    generation_per_s: float = 0.0


@dataclass
class Network:
    """Fake vLLM servers on 127.0.0.N:port, one per replica, and the load they report."""

    port: int = 0
    servers: dict[str, FakeVllm] = field(default_factory=dict)
    """By pod uid."""
    live: set[str] = field(default_factory=set)
    """Uids of the replicas that exist now."""
    load_per_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def serve(self, address: str) -> FakeVllm:
        fake: FakeVllm

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with network.lock:
                    if fake.broken:
                        body = b"<html>502 Bad Gateway</html>"
                    else:
                        stop = int(fake.finished * 0.8)
                        body = VLLM_PAGE.format(
                            running=1.0,
                            waiting=fake.waiting,
                            stop=float(stop),
                            length=float(int(fake.finished) - stop),
                            prompt=float(int(fake.prompt_tokens)),
                            generation=float(int(fake.generation_tokens)),
                        ).encode()
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        network = self
        server = ThreadingHTTPServer((address, self.port), Handler)
        self.port = server.server_address[1]
        fake = FakeVllm(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return fake


@pytest.fixture
def network(core: client.CoreV1Api) -> Iterator[Network]:
    """Every Running replica gets a fake server and its pod IP; the load ticks every 0.1 s."""
    net = Network()
    stop = threading.Event()

    def run() -> None:
        ticked = time.monotonic()
        while not stop.wait(0.1):
            now = time.monotonic()
            with net.lock:
                live = [f for u, f in net.servers.items() if u in net.live and not f.broken]
                for fake in live:
                    fake.finished += net.load_per_s * (now - ticked) / len(live)
                    fake.prompt_tokens += fake.prompt_per_s * (now - ticked)
                    fake.generation_tokens += fake.generation_per_s * (now - ticked)
            ticked = now
            selector = "voltpack.io/inference-service"
            pods = core.list_namespaced_pod("default", label_selector=selector).items
            with net.lock:
                net.live = {p.metadata.uid for p in pods if not p.metadata.deletion_timestamp}
            for pod in pods:
                uid = pod.metadata.uid
                if pod.status.phase != "Running" or uid in net.servers:
                    continue
                address = f"127.0.0.{len(net.servers) + 2}"
                fake = net.serve(address)
                with net.lock:
                    net.servers[uid] = fake
                try:
                    core.patch_namespaced_pod_status(
                        pod.metadata.name,
                        "default",
                        {"status": {"podIP": address, "podIPs": [{"ip": address}]}},
                    )
                except ApiException as error:
                    if error.status != 404:  # a replica replaced meanwhile
                        raise

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield net
    finally:
        stop.set()
        thread.join(timeout=5)
        for fake in net.servers.values():
            fake.server.shutdown()
            fake.server.server_close()


def served_replica(network: Network) -> tuple[str, FakeVllm]:
    """A replica that exists and has its fake server (uid, server)."""

    def found() -> tuple[str, FakeVllm] | None:
        with network.lock:
            served = [(u, f) for u, f in network.servers.items() if u in network.live]
        return served[0] if served else None

    result: tuple[str, FakeVllm] = wait_for(found, timeout_s=30, what="a served replica")
    return result


def status_of(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return dict(get(custom, name).get("status") or {})


def _planned_down_from_whole_counts(service: dict[str, Any]) -> bool:
    """The plan is below 1/s and every replica answered the scrape it was made from."""
    status = service.get("status") or {}
    whole = condition(service, "MetricsAvailable").get("status") == "True"
    return whole and status.get("planningRatePerSecond", 1.0) < 1.0


def test_the_operator_plans_from_the_replicas_vllm_counters_and_never_down_on_missing_data(
    operator_fixture: Operator,  # noqa: F811 (the imported fixture)
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    network: Network,
) -> None:
    # one port for every fake server (each on its own loopback address), named in the spec
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        network.port = probe.getsockname()[1]
    scaling = {
        "mode": "burst",
        "rateSource": "vllm",
        "sampleSeconds": 1,
        "replanRateChange": 0.3,
        "burstWindowMinutes": 0.1,  # 6 slots
        "metrics": {"port": network.port, "timeoutSeconds": 0.5},
    }
    create(custom, "counted", scaling=scaling)

    # steady load: the replicas count 6 requests/s between them; the plan follows
    network.load_per_s = 6.0
    wait_for(
        lambda: (
            status_of(custom, "counted").get("rateSourceKind") == "vllm"
            and status_of(custom, "counted")["planningRatePerSecond"] > 5.0
        ),
        timeout_s=60,
        what="a plan from the vLLM counters",
        explain=lambda: str(status_of(custom, "counted")),
    )
    status = status_of(custom, "counted")
    # a steady 6/s counted in 1-s slots: scrape jitter moves requests between slots, and the
    # burst-aware rate covers the busiest ones (8.1/s seen on a loaded machine)
    assert 5.0 < status["planningRatePerSecond"] < 9.0, status
    assert status["rateSource"].startswith("burst-aware (vLLM request counters")
    assert "within the TTFT SLO of 3 s" in status["rateSource"]
    assert status["predictedCostPerHour"] > 0 and 0 < status["predictedSloAttainment"] <= 1
    wait_for(
        lambda: condition(get(custom, "counted"), "MetricsAvailable").get("status") == "True",
        timeout_s=30,
        what="every replica answering",
    )
    assert any("vLLM request counters" in e.message for e in events(core, "counted", "Replanned"))
    assert abs(status["observedRatePerSecond"] - 6.0) < 3.0

    # a replica restarts (its counter starts again from 0): a reset, not a negative rate
    _, restarted = served_replica(network)
    with network.lock:
        restarted.finished = 0.0
    settle(operator_fixture, 60)
    assert status_of(custom, "counted")["latestRatePerSecond"] > 3.0

    # a replica answers garbage and the load stops: the counts are incomplete, so the rate
    # is not lowered, and the status and an Event name the pod and its endpoint
    wait_for(
        lambda: condition(get(custom, "counted"), "MetricsAvailable").get("status") == "True",
        timeout_s=30,
        what="every replica answering again",
    )
    planned = status_of(custom, "counted")["planningRatePerSecond"]
    broken_uid, broken = served_replica(network)
    with network.lock:
        broken.broken = True
        network.load_per_s = 0.0
    broken_pod = next(p for p in replicas(core, "counted") if p.metadata.uid == broken_uid)
    url = f"http://{broken_pod.status.pod_ip}:{network.port}/metrics"
    failed = wait_for(
        lambda: (
            url in condition(get(custom, "counted"), "MetricsAvailable").get("message", "")
            and condition(get(custom, "counted"), "MetricsAvailable")
        ),
        timeout_s=30,
        what="the scrape failure said",
    )
    assert f"pod {broken_pod.metadata.name} ({url})" in failed["message"]
    assert "not lowered" in failed["message"] and failed["reason"] == "ScrapeFailed"
    assert failed["status"] == "False"
    time.sleep(8)  # longer than the burst window: the counted rate is now near zero
    status = status_of(custom, "counted")
    assert status["planningRatePerSecond"] == planned
    assert status["latestRatePerSecond"] == pytest.approx(planned)
    warnings = [e for e in events(core, "counted", "MetricsUnavailable") if url in e.message]
    assert len(warnings) == 1 and warnings[0].type == "Warning"

    # every replica answers again: the quiet window is planned down
    with network.lock:
        broken.broken = False
    # (read from one object: on a loaded machine a later scrape may time out again)
    wait_for(
        lambda: _planned_down_from_whole_counts(get(custom, "counted")),
        timeout_s=60,
        what="a plan down once the counts are whole",
        explain=lambda: str(status_of(custom, "counted")),
    )
