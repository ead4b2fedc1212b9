"""Pods bound per second through the operator and the emulator's real HTTP path.

The emulator runs in its own process (as an API server would) with N nodes of 16 GPUs each
(a DGX-2-like shape, so that 10,000 single-GPU pods fit even at 1,000 nodes); 10,000 pods with
`schedulerName: voltpack` and one `nvidia.com/gpu` each are created first; then one operator
replica starts, and the clock runs from its start (cache sync included) until every pod is
bound. Anchor: kube-scheduler's own benchmark floor for 5,000 nodes is 680 pods/s, and 180
pods/s for pods requesting extended resources such as GPUs; goal: >= 180 pods/s at 5,000 nodes.

Usage: python benchmarks/operator_throughput.py [--nodes 1000,5000] [--pods 10000]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from _common import save, start_emulator_with_nodes
from kubernetes import client

from voltpack.model.errors import PolicyError
from voltpack.operator.kube.connect import api_client
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.schema import (
    PolicyFile,
    example_policy_path,
    load_policy,
    policy_for_strategy,
)

GOAL_PODS_PER_S = 180.0
ANCHORS = {"kube-scheduler, 5,000 nodes": 680.0, "kube-scheduler, extended resources": 180.0}


def start_emulator(node_count: int, folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`voltpack emulator` in a subprocess with `node_count` 16-GPU nodes."""
    rows = [f"bench-node-{i:05d},96000,1536000,16,V100M32" for i in range(node_count)]
    return start_emulator_with_nodes(folder / f"nodes-{node_count}.csv", rows, timeout_s=120)


def pod(index: int) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bench-{index:05d}"},
        "spec": {
            "schedulerName": "voltpack",
            "containers": [
                {
                    "name": "main",
                    "image": "bench:1",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }


def policy_named(name: str) -> PolicyFile:
    """An example policy (`voltpack/policies/examples/<name>.yaml`), else a bare strategy."""
    try:
        return load_policy(example_policy_path(name))
    except PolicyError:
        return policy_for_strategy(name)


def measure(node_count: int, pod_count: int, strategy: str, folder: Path) -> dict[str, float]:
    """Create the pods, start an operator, time until all are bound."""
    process, url = start_emulator(node_count, folder)
    try:
        api = api_client(url)  # as `voltpack operator --server URL` connects
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "voltpack-system"}})
        started = time.perf_counter()
        for index in range(pod_count):
            core.create_namespaced_pod("default", pod(index), _preload_content=False)
        create_s = time.perf_counter() - started
        config = OperatorConfig(
            policy=policy_named(strategy), identity="bench", cycle_interval_s=0.05
        )
        operator = Operator(api, config)
        stop = threading.Event()
        started = time.perf_counter()
        thread = threading.Thread(target=operator.run, args=(stop,), daemon=True)
        thread.start()
        deadline = started + 1800
        while operator.stats.bound < pod_count and time.perf_counter() < deadline:
            time.sleep(0.05)
        elapsed_s = time.perf_counter() - started
        stop.set()
        thread.join(timeout=30)
        api.close()
        return {
            "nodes": node_count,
            "pods": pod_count,
            "bound": operator.stats.bound,
            "seconds": round(elapsed_s, 2),
            "pods_per_s": round(operator.stats.bound / elapsed_s, 1),
            "create_pods_per_s": round(pod_count / create_s, 1),
            "cycles": operator.stats.cycles,
        }
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1000,5000")
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument(
        "--strategy",
        default="fgd",
        help="an example policy name (default: fgd, the operator's shipped default) or a strategy",
    )
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for node_count in (int(n) for n in args.nodes.split(",")):
            figures = measure(node_count, args.pods, args.strategy, Path(folder))
            print(figures, flush=True)
            results.append(figures)
    lines = [
        "# Operator + emulator throughput (end to end over HTTP, this 2-core machine)",
        "",
        f"{args.pods:,} single-GPU pods, policy `{args.strategy}`, one operator replica; the "
        "emulator in its own process. Goal: >= 180 pods/s at 5,000 nodes. Anchors: "
        "kube-scheduler 680 pods/s at 5,000 nodes, 180 pods/s with extended resources.",
        "",
        "| nodes | pods bound | seconds | pods/s | within goal | pod creation (pods/s) |",
        "|---:|---:|---:|---:|---|---:|",
    ]
    for r in results:
        ok = "yes" if r["pods_per_s"] >= GOAL_PODS_PER_S else "NO"
        lines.append(
            f"| {r['nodes']:,} | {r['bound']:,} | {r['seconds']:.1f} | {r['pods_per_s']:.0f} | "
            f"{ok} | {r['create_pods_per_s']:.0f} |"
        )
    save(
        "operator_throughput",
        {"goal_pods_per_s": GOAL_PODS_PER_S, "anchors": ANCHORS, "runs": results},
        "\n".join(lines) + "\n",
    )


if __name__ == "__main__":
    main()
