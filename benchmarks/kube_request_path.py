"""What one API request costs voltpack's process, by HTTP client, on a real kube-apiserver.

Each pod voltpack binds costs it two POSTs (the Binding and the `Scheduled` Event). This
benchmark posts the same Events through each client, `--concurrency` in flight, on a fresh
control plane (tests/k8s_control_plane.py), and reads this process's CPU-seconds per request
(`os.times`, user + system, every thread): the apiserver's own CPU is the same for each.

Clients, alternated round by round:
- `kubernetes`: `voltpack.operator.kube.client.post_json` over the official client's
  `ApiClient` (urllib3; credentials refreshed by the client on each request), from threads;
- `urllib3`: one urllib3 pool, headers built once, bodies encoded with orjson, from threads;
- `voltpack`: `post_json` with the operator's `AsyncPoster` attached (one aiohttp session on
  an asyncio loop of its own), from threads, as the operator's binding and Event threads post.

    python benchmarks/kube_request_path.py --requests 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import ssl
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import urllib3

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import save

from tests.k8s_control_plane import ControlPlane, running_control_plane
from voltpack.operator.kube.async_post import AsyncPoster, attach
from voltpack.operator.kube.client import post_json

NAMESPACE = "default"
EVENTS_PATH = f"/api/v1/namespaces/{NAMESPACE}/events"


def event_body(serial: int) -> dict[str, Any]:
    """A `Scheduled` Event as voltpack writes one (`binder.record_event`)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"pod-{serial}.", "namespace": NAMESPACE},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": f"pod-{serial}",
            "namespace": NAMESPACE,
            "uid": f"uid-{serial}",
        },
        "reason": "Scheduled",
        "message": f"Successfully assigned {NAMESPACE}/pod-{serial} to node-{serial % 5000}",
        "type": "Normal",
        "source": {"component": "voltpack"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
        "reportingComponent": "voltpack.io/voltpack",
        "reportingInstance": "bench",
        "action": "Scheduled",
        "count": 1,
    }


def via_kubernetes(plane: ControlPlane, bodies: list[dict[str, Any]], concurrency: int) -> int:
    api = plane.api_client()
    api.configuration.connection_pool_maxsize = concurrency
    with ThreadPoolExecutor(concurrency) as pool:
        return sum(1 for _ in pool.map(lambda b: post_json(api, EVENTS_PATH, b), bodies))


def via_urllib3(plane: ControlPlane, bodies: list[dict[str, Any]], concurrency: int) -> int:
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    pool = urllib3.HTTPSConnectionPool(
        "127.0.0.1", int(plane.url.rsplit(":", 1)[1]), maxsize=concurrency, ssl_context=context
    )
    headers = {"Authorization": f"Bearer {plane.token}", "Content-Type": "application/json",
               "Accept": "application/json"}  # fmt: skip

    def post(body: dict[str, Any]) -> None:
        reply = pool.urlopen("POST", EVENTS_PATH, body=orjson.dumps(body), headers=headers)
        if reply.status != 201:
            raise RuntimeError(f"{reply.status}: {reply.data[:200]!r}")
        orjson.loads(reply.data)

    with ThreadPoolExecutor(concurrency) as threads:
        return sum(1 for _ in threads.map(post, bodies))


def via_voltpack(plane: ControlPlane, bodies: list[dict[str, Any]], concurrency: int) -> int:
    api = plane.api_client()
    poster = AsyncPoster(api, max_in_flight=concurrency)
    attach(api, poster)
    try:
        with ThreadPoolExecutor(concurrency) as pool:
            return sum(1 for _ in pool.map(lambda b: post_json(api, EVENTS_PATH, b), bodies))
    finally:
        poster.close()


CLIENTS: dict[str, Callable[[ControlPlane, list[dict[str, Any]], int], int]] = {
    "kubernetes": via_kubernetes,
    "urllib3": via_urllib3,
    "voltpack": via_voltpack,
}


def cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def measure(args: argparse.Namespace) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    serial = 0
    with running_control_plane() as plane:
        for post_all in CLIENTS.values():  # a warm-up each: connections, imports
            post_all(plane, [event_body(serial + i) for i in range(50)], 4)
            serial += 50
        for round_number in range(args.rounds):
            order = list(CLIENTS) if round_number % 2 == 0 else list(reversed(CLIENTS))
            for client_name in order:
                bodies = [event_body(serial + i) for i in range(args.requests)]
                serial += args.requests
                load = os.getloadavg()[0]
                cpu_before, wall_before = cpu_s(), time.perf_counter()
                sent = CLIENTS[client_name](plane, bodies, args.concurrency)
                cpu, wall = cpu_s() - cpu_before, time.perf_counter() - wall_before
                runs.append({
                    "client": client_name, "round": round_number, "requests": sent,
                    "cpu_ms_per_request": 1000 * cpu / sent, "requests_per_s": sent / wall,
                    "loadavg_before": load,
                })  # fmt: skip
                print(f"{client_name:>10}: {1000 * cpu / sent:.3f} CPU ms/request, "
                      f"{sent / wall:.0f}/s, load {load:.2f}", flush=True)  # fmt: skip
    return {"requests": args.requests, "concurrency": args.concurrency, "runs": runs}


def table(result: dict[str, Any]) -> str:
    lines = [
        "# One POST's cost to voltpack's process, by HTTP client (real kube-apiserver)",
        "",
        f"{result['requests']} Events per run, {result['concurrency']} in flight; medians of the "
        "rounds (min-max); this process's CPU (every thread), not the apiserver's.",
        "",
        "| client | runs | CPU ms/request | requests/s | load before |",
        "|---|---:|---:|---:|---|",
    ]
    for name in CLIENTS:
        runs = [r for r in result["runs"] if r["client"] == name]
        cpu = [r["cpu_ms_per_request"] for r in runs]
        rate = [r["requests_per_s"] for r in runs]
        loads = ", ".join(f"{r['loadavg_before']:.2f}" for r in runs)
        lines.append(
            f"| {name} | {len(runs)} | {statistics.median(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f})"
            f" | {statistics.median(rate):.0f} ({min(rate):.0f}-{max(rate):.0f}) | {loads} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    args = parser.parse_args()
    result = measure(args)
    save("kube_request_path", result, table(result), args.out)


if __name__ == "__main__":
    main()
