"""Admin API latency over HTTP: the cluster summary at 5,000 nodes and 50,000 pods, and paginated
decision queries with 1 million stored decisions, on SQLite and on PostgreSQL.

The emulator runs in its own process (as an API server would) with `--nodes` eight-GPU nodes
(half A100, half H100; 50 racks labelled `rack`, one PowerBudget each, with a status as the
operator writes it) and `--pods` pods: on every node eight one-GPU pods and one CPU pod bound
and running, the rest pending voltpack pods in gangs of five. The API runs as `voltpack api`
does (uvicorn, static-token auth, the operator's Kubernetes adapter: watch-fed caches, the
summary kept by watch events) in front of it and of a store filled with `--decisions` decisions
(`store_queries.generate`: 5,000 jobs on 1,000 nodes over 30 days). One keep-alive HTTP client
calls each route `--repeats` times after a warm-up:

- cluster summary: `GET /api/v1/cluster`, the cluster quiet;
- cluster summary, views dropped: the same with the adapter's built views dropped before every
  call (what "cache cold" measured when every call re-listed the cluster; now the summary's
  counters are kept by the watch, so dropping the views costs it nothing);
- cluster summary, cluster changing: while another client creates and deletes pods as fast as
  the emulator takes them (the adapter takes each event in as it serves), 10 ms between calls
  so that they span seconds of changes;
- nodes, jobs: `GET /api/v1/nodes` (every node with its GPUs) and `GET /api/v1/jobs` (every
  job with its workers), `--heavy-repeats` times: each answer is the whole list, serialised at
  every call; built from the cached objects once per change (quiet cluster), or with the views
  dropped before every call (as after a change: built again);
- decisions, newest page: `GET /api/v1/decisions?limit=50`;
- decisions of one job: `GET /api/v1/decisions?job=...&limit=50` (a random job each time);
- decisions, page 20: 19 cursor hops first, then the 20th page is timed.

Also measured once per backend: how long a fresh adapter takes to list and watch the cluster
(what `voltpack api` does at its start, before its first answer).

Goal (issue 8, and issue 23 for the summary at this size): p99 under 100 ms on this machine.

Usage: python benchmarks/api_latency.py [--nodes 5000] [--pods 50000] [--decisions 1000000]
       [--repeats 300] [--heavy-repeats 10] [--backends sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from _common import save, start_emulator_with_nodes
from kubernetes import client
from store_queries import JOBS, fill

from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens
from voltpack.api.server import serving
from voltpack.api.store_history import StoreHistory
from voltpack.operator.admin_source import KubeAdminSource
from voltpack.operator.crds import install_crds
from voltpack.policies.schema import example_policy_path, load_policy
from voltpack.store import BufferedStore, Store, TemporaryPostgres

TOKEN = "bench-token"
GPUS_PER_NODE = 8
RACKS = 50
GANG = 5
CHANGING_PAUSE_S = 0.01
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
    return {"populate_s": round(time.perf_counter() - started, 1), "pending_pods": pending}


def timed(
    call: Callable[[int], httpx.Response], repeats: int, warmup: int = 10, pause_s: float = 0.0
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
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "max_ms": float(ms.max()),
    }


class Churn:
    """Another client creating pods and deleting them 50 later, back to back, until stopped;
    the pods it leaves are deleted on exit."""

    def __init__(self, url: str, prefix: str) -> None:
        self._kube = client.ApiClient(client.Configuration(host=url))
        self._prefix = prefix
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
            body = pod(f"{self._prefix}-{index:06d}", f"gpu-{index % 100:05d}", 0)
            core.create_namespaced_pod("default", body, _preload_content=False)
            self.changes += 1
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


def measure(
    url: str,
    emulator_url: str,
    repeats: int,
    heavy_repeats: int,
    source: KubeAdminSource,
    name: str,
) -> dict[str, dict[str, float]]:
    """Each route's latency through one keep-alive client."""
    rng = random.Random(3)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
        figures = {
            "cluster summary": timed(lambda _: http.get("/api/v1/cluster"), repeats),
            "cluster summary, views dropped": timed(
                lambda _: (source.invalidate(), http.get("/api/v1/cluster"))[1], repeats
            ),
        }
        with Churn(emulator_url, f"churn-{name}") as churn:
            figures["cluster summary, cluster changing"] = timed(
                lambda _: http.get("/api/v1/cluster"), repeats, pause_s=CHANGING_PAUSE_S
            )
        figures["cluster summary, cluster changing"]["changes"] = churn.changes
        figures["cluster summary, cluster changing"]["changes_per_s"] = round(
            churn.changes / churn.seconds, 1
        )
        summary = http.get("/api/v1/cluster").json()
        heavy = (("nodes, every GPU", "/api/v1/nodes"), ("jobs, every worker", "/api/v1/jobs"))
        for route, path in heavy:
            figures[route] = timed(lambda _, p=path: http.get(p), heavy_repeats, warmup=1)
            figures[f"{route}, views dropped"] = timed(
                lambda _, p=path: (source.invalidate(), http.get(p))[1], heavy_repeats, warmup=1
            )
        figures["decisions, newest page"] = timed(
            lambda _: http.get("/api/v1/decisions", params={"limit": 50}), repeats
        )
        figures["decisions of one job"] = timed(
            lambda _: http.get(
                "/api/v1/decisions",
                params={"limit": 50, "job": f"default/job-{rng.randrange(JOBS)}"},
            ),
            repeats,
        )
        # page 20: time only the last request, after 19 untimed hops
        samples = []
        for _ in range(max(repeats // 10, 20)):
            params: dict[str, Any] = {"limit": 50}
            for _hop in range(19):
                body = http.get("/api/v1/decisions", params=params)
                body.raise_for_status()
                params = {"limit": 50, "cursor": body.json()["next_cursor"]}
            started = time.perf_counter()
            http.get("/api/v1/decisions", params=params).raise_for_status()
            samples.append(time.perf_counter() - started)
        figures["decisions, page 20"] = percentiles(samples)
    figures["_summary"] = summary
    return figures


def run_backend(
    backend: str, store_url: str, emulator_url: str, args: argparse.Namespace, folder: Path
) -> dict[str, Any]:
    """Fill the store, start an adapter and the API in front of the emulator, measure."""
    with Store.open(store_url) as store:
        loading = fill(store, args.decisions)
    buffered = BufferedStore.open(store_url)
    tokens_file = folder / "tokens.csv"
    tokens_file.write_text(f"{TOKEN},bench,viewer\n")
    tokens = StaticTokens.from_file(tokens_file)
    kube = client.ApiClient(client.Configuration(host=emulator_url))
    path = example_policy_path("fgd")
    source = KubeAdminSource(kube, load_policy(path), path.read_text())
    started = time.perf_counter()
    first = source.summary()  # as `voltpack api` starts: list, then watch
    sync_s = time.perf_counter() - started
    assert first.nodes == args.nodes, first
    quiet_since, generation = time.monotonic(), source.watched_changes()
    while time.monotonic() - quiet_since < 3.0:  # the emulator's kubelets have started the pods
        time.sleep(0.2)
        if source.watched_changes() != generation:
            quiet_since, generation = time.monotonic(), source.watched_changes()
    app = create_app(
        ApiDependencies(
            cluster=source,
            policies=source,
            authenticator=tokens,
            authorizer=tokens,
            history=StoreHistory(buffered),
        )
    )
    with serving(app) as url:
        figures = measure(
            url,
            emulator_url,
            args.repeats,
            args.heavy_repeats,
            source,
            backend,
        )
    source.close()
    kube.close()
    buffered.close()
    summary = figures.pop("_summary")
    return {"loading": loading, "first_sync_s": round(sync_s, 1), "summary": summary,
            "routes": figures}  # fmt: skip


def markdown(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    """The result table."""
    first = next(iter(results.values()))
    summary = first["summary"]
    lines = [
        f"# Admin API latency ({args.nodes:,} nodes, {args.pods:,} pods, {args.decisions:,} "
        "stored decisions)",
        "",
        f"Over HTTP (uvicorn, one keep-alive client), {args.repeats} calls per route after a "
        f"warm-up ({args.heavy_repeats} for nodes and jobs); the emulator in its own process; the "
        "adapter reads watch-fed caches and keeps the summary's counters from the watch events. "
        "Goal: p99 < 100 ms. Produced by `benchmarks/api_latency.py`.",
        "",
        f"The cluster as the summary saw it: {summary['nodes']:,} nodes, "
        f"{sum(summary['gpus_by_model'].values()):,.0f} GPUs "
        f"({sum(summary['gpus_allocated_by_model'].values()):,.0f} allocated), "
        f"{summary['jobs_running']:,} jobs running, {summary['jobs_pending']:,} pending "
        f"({summary['pods_pending']:,} pods), {summary['power_domains']} power domains.",
        "",
        "| route | " + " | ".join(f"{b} p50 / p99 / max (ms)" for b in results) + " |",
        "|---|" + "---:|" * len(results),
    ]
    for route in first["routes"]:
        cells = [
            f"{r['routes'][route]['p50_ms']:.1f} / {r['routes'][route]['p99_ms']:.1f} / "
            f"{r['routes'][route]['max_ms']:.1f}"
            for r in results.values()
        ]
        lines.append(f"| {route} | " + " | ".join(cells) + " |")
    churn = [
        f"{r['routes']['cluster summary, cluster changing']['changes']:,} pod changes "
        f"({r['routes']['cluster summary, cluster changing']['changes_per_s']:g}/s, {b})"
        for b, r in results.items()
    ]
    lines += [
        "",
        f"While the cluster changed, the other client made {', '.join(churn)}. "
        "A fresh adapter took "
        + ", ".join(f"{r['first_sync_s']} s ({b})" for b, r in results.items())
        + " to list and watch the cluster before its first answer (`voltpack api` does this at "
        "its start).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--heavy-repeats", type=int, default=10)
    parser.add_argument("--backends", default="sqlite,postgresql")
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
                    results[backend] = run_backend(backend, url, emulator_url, args, folder)
                else:
                    server = TemporaryPostgres()
                    server.start()
                    try:
                        url = server.create_database("api_bench")
                        results[backend] = run_backend(backend, url, emulator_url, args, folder)
                    finally:
                        server.close()
                print(backend, results[backend]["routes"], flush=True)
        finally:
            process.terminate()
            process.wait(timeout=60)
    figures = {
        "nodes": args.nodes,
        "pods": args.pods,
        "decisions": args.decisions,
        "repeats": args.repeats,
        "heavy_repeats": args.heavy_repeats,
        "cluster": cluster,
        "results": results,
    }
    save("api_latency", figures, markdown(results, args))


if __name__ == "__main__":
    main()
