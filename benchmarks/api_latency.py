"""Admin API latency over HTTP, every route, at 5,000 nodes, 50,000 pods and 1 million stored
decisions, while the cluster changes (SQLite and PostgreSQL).

The emulator runs in its own process (as an API server would) with `--nodes` eight-GPU nodes
(half A100, half H100; 50 racks labelled `rack`, one PowerBudget each, with a status as the
operator writes it) and `--pods` pods: on every node eight one-GPU pods and one CPU pod bound
and running, the rest pending voltpack pods in gangs of five. The API is `voltpack api` in its
own process, as the chart runs it (uvicorn, static-token auth, `--database-url`, the
operator's Kubernetes adapter: watch-fed caches, the summary and the node/job/domain views
kept from watch events), in front of it and of a store filled with `--decisions` decisions
(`store_queries.generate`: 5,000 jobs on 1,000 nodes over 30 days).

Every call is made while another client creates, binds (a Binding) and deletes pods as fast as
the emulator takes them ("changes flowing"; the adapter takes each event in as it serves). One
keep-alive HTTP client calls each route after a warm-up, 10 ms apart: `--repeats` times, or
`--heavy-repeats` for the routes over nodes, jobs and domains (the whole-list routes took
seconds per call before they were paged: issue 30): the summary; the first page of nodes and
a page from the middle (`limit=500`); one node; the first page of jobs, of pending jobs; one
pod group; queues; power domains; decisions (newest page, one job's, page 20 after 19 cursor
hops); audit; the active policy; policy validation; a manual cap set and cleared; a power
forecast (`FORECAST_DOMAINS` domains hold `HISTORY_DAYS` days of one-minute buckets); the
InferenceServices (`INFERENCE_SERVICES`, the example renamed) and one's plan. Then the
background runs, `--cycle-repeats` each, one after another: a policy dry run (a scheduling
cycle over the cluster) and a small simulation, each submitted (202), polled until done with
the summary read between polls (what the run costs the other routes), and the simulation's
report read. Per route: p50, p99, max; per background run, the time to its result. Per run:
the pod changes made, the wall time, the CPU seconds of the API, of its dry-run and simulation
children, of this process (the clients) and of the emulator, the API's peak RSS, the 1-minute
load average after, and how long the API took from its start to its first answer (listing and
watching the cluster).

The same script measures an older checkout (`PYTHONPATH=<checkout>`; every call it makes was
served then too), so before and after can be run alternately: `--label` and `--output` name
the run. Goal (issue 30): every route's p99 under 100 ms on this machine.

Usage: python benchmarks/api_latency.py [--nodes 5000] [--pods 50000] [--decisions 1000000]
       [--repeats 300] [--heavy-repeats 30] [--backends sqlite,postgresql] [--label ...]
       [--output api_latency]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml
from _common import free_port, save, start_emulator_with_nodes
from kubernetes import client
from store_queries import JOBS, fill

from voltpack.operator.kube.crds import install_crds
from voltpack.policies.schema import example_policy_path
from voltpack.store import Store, TemporaryPostgres
from voltpack.store.records import PowerSample

TOKEN = "bench-token"
INFERENCE_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "inferenceservice.yaml"
GPUS_PER_NODE = 8
RACKS = 50
GANG = 5
CHANGING_PAUSE_S = 0.01
INFERENCE_SERVICES = 500
"""InferenceServices in the cluster (examples/inferenceservice.yaml, renamed)."""
FORECAST_DOMAINS = 5
"""PowerBudgets with a stored power history (the forecast route reads it)."""
HISTORY_DAYS = 14
"""Of one-minute power buckets per such domain: the forecast route's default history."""
POLL_S = 0.05
"""Between two polls of a background run (a dry run, a simulation)."""
QUICK_SIMULATION = {"trace": "physical_cluster/small_test.trace", "cluster": "2:2:2",
                    "policies": ["fifo"]}  # fmt: skip
"""Between two calls while the cluster changes, so that the calls span a few seconds of it."""


