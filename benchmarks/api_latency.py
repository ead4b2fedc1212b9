"""Admin API latency over HTTP: the cluster summary and paginated decision queries, with
1 million stored decisions, on SQLite and on PostgreSQL.

The API runs as `voltpack api` does (uvicorn, static-token auth, the operator's Kubernetes
adapter with its 1-s read cache) in front of the emulator holding a cluster of 128 eight-GPU
nodes and 512 running two-GPU pods, and of a store filled with 1,000,000 decisions
(`store_queries.generate`: 5,000 jobs on 1,000 nodes over 30 days). One keep-alive HTTP client
calls each route `--repeats` times after a warm-up:

- cluster summary: `GET /api/v1/cluster` (as deployed: the adapter re-lists at most once a
  second), and the same with the cache emptied before every call (each call lists nodes, pods,
  events and the voltpack resources from the emulator and rebuilds every view);
- decisions, newest page: `GET /api/v1/decisions?limit=50`;
- decisions of one job: `GET /api/v1/decisions?job=...&limit=50` (a random job each time);
- decisions, page 20: 19 cursor hops first, then the 20th page is timed.

Goal (issue 8): p99 under 100 ms on this machine.

Usage: python benchmarks/api_latency.py [--decisions 1000000] [--repeats 300]
       [--backends sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from _common import save
from kubernetes import client
from store_queries import JOBS, fill

from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens
from voltpack.api.server import serving
from voltpack.api.store_history import StoreHistory
from voltpack.emulator import EmulatorConfig, running_emulator
from voltpack.model import Node
from voltpack.operator.admin_source import KubeAdminSource
from voltpack.operator.crds import install_crds
from voltpack.policies.schema import example_policy_path, load_policy
from voltpack.store import BufferedStore, Store, TemporaryPostgres

NODES = 128
PODS = 512
TOKEN = "bench-token"


def cluster_nodes() -> list[Node]:
    """128 eight-GPU nodes, half A100 and half H100."""
    return [
        Node.empty(
            f"gpu-{i:03d}",
            cpu_milli=96_000,
            memory_mib=1_000_000,
            gpu_count=8,
            gpu_model="A100" if i % 2 else "H100",
        )
        for i in range(NODES)
    ]


def add_pods(kube: client.ApiClient) -> None:
    """512 running two-GPU pods, four on each node."""
    core = client.CoreV1Api(kube)
    for i in range(PODS):
        gpus = 2
        core.create_namespaced_pod(
            "default",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"train-{i}"},
                "spec": {
                    "nodeName": f"gpu-{i % NODES:03d}",
                    "schedulerName": "voltpack",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/train:1",
                            "resources": {
                                "requests": {"cpu": "1", "memory": "4Gi"},
                                "limits": {"nvidia.com/gpu": str(gpus)},
                            },
                        }
                    ],
                },
            },
        )


def timed(
    call: Callable[[int], httpx.Response], repeats: int, warmup: int = 10
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
    ms = np.array(samples) * 1000
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "max_ms": float(ms.max()),
    }


def measure(url: str, repeats: int, source: KubeAdminSource) -> dict[str, dict[str, float]]:
    """Each route's latency through one keep-alive client."""
    rng = random.Random(3)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        figures = {
            "cluster summary": timed(lambda _: http.get("/api/v1/cluster"), repeats),
            "cluster summary, cache cold": timed(
                lambda _: (source.invalidate(), http.get("/api/v1/cluster"))[1], repeats
            ),
            "decisions, newest page": timed(
                lambda _: http.get("/api/v1/decisions", params={"limit": 50}), repeats
            ),
            "decisions of one job": timed(
                lambda _: http.get(
                    "/api/v1/decisions",
                    params={"limit": 50, "job": f"default/job-{rng.randrange(JOBS)}"},
                ),
                repeats,
            ),
        }
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
        ms = np.array(samples) * 1000
        figures["decisions, page 20"] = {
            "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)),
            "max_ms": float(ms.max()),
        }
    return figures


def run_backend(store_url: str, count: int, repeats: int, folder: Path) -> dict[str, Any]:
    """Fill the store, start emulator and API, measure."""
    with Store.open(store_url) as store:
        loading = fill(store, count)
    buffered = BufferedStore.open(store_url)
    tokens_file = folder / "tokens.csv"
    tokens_file.write_text(f"{TOKEN},bench,viewer\n")
    tokens = StaticTokens.from_file(tokens_file)
    config = EmulatorConfig(lifecycle=False)
    with running_emulator(nodes=cluster_nodes(), config=config) as emulator:
        kube = client.ApiClient(client.Configuration(host=emulator.url))
        install_crds(client.ApiextensionsV1Api(kube))
        add_pods(kube)
        path = example_policy_path("fgd")
        source = KubeAdminSource(kube, load_policy(path), path.read_text())
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
            figures = measure(url, repeats, source)
        kube.close()
    buffered.close()
    return {"loading": loading, "routes": figures}


def markdown(results: dict[str, dict[str, Any]], count: int, repeats: int) -> str:
    """The result table."""
    lines = [
        f"# Admin API latency ({count:,} stored decisions, {NODES} nodes, {PODS} pods)",
        "",
        f"Over HTTP (uvicorn, one keep-alive client), {repeats} calls per route after a warm-up; "
        "the cluster summary reads the emulator through the adapter's 1-s cache. Goal: p99 < "
        "100 ms.",
        "",
        "| route | " + " | ".join(f"{b} p50 / p99 (ms)" for b in results) + " |",
        "|---|" + "---:|" * len(results),
    ]
    routes = next(iter(results.values()))["routes"]
    for route in routes:
        cells = [
            f"{r['routes'][route]['p50_ms']:.1f} / {r['routes'][route]['p99_ms']:.1f}"
            for r in results.values()
        ]
        lines.append(f"| {route} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="voltpack-api-bench-") as tmp:
        folder = Path(tmp)
        for backend in args.backends.split(","):
            print(f"{backend}: loading {args.decisions:,} decisions ...", flush=True)
            if backend == "sqlite":
                results[backend] = run_backend(
                    f"sqlite:///{folder / 'api.db'}", args.decisions, args.repeats, folder
                )
            else:
                server = TemporaryPostgres()
                server.start()
                try:
                    url = server.create_database("api_bench")
                    results[backend] = run_backend(url, args.decisions, args.repeats, folder)
                finally:
                    server.close()
    figures = {"decisions": args.decisions, "repeats": args.repeats, "results": results}
    save("api_latency", figures, markdown(results, args.decisions, args.repeats))


if __name__ == "__main__":
    main()
