"""NIC-bandwidth packing of disaggregated DLRM serving on the Alibaba 2025 trace (Prism, NSDI'25).

Packs the instances alive at one instant (default: the peak) onto pools of documented node
shapes, once per policy: voltpack's joint GPU+NIC allocation, a NIC-blind packing, a node-level
NIC count (a Kubernetes extended resource: one whole NIC per instance) and a node-level pool of
NIC percent. Reports nodes used, stranded GPUs and CPU cores, and NIC oversubscription; the
definitions are in `voltpack.sim.nic_packing` and in the Markdown this script writes.

Usage:
  python benchmarks/nic_packing.py
  python benchmarks/nic_packing.py --trace FILE --nodes FILE --out DIR
  python benchmarks/nic_packing.py --at start            # instances alive when the trace starts
  python benchmarks/nic_packing.py --at 1500000 --strategy gpu-packing
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from _common import save

from voltpack.model.data_files import find_data_dir
from voltpack.sim.nic_packing import (
    POLICIES,
    NicPolicy,
    PackingResult,
    load_dlrm_trace,
    load_node_shapes,
    peak_time,
    run_nic_packing,
)

DATASET = Path("alibaba-dlrm-2025")
TRACE = DATASET / "disaggregated_DLRM_trace.csv"
NODES = DATASET / "node_shapes.yaml"
STRANDED_GPU_TARGET = 0.20
"""Acceptance: joint packing strands at least 20% fewer GPUs than the node-level NIC count."""

POLICY_WORDS: dict[NicPolicy, str] = {
    "joint": "voltpack: GPU and one NIC's share allocated together",
    "nic-ignorant": "NIC bandwidth ignored when placing",
    "node-nic-count": "node-level count of NICs (extended resource): one whole NIC per instance",
    "node-rdma-pool": "node-level pool of NIC percent (extended resource), no NIC identity",
}


def default_file(relative: Path) -> Path:
    """A file of the shipped dataset (`data/` or `$VOLTPACK_DATA_DIR`)."""
    found = find_data_dir(relative)
    if found is None:
        raise SystemExit(f"cannot find {relative} in voltpack's data folder; pass it explicitly")
    return found / relative


def parse_time(text: str, instances: Any) -> float | None:
    """'peak' (None), 'start' (0) or seconds from the trace's start."""
    if text == "peak":
        return None
    if text == "start":
        return 0.0
    try:
        return float(text)
    except ValueError:
        raise SystemExit(f"--at: {text!r} is not 'peak', 'start' or a number of seconds") from None