def start_emulator(node_count: int, folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`voltpack emulator` in a subprocess with `node_count` eight-GPU nodes."""
    rows = [
        f"gpu-{i:05d},96000,1000000,{GPUS_PER_NODE},{'A100' if i % 2 else 'H100'}"
        for i in range(node_count)
    ]
    return start_emulator_with_nodes(folder / f"nodes-{node_count}.csv", rows)


def pod(name: str, node: str | None, gpus: int, group: str | None = None) -> dict[str, Any]:
    """A voltpack pod (bound to `node`, or pending) asking for `gpus` whole GPUs."""
    resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "4Gi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "schedulerName": "voltpack",
        "containers": [
            {"name": "main", "image": "registry.example/train:1", "resources": resources}
        ],
    }
    if node is not None:
        spec["nodeName"] = node
    annotations = {"voltpack.io/pod-group": group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": spec,
    }


def populate(kube: client.ApiClient, node_count: int, pod_count: int) -> dict[str, float]:
    """Racks, PowerBudgets and pods (see the module docstring); returns the time it took."""
    core = client.CoreV1Api(kube)
    custom = client.CustomObjectsApi(kube)
    started = time.perf_counter()
    per_rack = -(-node_count // RACKS)
    bound = [
        pod(f"train-{n:05d}-{g}", f"gpu-{n:05d}", 1) for n in range(node_count)
        for g in range(GPUS_PER_NODE)
    ] + [pod(f"cpu-{n:05d}", f"gpu-{n:05d}", 0) for n in range(node_count)]  # fmt: skip
    bodies = bound[:pod_count]
    pending = pod_count - len(bodies)
    bodies += [pod(f"wait-{i:05d}", None, 1, group=f"gang-{i // GANG}") for i in range(pending)]

    def create(body: dict[str, Any]) -> None:
        core.create_namespaced_pod("default", body, _preload_content=False)

    def label(n: int) -> None:
        body = {"metadata": {"labels": {"rack": f"r{n // per_rack:02d}"}}}
        core.patch_node(f"gpu-{n:05d}", body, _preload_content=False)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(label, range(node_count)))
        list(pool.map(create, bodies))
    for rack in range(RACKS):
        name = f"r{rack:02d}"
        custom.create_cluster_custom_object(
            "voltpack.io", "v1alpha1", "powerbudgets",
            {"apiVersion": "voltpack.io/v1alpha1", "kind": "PowerBudget",
             "metadata": {"name": name},
             "spec": {"nodeSelector": {"matchLabels": {"rack": name}}, "budgetW": 400_000}},
        )  # fmt: skip
        custom.patch_cluster_custom_object_status(
            "voltpack.io", "v1alpha1", "powerbudgets", name, {"status": {"powerW": 250_000}}
        )
    service = yaml.safe_load(INFERENCE_EXAMPLE.read_text())
    for n in range(INFERENCE_SERVICES):
        service["metadata"]["name"] = f"chat-{n:04d}"
        custom.create_namespaced_custom_object(
            "voltpack.io", "v1alpha1", "default", "inferenceservices", service
        )
    return {"populate_s": round(time.perf_counter() - started, 1), "pending_pods": pending}


def fill_power_history(store: Store, now_s: float) -> dict[str, float]:
    """HISTORY_DAYS of one-minute power buckets (a daily cycle and noise) for the first
    FORECAST_DOMAINS racks, as the operator's power loop records them."""
    started = time.perf_counter()
    rng = np.random.default_rng(11)
    at_s = np.arange(now_s - HISTORY_DAYS * 86_400.0, now_s, 60.0)
    for rack in range(FORECAST_DOMAINS):
        power_w = 250_000 + 50_000 * np.sin(2 * np.pi * at_s / 86_400 + rack)
        power_w += rng.normal(0, 5_000, at_s.size)
        store.add_power_samples(
            f"r{rack:02d}",
            [PowerSample(at_s=float(t), power_w=float(w), budget_w=400_000.0)
             for t, w in zip(at_s, power_w, strict=True)],
        )  # fmt: skip
    return {"power_history_s": round(time.perf_counter() - started, 1)}


def timed(
    call: Callable[[int], httpx.Response], repeats: int, warmup: int = 3, pause_s: float = 0.0
) -> dict[str, float]:
    """p50, p99 and max in milliseconds of `call(i)`; every answer must be 200."""
    for i in range(warmup):
        call(i).raise_for_status()
    samples = []
    for i in range(repeats):
        started = time.perf_counter()
        answer = call(i)
        samples.append(time.perf_counter() - started)
        answer.raise_for_status()
        if pause_s:
            time.sleep(pause_s)
    return percentiles(samples)


def percentiles(samples_s: list[float]) -> dict[str, float]:
    ms = np.array(samples_s) * 1000
    return {
        "calls": len(samples_s),
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "max_ms": float(ms.max()),
    }


def process_cpu_s(pid: int, children: bool = False) -> float:
    """User + system CPU seconds a process has used so far (Linux `/proc/<pid>/stat`); with
    `children`, those of its finished children instead (the API's dry runs and simulations)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    first = 13 if children else 11
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    """A process's peak resident memory so far (`VmHWM`)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def start_api(
    emulator_url: str, store_url: str, folder: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """`voltpack api` in its own process, as the chart runs it: static tokens, the store."""
    tokens_file = folder / "tokens.csv"
    tokens_file.write_text(f"{TOKEN},bench,admin\n")  # every verb: the cap route too
    port = free_port()
    command = [
        sys.executable, "-m", "voltpack", "api", f"--server={emulator_url}", f"--port={port}",
        f"--token-file={tokens_file}", f"--database-url={store_url}",
    ]  # fmt: skip
    log = (folder / "api.log").open("ab")
    return subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT
    ), f"http://127.0.0.1:{port}"


