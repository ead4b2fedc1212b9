"""The node agent: samples every GPU through a backend and serves `/metrics` and `/healthz`.

One sampling thread reads power (and energy, and the cap) every `power_interval_s` and
everything else every `full_interval_s`; the protocol has a single `sample()` call, so a power
pass reads a full sample and keeps only its power fields. A GPU whose reading fails
(`GpuLostError` or any `TelemetryError`) is marked unhealthy, logged once, and retried on each
full pass while the other GPUs keep being sampled. An HTTP server in a background thread serves
the metrics (Prometheus text format) and `/healthz`: 200 with a JSON body while the last sampling
pass is younger than `stale_after_intervals` power intervals, 503 otherwise.

`start_agent(...)` returns a running agent at once (tests); `run_agent(...)` blocks until its
stop event is set or, from the main thread, SIGTERM/SIGINT arrives.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any

from voltpack.telemetry.device import GpuBackend, GpuInventory, GpuSample, TelemetryError
from voltpack.telemetry.exporter import (
    CONTENT_TYPE,
    GpuReading,
    NodeReadings,
    PodMapping,
    TelemetryExporter,
)

_log = logging.getLogger(__name__)

DEFAULT_PORT = 9410
"""The agent's default metrics port (dcgm-exporter uses 9400, so both can run side by side)."""


