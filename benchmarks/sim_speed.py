"""Speed of the simulator and of one scheduling decision.

1. Full FGD-protocol run (openb default, 130% demand, one seed) per strategy, trace loading
   included: median of 3 wall times. Goal: at most 60 s (the reference Go simulator needs about
   10 minutes per run on one core by its own account).
2. One decision on a 10,000-node cluster (openb node mix cycled), per strategy: median and
   p95 of 1,000 timed decisions after warming. Goal: median at most 5 ms.
3. Cost of one decision against cluster size: the openb cluster replicated 1x..8x, the same pod
   sequence scheduled with best-fit; mean microseconds per decision. Goal: grows no faster than
   linearly in the number of nodes.

Usage: python benchmarks/sim_speed.py [--nodes CSV] [--trace CSV] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from _common import save

from voltpack.model.cluster import Node
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.policies.registry import make_strategy, strategy_names
from voltpack.policies.schema import (
    PolicyFile,
    example_policy_path,
    load_policy,
    policy_for_strategy,
)
from voltpack.scheduler.placement import Scheduler
from voltpack.sim.datasets import OPENB_DEFAULT_PODS, OPENB_NODES, openb_dir
from voltpack.sim.experiment import run_experiment
from voltpack.sim.traces.openb import load_nodes, load_pods

GOAL_S = 60.0
LATENCY_NODES = 10_000
LATENCY_GOAL_MS = 5.0
REFERENCE_S = 600.0


def policies_to_time() -> dict[str, PolicyFile]:
    """Every strategy with its defaults, and the shipped default policy file."""
    chosen = {name: policy_for_strategy(name) for name in strategy_names()}
    chosen["fgd policy file (shipped default)"] = load_policy(example_policy_path("fgd"))
    return chosen


def full_run_seconds(nodes_path: Path, pods_path: Path, policy: PolicyFile, seed: int) -> float:
    """Wall time of loading the trace and running the whole protocol once."""
    started = time.perf_counter()
    run_experiment(load_nodes(nodes_path), load_pods(pods_path), policy, seed)
    return time.perf_counter() - started


def decision_cost_us(nodes: list[Node], pods_path: Path, factor: int, decisions: int) -> float:
    """Mean microseconds per best-fit decision on the cluster replicated `factor` times."""
    replicated = [
        node.model_copy(update={"name": f"{node.name}-x{copy}"})
        for copy in range(factor)
        for node in nodes
    ]
    pods = load_pods(pods_path)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(pods))[:decisions]
    snapshot = ClusterSnapshot.from_nodes(replicated)
    scheduler = Scheduler.with_random_ranks(make_strategy("best-fit"), snapshot.node_count, rng)
    started = time.perf_counter()
    for index in order:
        scheduler.schedule_pod(snapshot, pods[index], rng)
    return (time.perf_counter() - started) / len(order) * 1e6


def decision_latency_ms(
    nodes: list[Node], pods_path: Path, policy: PolicyFile, node_count: int, warm: int, timed: int
) -> dict[str, float]:
    """Median and p95 of single decisions on `node_count` nodes (the node mix cycled)."""
    cluster = [
        nodes[i % len(nodes)].model_copy(update={"name": f"node-{i:05d}"})
        for i in range(node_count)
    ]
    pods = load_pods(pods_path)
    rng = np.random.default_rng(1)
    snapshot = ClusterSnapshot.from_nodes(cluster)
    chosen = make_strategy(policy.spec.scoring.strategy, policy.spec.scoring.params)
    chosen.prime(pods)
    scheduler = Scheduler.with_random_ranks(chosen, snapshot.node_count, rng)
    sequence = [pods[i] for i in rng.integers(len(pods), size=warm + timed)]
    for pod in sequence[:warm]:
        scheduler.observe_arrival(pod)
        scheduler.schedule_pod(snapshot, pod, rng)
    latencies = []
    for pod in sequence[warm:]:
        started = time.perf_counter()
        scheduler.observe_arrival(pod)
        scheduler.schedule_pod(snapshot, pod, rng)
        latencies.append((time.perf_counter() - started) * 1000)
    return {
        "median_ms": statistics.median(latencies),
        "p95_ms": float(np.percentile(latencies, 95)),
        "allocated_gpu_pct": 100 * snapshot.allocated_gpu_milli() / (snapshot.total_gpus * 1000),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=Path, default=openb_dir() / OPENB_NODES)
    parser.add_argument("--trace", type=Path, default=openb_dir() / OPENB_DEFAULT_PODS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--warm", type=int, default=20_000, help="pods placed before timing")
    args = parser.parse_args()

    runs = {}
    policies = policies_to_time()
    for label, policy in policies.items():
        times = [
            full_run_seconds(args.nodes, args.trace, policy, args.seed) for _ in range(args.repeats)
        ]
        runs[label] = {"seconds": times, "median_s": statistics.median(times)}

    nodes = load_nodes(args.nodes)
    scaling = {}
    for factor in (1, 2, 4, 8):
        scaling[factor] = {
            "nodes": len(nodes) * factor,
            "us_per_decision": decision_cost_us(nodes, args.trace, factor, decisions=2000),
        }
    base = scaling[1]["us_per_decision"]
    latency = {
        label: decision_latency_ms(
            nodes, args.trace, policy, LATENCY_NODES, warm=args.warm, timed=1000
        )
        for label, policy in policies.items()
    }

    lines = [
        f"# Simulator speed ({args.trace.name}, 130% demand, seed {args.seed})",
        "",
        f"Goal: one full run <= {GOAL_S:.0f} s; reference Go simulator ~{REFERENCE_S:.0f} s/run.",
        "",
        f"| strategy or policy | median of {args.repeats} (s) | runs (s) | within goal |",
        "|---|---:|---|---|",
    ]
    for strategy, figures in runs.items():
        seconds = ", ".join(f"{s:.2f}" for s in figures["seconds"])
        ok = "yes" if figures["median_s"] <= GOAL_S else "NO"
        lines.append(f"| {strategy} | {figures['median_s']:.2f} | {seconds} | {ok} |")
    lines += [
        "",
        "## Cost of one decision against cluster size (best-fit, 2,000 decisions)",
        "",
        "| nodes | us per decision | x of 1,213 nodes |",
        "|---:|---:|---:|",
    ]
    for figures in scaling.values():
        ratio = figures["us_per_decision"] / base
        lines.append(f"| {figures['nodes']} | {figures['us_per_decision']:.0f} | {ratio:.2f} |")
    lines += [
        "",
        f"## One decision on a {LATENCY_NODES:,}-node cluster (openb node mix cycled; "
        f"{args.warm:,} pods placed first, then 1,000 timed)",
        "",
        f"Goal: median <= {LATENCY_GOAL_MS:.0f} ms.",
        "",
        "| strategy or policy | median (ms) | p95 (ms) | GPUs allocated while timed "
        "| within goal |",
        "|---|---:|---:|---:|---|",
    ]
    for strategy, figures in latency.items():
        ok = "yes" if figures["median_ms"] <= LATENCY_GOAL_MS else "NO"
        lines.append(
            f"| {strategy} | {figures['median_ms']:.2f} | {figures['p95_ms']:.2f} | "
            f"{figures['allocated_gpu_pct']:.0f}% | {ok} |"
        )
    save(
        "sim_speed",
        {
            "trace": args.trace.name,
            "goal_s": GOAL_S,
            "reference_s": REFERENCE_S,
            "runs": runs,
            "decision_scaling": scaling,
            "decision_latency_10k_nodes": latency,
        },
        "\n".join(lines) + "\n",
    )


if __name__ == "__main__":
    main()