class Churn:
    """Another client changing the cluster as fast as the emulator takes it, until stopped: it
    creates a pending voltpack pod (CPU only: every GPU is taken), binds it to a node (a
    Binding, as the scheduler does), and deletes each pod 50 later; the pods it leaves are
    deleted on exit."""

    def __init__(self, url: str, prefix: str, nodes: int) -> None:
        self._kube = client.ApiClient(client.Configuration(host=url))
        self._prefix = prefix
        self._nodes = nodes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.changes = 0
        self.seconds = 0.0

    def __enter__(self) -> Churn:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self._kube.close()

    def _run(self) -> None:
        core = client.CoreV1Api(self._kube)
        started = time.perf_counter()
        index = 0
        while not self._stop.is_set():
            name = f"{self._prefix}-{index:06d}"
            core.create_namespaced_pod("default", pod(name, None, 0), _preload_content=False)
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name},
                "target": {"kind": "Node", "name": f"gpu-{index * 37 % self._nodes:05d}"},
            }
            core.create_namespaced_pod_binding(name, "default", binding, _preload_content=False)
            self.changes += 2
            if index >= 50:
                old = f"{self._prefix}-{index - 50:06d}"
                core.delete_namespaced_pod(old, "default", _preload_content=False)
                self.changes += 1
            index += 1
        self.seconds = time.perf_counter() - started
        for left in range(max(index - 50, 0), index):
            core.delete_namespaced_pod(
                f"{self._prefix}-{left:06d}", "default", _preload_content=False
            )


POLICY_TEXT = example_policy_path("fgd").read_text()
"""The policy the dry-run and validate routes are sent (the one the API serves, too)."""