def row_of(result: PackingResult, wall_s: float) -> dict[str, Any]:
    """One policy's figures: totals, and per role."""
    cn, hn = result.roles
    return {
        "policy": result.policy,
        "instances": int(result.total("instances")),
        "unplaced": int(result.total("instances") - result.total("placed")),
        "cn_nodes_used": cn.nodes_used,
        "hn_nodes_used": hn.nodes_used,
        "gpus_on_used_nodes": hn.gpus_on_used_nodes,
        "gpus_free_on_used_nodes": hn.gpus_free_on_used_nodes,
        "stranded_gpus": int(result.total("stranded_gpus")),
        "stranded_cpu_cores_cn": cn.stranded_cpu_cores,
        "stranded_cpu_cores_hn": hn.stranded_cpu_cores,
        "oversubscribed_nics": int(result.total("oversubscribed_nics")),
        "rdma_nics_on_used_nodes": int(result.total("rdma_nics_on_used_nodes")),
        "nic_excess_pct_points": int(result.total("nic_excess_pct_points")),
        "max_nic_load_pct": max(cn.max_nic_load_pct, hn.max_nic_load_pct),
        "instances_on_oversubscribed_nics": int(result.total("instances_on_oversubscribed_nics")),
        "wall_s": round(wall_s, 2),
        "roles": [role.as_dict() for role in result.roles],
    }


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The rows as Markdown, with the definitions and the acceptance check."""
    lines = [
        "# NIC-bandwidth packing: Alibaba 2025 disaggregated DLRM trace",
        "",
        f"Trace `{meta['trace']}`, node shapes `{meta['nodes']}`, instances alive at "
        f"t = {meta['time_s']:.0f} s ({meta['time_label']}): {meta['instances']} "
        f"({meta['cn_instances']} CN, {meta['hn_instances']} HN); strategy `{meta['strategy']}`.",
        "",
        "| policy | CN nodes | HN nodes | stranded GPUs | GPUs free on used nodes "
        "| stranded CPU cores (CN / HN nodes) | oversubscribed NICs | excess (pct points) "
        "| max NIC load | instances on oversubscribed NICs | unplaced | s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['policy']} | {row['cn_nodes_used']} | {row['hn_nodes_used']} | "
            f"{row['stranded_gpus']} | {row['gpus_free_on_used_nodes']} | "
            f"{row['stranded_cpu_cores_cn']:.0f} / {row['stranded_cpu_cores_hn']:.0f} | "
            f"{row['oversubscribed_nics']} of {row['rdma_nics_on_used_nodes']} | "
            f"{row['nic_excess_pct_points']} | {row['max_nic_load_pct']}% | "
            f"{row['instances_on_oversubscribed_nics']} | {row['unplaced']} | {row['wall_s']} |"
        )
    lines += ["", "Policies:", ""]
    lines += [f"- `{row['policy']}`: {POLICY_WORDS[row['policy']]}" for row in rows]
    check = meta.get("acceptance")
    if check:
        lines += [
            "",
            f"Acceptance: `joint` oversubscribes {check['joint_oversubscribed_nics']} NICs and "
            f"strands {check['joint_stranded_gpus']} GPUs against "
            f"{check['node_count_stranded_gpus']} for `node-nic-count`: "
            f"{check['stranded_gpu_reduction_pct']:.1f}% fewer (target >= "
            f"{STRANDED_GPU_TARGET:.0%}; Prism reports 27% less GPU fragmentation): "
            f"{'met' if check['met'] else 'NOT met'}.",
        ]
    lines += [
        "",
        "Definitions (over *used* nodes, those holding an instance):",
        "",
        "- *stranded GPUs*: free GPUs that no further instance can use. Per node and per "
        "distinct request shape of its role in the demand, count the copies the node still "
        "admits under the policy's own accounting (free CPU, memory, GPUs, and NIC bandwidth "
        "as that policy counts it; `max_instance_per_node` not applied); stranded = free GPUs "
        "minus the most GPUs one shape can still take. *Stranded CPU cores* likewise.",
        "- *oversubscribed NICs*: RDMA NICs whose instances' real shares add up to more than "
        "100%. Policies that do not pick a NIC (`nic-ignorant`, `node-rdma-pool`) are given, "
        "with hindsight, the nearest NIC with room for each instance (else the nearest NIC), "
        "so their figure is a lower bound.",
        "- CN instances run on CN nodes, HN instances on HN nodes; every policy uses the same "
        "scheduling core, strategy and per-app `max_instance_per_node` limit.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark; `argv` overrides the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None, help="trace CSV (this format)")
    parser.add_argument("--nodes", type=Path, default=None, help="node shapes YAML")
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    parser.add_argument("--at", default="peak", help="'peak', 'start' or seconds")
    parser.add_argument("--strategy", default="best-fit", help="scoring strategy name")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="nic_packing", help="results file stem")
    args = parser.parse_args(argv)
    trace = args.trace or default_file(TRACE)
    nodes = args.nodes or default_file(NODES)
    policies: list[NicPolicy] = []
    for name in args.policies.split(","):
        if name not in POLICIES:
            raise SystemExit(f"--policies: {name!r} is none of {', '.join(POLICIES)}")
        policies.append(name)
    instances = load_dlrm_trace(trace)
    shapes = load_node_shapes(nodes)
    at = parse_time(args.at, instances)
    time_s = peak_time(instances) if at is None else at
    rows: list[dict[str, Any]] = []
    counts: tuple[int, int] = (0, 0)
    for policy in policies:
        started = time.perf_counter()
        result = run_nic_packing(instances, shapes, policy, time_s, args.strategy, args.seed)
        rows.append(row_of(result, time.perf_counter() - started))
        counts = (result.roles[0].instances, result.roles[1].instances)
        print(f"{policy:16s} stranded GPUs {rows[-1]['stranded_gpus']}", flush=True)
    meta: dict[str, Any] = {
        "trace": trace.name if args.trace is None else str(trace),
        "nodes": nodes.name if args.nodes is None else str(nodes),
        "time_s": time_s,
        "time_label": "the peak of alive instances" if at is None else f"--at {args.at}",
        "instances": sum(counts),
        "cn_instances": counts[0],
        "hn_instances": counts[1],
        "strategy": args.strategy,
    }
    by_policy = {row["policy"]: row for row in rows}
    if "joint" in by_policy and "node-nic-count" in by_policy:
        joint, baseline = by_policy["joint"], by_policy["node-nic-count"]
        base = baseline["stranded_gpus"]
        reduction = 1 - joint["stranded_gpus"] / base if base else 0.0
        meta["acceptance"] = {
            "joint_oversubscribed_nics": joint["oversubscribed_nics"],
            "joint_stranded_gpus": joint["stranded_gpus"],
            "node_count_stranded_gpus": base,
            "stranded_gpu_reduction_pct": round(100 * reduction, 2),
            "met": joint["oversubscribed_nics"] == 0 and reduction >= STRANDED_GPU_TARGET,
        }
    save(args.name, {"meta": meta, "rows": rows}, markdown(rows, meta), args.out)


if __name__ == "__main__":
    main()
