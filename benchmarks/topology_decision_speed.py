"""How long one topology-aware gang decision takes: a 256-GPU gang on 1,000 and 10,000 nodes.

Issue 19's goal: at most 100 ms at the median on 1,000 nodes and 1 s on 10,000. Each cluster is
synthetic, of the Lingjun kind: 8-GPU hosts (one NVSwitch domain, four RoCE NICs), 8 hosts per
leaf, 16 leaves per spine, spines under one core; 2:1 oversubscription at leaf and spine. About
60% of the GPUs are busy (whole hosts busy, hosts partly busy, hosts idle, at random), so the
gang has to look for room. The gang: 32 pods of 8 GPUs, llama-2-70b at tensor 8 x pipeline 4 x
data 8, placed by voltpack's step-time placement (every candidate's step time predicted) and, for
comparison, by the Kueue and KAI baselines. Each decision runs on a fresh copy of the same
snapshot; the copy and the per-cycle topology build are timed apart.

Usage: python benchmarks/topology_decision_speed.py [--nodes 1000,10000] [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
from _common import save

from voltpack.model.cluster import MILLI_PER_GPU, Node
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.host_layout import HostLayout, HostNic
from voltpack.model.resources.topology import TopologyLevel, TopologySpec
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.topology import ClusterTopology
from voltpack.model.workload import Pod, PodGroup
from voltpack.perf.training_models import Parallelism, default_training_models
from voltpack.policies.topology.placers import KAI, KUEUE, StepTimePlacer
from voltpack.policies.topology.step_model import gang_step_model
from voltpack.scheduler.gang_topology import TopologyPlacer, place_gang

NAME = "topology_decision_speed"
HOSTS_PER_LEAF = 8
LEAVES_PER_SPINE = 16
GOALS_MS = {1000: 100.0, 10000: 1000.0}
HOST = HostLayout(
    gpu_count=8,
    nvlink_domains=(tuple(range(8)),),
    numa_of_gpu=(0, 0, 0, 0, 1, 1, 1, 1),
    nics=tuple(
        HostNic(
            name=f"mlx5_{i}",
            nic_class="roce",
            line_rate_gbit_s=200,
            numa_node=i // 2,
            pcie_gpus=(2 * i, 2 * i + 1),
        )
        for i in range(4)
    ),
)
SPEC = TopologySpec(
    levels=[
        TopologyLevel(node_label="core", oversubscription=1.0),
        TopologyLevel(node_label="spine", oversubscription=2.0),
        TopologyLevel(node_label="leaf", oversubscription=2.0),
    ]
)


def cluster(nodes: int, seed: int) -> tuple[ClusterSnapshot, dict[str, dict[str, str]]]:
    """A synthetic cluster of `nodes` 8-GPU hosts, about 60% of its GPUs busy."""
    rng = np.random.default_rng(seed)
    names = [f"h{i:05d}" for i in range(nodes)]
    snapshot = ClusterSnapshot.from_nodes(
        [Node.empty(n, 128_000, 1_000_000, 8, "A100-80GB", layout=HOST) for n in names]
    )
    for row in range(nodes):
        draw = rng.random()
        busy = 8 if draw < 0.45 else 0 if draw < 0.75 else int(rng.integers(1, 8))
        if busy:
            filler = Pod(
                name=f"busy-{row}", cpu_milli=0, memory_mib=0, num_gpu=busy, gpu_milli=1000
            )
            snapshot.allocate(row, filler, sorted(rng.choice(8, busy, replace=False).tolist()))
    labels = {
        name: {
            "core": "c0",
            "spine": f"s{i // (HOSTS_PER_LEAF * LEAVES_PER_SPINE)}",
            "leaf": f"l{i // HOSTS_PER_LEAF}",
        }
        for i, name in enumerate(names)
    }
    return snapshot, labels


def gang() -> PodGroup:
    """32 pods of 8 GPUs."""
    pods = tuple(
        Pod(name=f"g-{i:02d}", cpu_milli=1000, memory_mib=1024, num_gpu=8, gpu_milli=MILLI_PER_GPU)
        for i in range(32)
    )
    return PodGroup(name="g", pods=pods, min_member=32)


def measure(nodes: int, repeats: int, seed: int) -> dict[str, Any]:
    """Median and p95 milliseconds of one decision per placer on one cluster size."""
    snapshot, labels = cluster(nodes, seed)
    started = time.perf_counter()
    topology = ClusterTopology.from_labels(
        SPEC, snapshot.node_names, labels, hosts=dict.fromkeys(snapshot.node_names, HOST)
    )
    build_ms = 1000 * (time.perf_counter() - started)
    sku = default_catalog().get("A100-80GB")
    model = default_training_models().get("llama-2-70b")
    step_model = gang_step_model(topology, model, Parallelism(8, 4, 8), sku)
    placers: dict[str, tuple[TopologyPlacer, Any]] = {
        "voltpack": (StepTimePlacer(), step_model),
        "kueue": (KUEUE, None),
        "kai": (KAI, None),
    }
    group = gang()
    result: dict[str, Any] = {"nodes": nodes, "topology_build_ms": build_ms, "placers": {}}
    for name, (placer, model_for_placer) in placers.items():
        times: list[float] = []
        reason = ""
        for _ in range(repeats):
            copy = snapshot.copy()
            started = time.perf_counter()
            outcome = place_gang(
                copy, topology, group, placer, tensor_parallel=8, step_model=model_for_placer
            )
            times.append(1000 * (time.perf_counter() - started))
            reason = outcome.decision.reason
        ordered = sorted(times)
        result["placers"][name] = {
            "median_ms": statistics.median(times),
            "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
            "placed": outcome.decision.placed,
            "reason": reason,
        }
    return result


def render(rows: list[dict[str, Any]], repeats: int) -> str:
    """The Markdown table."""
    lines = [
        "# One topology-aware gang decision (256 GPUs: 32 pods x 8)",
        "",
        f"Median and p95 of {repeats} decisions on the same snapshot; synthetic Lingjun-like "
        "clusters, about 60% of GPUs busy. Goal (issue 19): median at most 100 ms on 1,000 "
        "nodes and 1 s on 10,000.",
        "",
        "| nodes | placer | median ms | p95 ms | goal ms | placed | topology build ms |",
        "|---:|---|---:|---:|---:|---|---:|",
    ]
    for row in rows:
        goal = GOALS_MS.get(row["nodes"])
        for name, item in row["placers"].items():
            lines.append(
                f"| {row['nodes']} | {name} | {item['median_ms']:.1f} | {item['p95_ms']:.1f} | "
                f"{'-' if goal is None or name != 'voltpack' else f'{goal:.0f}'} | "
                f"{item['placed']} | {row['topology_build_ms']:.0f} |"
            )
    lines += ["", "voltpack's reason on the largest cluster:", ""]
    lines.append(f"> {rows[-1]['placers']['voltpack']['reason']}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1000,10000", help="cluster sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    rows = [measure(n, args.repeats, args.seed) for n in sizes]
    for row in rows:
        goal = GOALS_MS.get(row["nodes"])
        if goal is not None:
            row["goal_ms"] = goal
            row["goal_met"] = row["placers"]["voltpack"]["median_ms"] <= goal
    save(
        NAME,
        {"repeats": args.repeats, "seed": args.seed, "sizes": rows},
        render(rows, args.repeats),
    )


if __name__ == "__main__":
    main()