def routes(
    http: httpx.Client, nodes: int, pods: int, rng: random.Random
) -> list[tuple[str, str, Callable[[int], httpx.Response], str]]:
    """(route, what is asked, the call, its kind: `light`, `list` (over nodes, jobs or
    domains) or `cycle` (a scheduling cycle over the whole cluster))."""
    middle = f"gpu-{nodes // 2:05d}"
    gangs = max((pods - nodes * (GPUS_PER_NODE + 1)) // GANG, 0)

    def get(path: str, **params: Any) -> Callable[[int], httpx.Response]:
        return lambda _: http.get(path, params=params)

    one_job = (
        (lambda _: http.get(f"/api/v1/jobs/default/gang-{rng.randrange(gangs)}"))
        if gangs
        else (lambda _: http.get(f"/api/v1/jobs/default/cpu-{rng.randrange(nodes):05d}"))
    )
    return [
        ("GET /cluster", "the summary", get("/api/v1/cluster"), "light"),
        ("GET /nodes", "first page, limit=500", get("/api/v1/nodes", limit=500), "list"),
        (
            "GET /nodes",
            f"a page from the middle (after={middle}), limit=500",
            get("/api/v1/nodes", limit=500, after=middle),
            "list",
        ),
        (
            "GET /nodes/{name}",
            "a random node",
            lambda _: http.get(f"/api/v1/nodes/gpu-{rng.randrange(nodes):05d}"),
            "list",
        ),
        ("GET /jobs", "first page, limit=500", get("/api/v1/jobs", limit=500), "list"),
        (
            "GET /jobs",
            "pending only, limit=500",
            get("/api/v1/jobs", pending="true", limit=500),
            "list",
        ),
        ("GET /jobs/{ns}/{name}", "a random pod group", one_job, "list"),
        ("GET /queues", "every queue", get("/api/v1/queues"), "light"),
        ("GET /power/domains", "every domain", get("/api/v1/power/domains"), "list"),
        ("GET /decisions", "newest page, limit=50", get("/api/v1/decisions", limit=50), "light"),
        (
            "GET /decisions",
            "one job's, limit=50",
            lambda _: http.get(
                "/api/v1/decisions",
                params={"limit": 50, "job": f"job-{rng.randrange(JOBS):05d}"},  # as stored
            ),
            "light",
        ),
        ("GET /audit", "newest 100", get("/api/v1/audit", limit=100), "light"),
        ("GET /policy", "the active policy", get("/api/v1/policy"), "light"),
        (
            "POST /policy/validate",
            "the shipped fgd policy",
            lambda _: http.post("/api/v1/policy/validate", json={"text": POLICY_TEXT}),
            "light",
        ),
        (
            "POST /power/domains/{name}/cap",
            "set a manual cap, then clear it, on a random domain",
            lambda i: http.post(
                f"/api/v1/power/domains/r{rng.randrange(RACKS):02d}/cap",
                json={"cap_w": None if i % 2 else 390_000},
            ),
            "light",
        ),
        (
            "GET /power/domains/{name}/forecast",
            f"a random domain of the {FORECAST_DOMAINS} with {HISTORY_DAYS} days of history, "
            "1 h ahead",
            lambda _: http.get(
                f"/api/v1/power/domains/r{rng.randrange(FORECAST_DOMAINS):02d}/forecast",
                params={"horizon_s": 3600},
            ),
            "light",
        ),
        (
            "GET /inferenceservices",
            f"every service ({INFERENCE_SERVICES})",
            get("/api/v1/inferenceservices"),
            "light",
        ),
        (
            "GET /inferenceservices/{ns}/{name}/plan",
            "a random service's plan",
            lambda _: http.get(
                f"/api/v1/inferenceservices/default/chat-{rng.randrange(INFERENCE_SERVICES):04d}/plan"
            ),
            "light",
        ),
    ]


def background_runs(
    http: httpx.Client, submit_path: str, body: dict[str, Any], repeats: int, report: str | None
) -> dict[str, Any]:
    """`repeats` runs submitted one after another to `submit_path` (202 and a Location), each
    polled every POLL_S until it finished, the summary read between two polls (what the
    background work costs the other routes); `report`: a route under the run to read once done.
    Latency figures per call, and the time from submission to the finished run."""
    submits, polls, summaries, reports, results_s = [], [], [], [], []
    for _ in range(repeats):
        started = time.perf_counter()
        answer = http.post(submit_path, json=body)
        submits.append(time.perf_counter() - started)
        assert answer.status_code == 202, answer.text
        location = answer.headers.get("location") or f"{submit_path}/{answer.json()['id']}"
        while True:
            before = time.perf_counter()
            view = http.get(location)
            polls.append(time.perf_counter() - before)
            view.raise_for_status()
            if view.json()["status"] in ("done", "failed"):
                break
            before = time.perf_counter()
            http.get("/api/v1/cluster").raise_for_status()
            summaries.append(time.perf_counter() - before)
            time.sleep(POLL_S)
        results_s.append(time.perf_counter() - started)
        assert view.json()["status"] == "done", view.text
        if report is not None:
            before = time.perf_counter()
            http.get(f"{location}/{report}").raise_for_status()
            reports.append(time.perf_counter() - before)
    return {
        "submit": percentiles(submits),
        "poll": percentiles(polls),
        "summary_meanwhile": percentiles(summaries or [0.0]),
        **({"report": percentiles(reports)} if reports else {}),
        "result_s": {
            "runs": repeats,
            "p50": round(float(np.median(results_s)), 2),
            "max": round(max(results_s), 2),
        },
    }


def measure(
    url: str,
    api: subprocess.Popen[bytes],
    emulator: subprocess.Popen[bytes],
    emulator_url: str,
    args: argparse.Namespace,
    name: str,
) -> dict[str, Any]:
    """Each route's latency through one keep-alive client while another client changes the
    cluster; the load average and the CPU seconds of the processes over the measurement."""
    rng = random.Random(3)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    figures: dict[str, Any] = {}
    pids = {"api": api.pid, "clients": os.getpid(), "emulator": emulator.pid}
    cpu_before = {name: process_cpu_s(pid) for name, pid in pids.items()}
    children_before = process_cpu_s(api.pid, children=True)
    wall_before = time.perf_counter()
    with (
        httpx.Client(base_url=url, headers=headers, timeout=300) as http,
        Churn(emulator_url, f"churn-{name}", args.nodes) as churn,
    ):
        for route, what, call, kind in routes(http, args.nodes, args.pods, rng):
            repeats = {"light": args.repeats, "list": args.heavy_repeats}.get(
                kind, args.cycle_repeats
            )
            figure = timed(call, repeats, pause_s=CHANGING_PAUSE_S)
            figures[f"{route}: {what}"] = {"route": route, "what": what, **figure}
            print(f"  {route} ({what}): {figure}", flush=True)
        # page 20 of the decisions: time only the last request, after 19 untimed hops
        samples = []
        for _ in range(max(args.repeats // 10, 20)):
            params: dict[str, Any] = {"limit": 50}
            for _hop in range(19):
                body = http.get("/api/v1/decisions", params=params)
                body.raise_for_status()
                params = {"limit": 50, "cursor": body.json()["next_cursor"]}
            started = time.perf_counter()
            http.get("/api/v1/decisions", params=params).raise_for_status()
            samples.append(time.perf_counter() - started)
        figures["GET /decisions: page 20, limit=50"] = {
            "route": "GET /decisions",
            "what": "page 20, limit=50",
            **percentiles(samples),
        }
        runs = {
            "dry run": background_runs(
                http, "/api/v1/policy/dry-runs", {"text": POLICY_TEXT}, args.cycle_repeats, None
            ),
            "simulation": background_runs(
                http, "/api/v1/simulations", QUICK_SIMULATION, args.cycle_repeats, "report"
            ),
        }
        for kind, (prefix, what) in {
            "dry run": ("/policy/dry-runs", "the shipped fgd policy: a scheduling cycle over the "
                        "cluster and a power tick"),
            "simulation": ("/simulations", "a small training trace, one policy"),
        }.items():  # fmt: skip
            for phase, route in (
                ("submit", f"POST {prefix}"),
                ("poll", f"GET {prefix}/{{id}}"),
                ("summary_meanwhile", "GET /cluster"),
                ("report", f"GET {prefix}/{{id}}/report"),
            ):
                if phase in runs[kind]:
                    asked = (
                        what if phase != "summary_meanwhile" else f"the summary while a {kind} runs"
                    )
                    figures[f"{route}: {asked}"] = {
                        "route": route,
                        "what": asked,
                        **runs[kind][phase],
                    }
        summary = http.get("/api/v1/cluster").json()
    wall_s = time.perf_counter() - wall_before
    return {
        "routes": figures,
        "background_results_s": {kind: run["result_s"] for kind, run in runs.items()},
        "summary": summary,
        "churn": {
            "changes": churn.changes,
            "changes_per_s": round(churn.changes / max(churn.seconds, 1e-9), 1),
        },
        "wall_s": round(wall_s, 1),
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        "cpu_s": {
            **{name: round(process_cpu_s(pid) - cpu_before[name], 1) for name, pid in pids.items()},
            "api_children": round(process_cpu_s(api.pid, children=True) - children_before, 1),
        },
        "api_peak_rss_mib": peak_rss_mib(api.pid),
    }


def run_backend(
    backend: str,
    store_url: str,
    emulator: subprocess.Popen[bytes],
    emulator_url: str,
    args: argparse.Namespace,
    folder: Path,
) -> dict[str, Any]:
    """Fill the store, start an adapter and the API in front of the emulator, measure."""
    with Store.open(store_url) as store:
        loading = fill(store, args.decisions)
        loading.update(fill_power_history(store, time.time()))
    started = time.perf_counter()
    api, url = start_api(emulator_url, store_url, folder)
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
            first = wait_answering(http, api, "/api/v1/cluster")  # the caches listed
            sync_s = time.perf_counter() - started
            assert first["nodes"] == args.nodes, first
            quiet_since, seen = time.monotonic(), first
            while time.monotonic() - quiet_since < 3.0:  # the emulator's kubelets started pods
                time.sleep(0.2)
                now = http.get("/api/v1/cluster").json()
                if {k: v for k, v in now.items() if k != "observed_at_s"} != {
                    k: v for k, v in seen.items() if k != "observed_at_s"
                }:
                    quiet_since, seen = time.monotonic(), now
            services = http.get("/api/v1/inferenceservices").json()
            assert len(services) == INFERENCE_SERVICES, len(services)
        figures = measure(url, api, emulator, emulator_url, args, backend)
    finally:
        api.terminate()
        api.wait(timeout=60)
    return {"loading": loading, "first_sync_s": round(sync_s, 1), **figures}


def wait_answering(
    http: httpx.Client, api: subprocess.Popen[bytes], path: str, timeout_s: float = 300.0
) -> Any:
    """The first 200 answer of `path` (the API starts, then its caches list the cluster)."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert api.poll() is None, "voltpack api exited (see api.log in its folder)"
        try:
            answer = http.get(path)
            if answer.status_code == 200:
                return answer.json()
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"voltpack api did not answer {path} in {timeout_s} s"
        time.sleep(0.2)


def markdown(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    """The result table."""
    first = next(iter(results.values()))
    summary = first["summary"]
    lines = [
        f"# Admin API latency ({args.nodes:,} nodes, {args.pods:,} pods, {args.decisions:,} "
        f"stored decisions){f' — {args.label}' if args.label else ''}",
        "",
        f"Over HTTP (uvicorn, one keep-alive client, {CHANGING_PAUSE_S * 1000:g} ms between "
        f"calls), {args.repeats} calls per route after a warm-up ({args.heavy_repeats} for the "
        f"routes over nodes, jobs and domains; {args.cycle_repeats} dry runs and simulations, "
        "polled until done), every call "
        "while another client creates, binds and deletes pods as fast as the emulator (its own "
        "process) takes them. Goal: every route's p99 < 100 ms. Produced by "
        "`benchmarks/api_latency.py`.",
        "",
        f"The cluster as the summary saw it: {summary['nodes']:,} nodes, "
        f"{sum(summary['gpus_by_model'].values()):,.0f} GPUs "
        f"({sum(summary['gpus_allocated_by_model'].values()):,.0f} allocated), "
        f"{summary['jobs_running']:,} jobs running, {summary['jobs_pending']:,} pending "
        f"({summary['pods_pending']:,} pods), {summary['power_domains']} power domains.",
        "",
        "| route | asked | " + " | ".join(f"{b} p50 / p99 / max (ms)" for b in results) + " |",
        "|---|---|" + "---:|" * len(results),
    ]
    for key, figure in first["routes"].items():
        cells = [
            f"{r['routes'][key]['p50_ms']:.1f} / {r['routes'][key]['p99_ms']:.1f} / "
            f"{r['routes'][key]['max_ms']:.1f}"
            for r in results.values()
        ]
        lines.append(f"| `{figure['route']}` | {figure['what']} | " + " | ".join(cells) + " |")
    lines += ["", "Background runs (202, then polled every "
              f"{POLL_S * 1000:g} ms): from submission to the finished run, in seconds.", "",
              "| run | " + " | ".join(f"{b} runs, p50 / max (s)" for b in results) + " |",
              "|---|" + "---:|" * len(results)]  # fmt: skip
    for kind in first.get("background_results_s", {}):
        cells = [
            f"{r['background_results_s'][kind]['runs']}, "
            f"{r['background_results_s'][kind]['p50']} / {r['background_results_s'][kind]['max']}"
            for r in results.values()
        ]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    lines += ["", "| backend | pod changes (per s) | wall (s) | CPU s: API / its dry runs "
              "and simulations / clients / emulator | API peak RSS (MiB) | load average (1 min) "
              "after | API start to first answer (s) |",
              "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for backend, r in results.items():
        cpu = r["cpu_s"]
        lines.append(
            f"| {backend} | {r['churn']['changes']:,} ({r['churn']['changes_per_s']:g}) | "
            f"{r['wall_s']} | {cpu['api']} / {cpu['api_children']} / {cpu['clients']} / "
            f"{cpu['emulator']} | {r['api_peak_rss_mib']} | {r['load_average_1m_after']} | "
            f"{r['first_sync_s']} |"
        )
    lines += [
        "",
        "The machine has "
        f"{os.cpu_count()} cores, shared with other work while this ran (see the load average).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--heavy-repeats", type=int, default=30)
    parser.add_argument(
        "--cycle-repeats", type=int, default=5, help="dry runs and simulations, one after another"
    )
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--label", default="", help="what was measured, e.g. 'before (main)'")
    parser.add_argument("--output", default="api_latency", help="results/<output>.json, .md")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="voltpack-api-bench-") as tmp:
        folder = Path(tmp)
        process, emulator_url = start_emulator(args.nodes, folder)
        try:
            with client.ApiClient(client.Configuration(host=emulator_url)) as kube:
                install_crds(client.ApiextensionsV1Api(kube))
                print(f"populating {args.nodes:,} nodes, {args.pods:,} pods ...", flush=True)
                cluster = populate(kube, args.nodes, args.pods)
                print(cluster, flush=True)
            for backend in args.backends.split(","):
                print(f"{backend}: loading {args.decisions:,} decisions ...", flush=True)
                if backend == "sqlite":
                    url = f"sqlite:///{folder / 'api.db'}"
                    results[backend] = run_backend(
                        backend, url, process, emulator_url, args, folder
                    )
                else:
                    server = TemporaryPostgres()
                    server.start()
                    try:
                        url = server.create_database("api_bench")
                        results[backend] = run_backend(
                            backend, url, process, emulator_url, args, folder
                        )
                    finally:
                        server.close()
        finally:
            process.terminate()
            process.wait(timeout=60)
    figures = {
        "nodes": args.nodes,
        "pods": args.pods,
        "decisions": args.decisions,
        "repeats": args.repeats,
        "heavy_repeats": args.heavy_repeats,
        "cycle_repeats": args.cycle_repeats,
        "label": args.label,
        "cluster": cluster,
        "results": results,
    }
    save(args.output, figures, markdown(results, args))


if __name__ == "__main__":
    main()