class NodeAgent:
    """Samples a backend's GPUs and keeps the latest readings; thread-safe, no threads of its own.

    `clock` is monotonic seconds (scheduling and staleness), `wall_clock` Unix seconds (the
    timestamp exported as `voltpack_agent_last_sample_timestamp_seconds`).
    """

    def __init__(
        self,
        backend: GpuBackend,
        node_name: str,
        *,
        power_interval_s: float = 1.0,
        full_interval_s: float = 10.0,
        stale_after_intervals: float = 3.0,
        dcgm_compat: bool = False,
        pod_mapping: PodMapping | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if power_interval_s <= 0 or full_interval_s <= 0:
            raise TelemetryError(
                "agent: power_interval_s and full_interval_s must be positive, got "
                f"{power_interval_s} and {full_interval_s}"
            )
        self.backend = backend
        self.node_name = node_name
        self.power_interval_s = power_interval_s
        self.full_interval_s = full_interval_s
        self.stale_after_s = stale_after_intervals * power_interval_s
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._inventory: list[GpuInventory] = backend.inventory()
        self._samples: dict[int, GpuSample] = {}
        self._failing: dict[int, str] = {}  # index -> error message, while unhealthy
        self._last_pass_mono: float | None = None
        self._last_pass_wall: float | None = None
        self._last_duration_s: float | None = None
        self.exporter = TelemetryExporter(
            self.readings, dcgm_compat=dcgm_compat, pod_mapping=pod_mapping
        )

    @property
    def inventory(self) -> list[GpuInventory]:
        """The GPUs found at start, in index order."""
        return list(self._inventory)

    def sample_once(self, *, full: bool = True) -> None:
        """One sampling pass over all GPUs (power fields only unless `full`).

        GPUs already failing are retried only on full passes, so a lost GPU costs one failed
        call per full interval, not per power interval.
        """
        started = self._clock()
        for gpu in self._inventory:
            with self._lock:
                failing = gpu.index in self._failing
            if failing and not full:
                continue
            try:
                sample = self.backend.sample(gpu.index)
            except TelemetryError as exc:
                self._record_failure(gpu, exc)
                continue
            self._record_sample(gpu, sample, full=full)
        finished = self._clock()
        with self._lock:
            self._last_pass_mono = finished
            self._last_pass_wall = self._wall_clock()
            self._last_duration_s = max(0.0, finished - started)

    def _record_failure(self, gpu: GpuInventory, exc: TelemetryError) -> None:
        with self._lock:
            first = gpu.index not in self._failing
            self._failing[gpu.index] = str(exc)
        if first:
            _log.warning(
                "node %s: GPU %d (%s) failed to read and is marked unhealthy; retrying every "
                "%g s: %s",
                self.node_name,
                gpu.index,
                gpu.uuid,
                self.full_interval_s,
                exc,
            )

    def _record_sample(self, gpu: GpuInventory, sample: GpuSample, *, full: bool) -> None:
        with self._lock:
            recovered = self._failing.pop(gpu.index, None) is not None
            previous = self._samples.get(gpu.index)
            if full or previous is None or recovered:
                self._samples[gpu.index] = sample
            else:
                self._samples[gpu.index] = dataclasses.replace(
                    previous,
                    healthy=sample.healthy,
                    power_w=sample.power_w,
                    energy_j=sample.energy_j,
                    power_limit_w=sample.power_limit_w,
                )
        if recovered:
            _log.warning("node %s: GPU %d (%s) answers again", self.node_name, gpu.index, gpu.uuid)

    def readings(self) -> NodeReadings:
        """The latest state of every GPU, for the exporter."""
        # The backend's fault view (never raises): a lost GPU's fell-off-bus fault included.
        faults = {gpu.index: self.backend.faults(gpu.index) for gpu in self._inventory}
        with self._lock:
            gpus = tuple(
                GpuReading(
                    inventory=gpu,
                    sample=self._samples.get(gpu.index),
                    healthy=(
                        gpu.index not in self._failing
                        and gpu.index in self._samples
                        and self._samples[gpu.index].healthy
                    ),
                    faults=faults[gpu.index],
                )
                for gpu in self._inventory
            )
            return NodeReadings(
                node=self.node_name,
                gpus=gpus,
                last_sample_timestamp_s=self._last_pass_wall,
                sample_duration_s=self._last_duration_s,
            )

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(fresh, body): fresh while the last pass is younger than `stale_after_s`."""
        now = self._clock()
        with self._lock:
            age = None if self._last_pass_mono is None else max(0.0, now - self._last_pass_mono)
            failing = dict(self._failing)
        fresh = age is not None and age <= self.stale_after_s
        body: dict[str, Any] = {
            "status": "ok" if fresh else "stale",
            "node": self.node_name,
            "gpus": len(self._inventory),
            "unhealthy_gpus": sorted(failing),
            "last_sample_age_seconds": age,
            "stale_after_seconds": self.stale_after_s,
        }
        return fresh, body

    def run(self, stop: threading.Event) -> None:
        """Sample until `stop` is set: power every power interval, everything every full one."""
        next_power = next_full = self._clock()
        while not stop.is_set():
            now = self._clock()
            full = now >= next_full
            try:
                self.sample_once(full=full)
            except Exception:
                # A backend bug must not end the loop; the next pass tries again.
                _log.exception("node %s: sampling pass failed", self.node_name)
            if full:
                next_full = max(next_full + self.full_interval_s, now)
            next_power = max(next_power + self.power_interval_s, now)
            stop.wait(max(0.0, min(next_power, next_full) - self._clock()))


class _Handler(BaseHTTPRequestHandler):
    agent: NodeAgent  # set on the subclass made per server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            try:
                body = self.agent.exporter.render()
            except Exception:
                _log.exception("rendering metrics failed")
                self._reply(500, b"rendering metrics failed\n", "text/plain; charset=utf-8")
                return
            self._reply(200, body, CONTENT_TYPE)
        elif path in ("/healthz", "/readyz"):
            fresh, status = self.agent.health()
            payload = json.dumps(status).encode()
            self._reply(200 if fresh else 503, payload, "application/json")
        else:
            self._reply(404, b"not found; try /metrics or /healthz\n", "text/plain; charset=utf-8")

    def _reply(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("agent http: " + format, *args)


class RunningAgent:
    """An agent sampling and serving in background threads; `stop()` ends both."""

    def __init__(
        self, agent: NodeAgent, host: str, port: int, stop_event: threading.Event | None = None
    ) -> None:
        self.agent = agent
        handler = type("AgentHandler", (_Handler,), {"agent": agent})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self.host = host
        self.port: int = self._server.server_address[1]
        self.stop_event = stop_event or threading.Event()
        self._sampler = threading.Thread(
            target=agent.run, args=(self.stop_event,), name="voltpack-agent-sampler", daemon=True
        )
        self._http = threading.Thread(
            target=self._server.serve_forever, name="voltpack-agent-http", daemon=True
        )
        self._sampler.start()
        self._http.start()

    @property
    def url(self) -> str:
        """Base URL, e.g. `http://127.0.0.1:9410`."""
        return f"http://{self.host}:{self.port}"

    def wait(self) -> None:
        """Block until `stop_event` is set (by `stop()`, a signal handler, or the caller)."""
        while not self.stop_event.wait(1.0):
            pass

    def stop(self) -> None:
        """Stop sampling and serving; returns when both threads have ended."""
        self.stop_event.set()
        self._sampler.join()
        self._server.shutdown()
        self._server.server_close()
        self._http.join()

    def __enter__(self) -> RunningAgent:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_agent(
    backend: GpuBackend,
    node_name: str,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    power_interval_s: float = 1.0,
    full_interval_s: float = 10.0,
    stale_after_intervals: float = 3.0,
    dcgm_compat: bool = False,
    pod_mapping: PodMapping | None = None,
    stop_event: threading.Event | None = None,
) -> RunningAgent:
    """Start sampling and serving in background threads and return at once (port 0: any free).

    Setting `stop_event` (or calling `.stop()`) ends both threads.
    """
    agent = NodeAgent(
        backend,
        node_name,
        power_interval_s=power_interval_s,
        full_interval_s=full_interval_s,
        stale_after_intervals=stale_after_intervals,
        dcgm_compat=dcgm_compat,
        pod_mapping=pod_mapping,
    )
    return RunningAgent(agent, host, port, stop_event)


def run_agent(
    backend: GpuBackend,
    node_name: str,
    host: str = "0.0.0.0",
    port: int = DEFAULT_PORT,
    *,
    power_interval_s: float = 1.0,
    full_interval_s: float = 10.0,
    stale_after_intervals: float = 3.0,
    dcgm_compat: bool = False,
    pod_mapping: PodMapping | None = None,
    stop_event: threading.Event | None = None,
    close_backend: bool = True,
) -> None:
    """Run the agent until `stop_event` is set or (in the main thread) SIGTERM/SIGINT arrives.

    Shuts down gracefully: the sampling pass in progress finishes, the HTTP server stops, and
    the backend is closed (unless `close_backend=False`).
    """
    running = start_agent(
        backend,
        node_name,
        host,
        port,
        power_interval_s=power_interval_s,
        full_interval_s=full_interval_s,
        stale_after_intervals=stale_after_intervals,
        dcgm_compat=dcgm_compat,
        pod_mapping=pod_mapping,
        stop_event=stop_event,
    )
    _log.info("voltpack agent for node %s serving on %s/metrics", node_name, running.url)
    stop = running.stop_event
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():

        def _on_signal(signum: int, frame: FrameType | None) -> None:
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, _on_signal)
    try:
        running.wait()
    finally:
        running.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if close_backend:
            backend.close()
        _log.info("voltpack agent for node %s stopped", node_name)
