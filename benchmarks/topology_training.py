"""Topology-aware placement of training jobs: job completion times on a cluster with a network.

Every policy replays the same job trace on the same cluster with the same FIFO queue (see
`voltpack/sim/topology_training.py`); only where gangs go differs, and a job runs its steps at
the step time predicted for the placement it got. Policies: pod-by-pod best-fit and fgd
(topology-unaware), Kueue's and KAI's label-only topology placement (preferring the lowest
level, a leaf switch), and voltpack's step-time-aware placement. Then `optimality`: voltpack's
(and every policy's) predicted step time against the exact optimum on random 16-node clusters
cut from the same topology.

Usage:
  python benchmarks/topology_training.py                      # Lingjun, LLM jobs, contention on
  python benchmarks/topology_training.py --workload philly --contention off  # issue 19's setup
  python benchmarks/topology_training.py --topology topo.csv --trace jobs.csv --out /tmp/results
  python benchmarks/topology_training.py --jobs 2000 --load 0.8 --processes 2

The trace CSV is `job_id,arrival_s,num_gpus,model,steps` (voltpack/sim/traces/training_jobs.py);
the topology is a CSV of host then switch levels, top first (Lingjun's `topo.csv` format), with
its levels' oversubscription and host layout from `--topology-spec` (default: `topology.yaml`
beside the CSV when there is one). A CSV without a spec, or a spec leaving a level's
oversubscription or the host layout unstated, is refused with the missing fields named.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from _common import save

from voltpack.model.errors import TraceFormatError
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.topology import ClusterTopology
from voltpack.perf.training_models import default_parallelism
from voltpack.policies.schema import TopologyPolicySpec
from voltpack.policies.topology import placers
from voltpack.policies.topology.step_model import gang_step_model
from voltpack.scheduler.wait_or_place import WaitRule
from voltpack.sim.datasets import data_dir
from voltpack.sim.topology_training import (
    PlacementPolicy,
    SimConfig,
    optimality_study,
    simulate_all,
)
from voltpack.sim.traces.gavel_generator import load_philly_distribution
from voltpack.sim.traces.llm_jobs import LlmJobsConfig, generate_llm_jobs, job_type_of
from voltpack.sim.traces.topology_files import load_csv_topology, read_topology_spec
from voltpack.sim.traces.training_jobs import (
    DEFAULT_MAX_DURATION_S,
    PhillyJobsConfig,
    TrainingJob,
    generate_philly_jobs,
    load_training_jobs,
    offered_load,
    write_training_jobs,
)

NAME = "topology_training"
LINGJUN = "alibaba-lingjun-2023"


def make_policies(topology: ClusterTopology, wanted: list[str]) -> list[PlacementPolicy]:
    """The policies to compare, in the table's order."""
    leaf = topology.levels[-1].node_label
    block = topology.levels[-2].node_label if topology.level_count > 1 else leaf
    every = {
        "best-fit": PlacementPolicy("best-fit", strategy="best-fit"),
        "fgd": PlacementPolicy("fgd", strategy="fgd"),
        "kueue-preferred": PlacementPolicy(
            "kueue-preferred", placer=placers.KUEUE, preferred_level=leaf
        ),
        "kueue-required": PlacementPolicy(
            "kueue-required", placer=placers.KUEUE, required_level=block, preferred_level=leaf
        ),
        "kai": PlacementPolicy("kai", placer=placers.KAI, preferred_level=leaf),
        "voltpack": PlacementPolicy("voltpack", placer=placers.StepTimePlacer()),
    }
    unknown = [name for name in wanted if name not in every]
    if unknown:
        raise SystemExit(f"--policies: unknown {unknown}; known: {', '.join(every)}")
    return [every[name] for name in wanted]


def run_variants(
    args: argparse.Namespace, base: SimConfig, policies: list[PlacementPolicy]
) -> list[tuple[str, SimConfig, list[PlacementPolicy]]]:
    """(name suffix, queue configuration, policies) of every run: each policy without and/or
    with EASY backfill (the same right for all), and voltpack's wait-or-place on top of
    backfill, bounded by the policy file's defaults."""
    plain = [("", base, policies)] if args.backfill in ("off", "both") else []
    backfilled = replace(base, backfill=True)
    with_backfill = [("+backfill", backfilled, policies)] if args.backfill in ("on", "both") else []
    voltpack = [p for p in policies if p.name == "voltpack"]
    waiting = []
    if args.wait == "on" and voltpack:
        rule = WaitRule.from_policy(TopologyPolicySpec())
        waiting = [("+backfill+wait", replace(backfilled, wait_rule=rule), voltpack)]
    return [*plain, *with_backfill, *waiting]


def load_topology(args: argparse.Namespace) -> tuple[ClusterTopology, dict[str, Any]]:
    csv_path: Path = args.topology
    spec_path: Path | None = args.topology_spec
    if spec_path is None and (csv_path.parent / "topology.yaml").is_file():
        spec_path = csv_path.parent / "topology.yaml"
    spec = read_topology_spec(spec_path) if spec_path is not None else None
    try:
        topology = load_csv_topology(csv_path, spec, args.gpus_per_host, str(spec_path))
    except TraceFormatError as exc:
        raise SystemExit(f"topology: {exc}") from None
    info = {
        "file": str(csv_path),
        "spec": str(spec_path) if spec_path else None,
        "nodes": topology.node_count,
        "gpus": int(sum(host.gpu_count for host in topology.hosts)),
        "levels": [
            {
                "label": level.node_label,
                "domains": topology.domain_count(i),
                "oversubscription": level.oversubscription,
            }
            for i, level in enumerate(topology.levels)
        ],
    }
    return topology, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    lingjun = data_dir() / LINGJUN
    parser.add_argument("--topology", type=Path, default=lingjun / "topo.csv")
    parser.add_argument("--topology-spec", type=Path, default=None, help="Topology YAML")
    parser.add_argument(
        "--gpus-per-host", type=int, default=None, help="default: the spec's defaultHost.gpus"
    )
    parser.add_argument("--trace", type=Path, default=None, help="job CSV (default: generated)")
    parser.add_argument(
        "--workload",
        choices=("llm", "philly"),
        default="llm",
        help="generated trace: LLM-cluster jobs after Acme (NSDI'24), or Philly's x gpu-scale",
    )
    parser.add_argument(
        "--acme-cluster", choices=("kalos", "seren"), default="kalos", help="llm: which cluster"
    )
    parser.add_argument("--jobs", type=int, default=6000, help="generated trace: jobs")
    parser.add_argument("--load", type=float, default=0.9, help="generated trace: offered load")
    parser.add_argument("--gpu-scale", type=int, default=8, help="generated: x Philly GPUs")
    parser.add_argument(
        "--max-duration-s",
        type=float,
        default=DEFAULT_MAX_DURATION_S,
        help="generated: truncate Philly durations (0: keep them)",
    )
    parser.add_argument("--save-trace", type=Path, default=None, help="write the trace here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gpu", default="A100-80GB", help="GPU SKU of every host")
    parser.add_argument(
        "--policies", default="best-fit,fgd,kueue-preferred,kueue-required,kai,voltpack"
    )
    parser.add_argument("--processes", type=int, default=1, help="policies run in parallel")
    parser.add_argument(
        "--pod-gpus",
        type=int,
        default=None,
        help="GPUs per pod of every gang (default: one pod per node's worth)",
    )
    parser.add_argument(
        "--contention",
        choices=("on", "off"),
        default="on",
        help="on: running jobs share links (flow model); off: each job priced alone",
    )
    parser.add_argument(
        "--backfill",
        choices=("off", "on", "both"),
        default="both",
        help="EASY backfill for every policy: without, with, or both side by side",
    )
    parser.add_argument(
        "--wait",
        choices=("off", "on"),
        default="on",
        help="also run voltpack with wait-or-place (and backfill), the policy file's bound",
    )
    parser.add_argument("--name", default=NAME, help="results file name")
    parser.add_argument("--optimality-instances", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    args = parser.parse_args()

    started = time.perf_counter()
    topology, topology_info = load_topology(args)
    sku = default_catalog().get(args.gpu)
    cluster_gpus = topology_info["gpus"]

    def ideal_s(model: Any, gpus: int) -> float:
        return gang_step_model(topology, model, default_parallelism(model, gpus), sku).ideal_s()

    if args.trace is not None:
        jobs: list[TrainingJob] = load_training_jobs(args.trace)
        trace_info: dict[str, Any] = {"file": str(args.trace)}
    elif args.workload == "llm":
        llm = LlmJobsConfig(
            num_jobs=args.jobs,
            seed=args.seed,
            cluster=args.acme_cluster,
            target_load=args.load,
            max_duration_s=args.max_duration_s or None,
        )
        jobs = generate_llm_jobs(llm, cluster_gpus, ideal_s)
        trace_info = {
            "generated": "llm",
            "acme_cluster": args.acme_cluster,
            "target_load": args.load,
            "max_duration_s": llm.max_duration_s,
            "seed": args.seed,
            "job_types": dict(Counter(job_type_of(job) for job in jobs)),
        }
    else:
        config = PhillyJobsConfig(
            num_jobs=args.jobs,
            seed=args.seed,
            target_load=args.load,
            gpu_scale=args.gpu_scale,
            max_duration_s=args.max_duration_s or None,
        )
        philly = load_philly_distribution(data_dir() / "gavel" / "philly_job_distribution.csv")
        jobs = generate_philly_jobs(philly, config, cluster_gpus, ideal_s)
        trace_info = {
            "generated": "philly",
            "target_load": args.load,
            "gpu_scale": args.gpu_scale,
            "max_duration_s": config.max_duration_s,
            "seed": args.seed,
        }
    if args.save_trace is not None:
        write_training_jobs(args.save_trace, jobs)
    trace_info.update(
        jobs=len(jobs),
        offered_load=offered_load(jobs, cluster_gpus, ideal_s),
        arrival_span_s=max(j.arrival_s for j in jobs) - min(j.arrival_s for j in jobs),
        gpus=sorted({j.num_gpus for j in jobs}),
        models=sorted({j.model for j in jobs}),
    )
    policies = make_policies(topology, [p.strip() for p in args.policies.split(",")])

    sim_started = time.perf_counter()
    base = SimConfig(
        sku=sku, seed=args.seed, pod_gpus=args.pod_gpus, contention=args.contention == "on"
    )
    results = []
    for variant, sim_config, chosen in run_variants(args, base, policies):
        for result in simulate_all(topology, jobs, chosen, sim_config, args.processes):
            result.policy += variant
            results.append(result)
    sim_s = time.perf_counter() - sim_started
    rows = [result.summary() for result in results]
    for row, result in zip(rows, results, strict=True):
        last_arrival = max(j.arrival_s for j in jobs)
        busy = sum(
            r.num_gpus * max(0.0, min(r.end_s, last_arrival) - min(r.start_s, last_arrival))
            for r in result.records
        )
        row["gpu_utilization_while_arriving"] = (
            busy / (cluster_gpus * last_arrival) if last_arrival > 0 else None
        )

    opt_started = time.perf_counter()
    study = optimality_study(
        topology, policies, sku, instances=args.optimality_instances, seed=args.seed
    )
    optimality = study.summary("voltpack")
    opt_s = time.perf_counter() - opt_started

    figures = {
        "topology": topology_info,
        "gpu": sku.name,
        "pod_gpus": args.pod_gpus,
        "contention": args.contention,
        "backfill": args.backfill,
        "wait": args.wait,
        "trace": trace_info,
        "policies": rows,
        "goals": goals(rows),
        "optimality": optimality,
        "timing": {
            "simulation_s": sim_s,
            "optimality_s": opt_s,
            "total_s": time.perf_counter() - started,
            "processes": args.processes,
        },
    }
    save(args.name, figures, render(figures), args.out)


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def gain_sources(ours: dict[str, Any], peer: dict[str, Any]) -> dict[str, float] | None:
    """Where voltpack's average JCT gain over `peer` comes from, in hours: waiting in the
    queue and running (step time); and the peer's step-time headroom: how much of its JCT any
    placement could save on step time alone (its run at every job's ideal, uncontended step),
    in % of its JCT. None when a run lacks the figures."""
    keys = ("avg_jct_s", "avg_queue_s", "avg_run_s", "avg_ideal_run_s")
    if any(row.get(key) is None for row in (ours, peer) for key in keys):
        return None
    return {
        "jct_gain_h": (peer["avg_jct_s"] - ours["avg_jct_s"]) / 3600.0,
        "queue_gain_h": (peer["avg_queue_s"] - ours["avg_queue_s"]) / 3600.0,
        "run_gain_h": (peer["avg_run_s"] - ours["avg_run_s"]) / 3600.0,
        "peer_queue_share_pct": 100.0 * peer["avg_queue_s"] / peer["avg_jct_s"],
        "peer_step_headroom_pct": 100.0
        * (peer["avg_run_s"] - peer["avg_ideal_run_s"])
        / peer["avg_jct_s"],
    }


def goals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 32's goals, per queue variant: voltpack against the better Kueue TAS (required or
    preferred, lower average JCT) and against best-fit, each with the same queue rights."""
    by_name = {row["policy"]: row for row in rows}
    found = []
    for variant, mine in (("", ""), ("+backfill", "+backfill"), ("+backfill", "+backfill+wait")):
        ours = by_name.get(f"voltpack{mine}")
        kueues = [by_name[n] for n in (f"kueue-{k}{variant}" for k in ("required", "preferred"))
                  if n in by_name and by_name[n]["avg_jct_s"] is not None]  # fmt: skip
        best_fit = by_name.get(f"best-fit{variant}")
        if ours is None or ours["avg_jct_s"] is None or not kueues:
            continue
        kueue = min(kueues, key=lambda row: row["avg_jct_s"])
        item: dict[str, Any] = {
            "voltpack": ours["policy"],
            "kueue": kueue["policy"],
            "jct_below_kueue_pct": 100.0 * (1.0 - ours["avg_jct_s"] / kueue["avg_jct_s"]),
            "p99_no_worse_than_kueue": ours["p99_jct_s"] <= kueue["p99_jct_s"],
            "utilization_no_lower": ours["gpu_utilization"] >= kueue["gpu_utilization"],
            "contention_slowdown_over_kueue": (
                (ours["avg_step_slowdown"] - 1.0) / (kueue["avg_step_slowdown"] - 1.0)
                if kueue["avg_step_slowdown"] > 1.0
                else None
            ),
        }
        item["gain_vs_kueue"] = gain_sources(ours, kueue)
        if best_fit is not None and best_fit["avg_jct_s"]:
            item["best_fit"] = best_fit["policy"]
            item["jct_below_best_fit_pct"] = 100.0 * (
                1.0 - ours["avg_jct_s"] / best_fit["avg_jct_s"]
            )
            item["gain_vs_best_fit"] = gain_sources(ours, best_fit)
        item["met"] = (
            item["jct_below_kueue_pct"] >= 10.0
            and item.get("jct_below_best_fit_pct", 0.0) >= 25.0
            and item["p99_no_worse_than_kueue"]
            and item["utilization_no_lower"]
            and (item["contention_slowdown_over_kueue"] or 0.0) <= 0.5
        )
        found.append(item)
    return found


def render(figures: dict[str, Any]) -> str:
    """The Markdown report."""
    topo, trace = figures["topology"], figures["trace"]
    levels = ", ".join(f"{lv['label']} {lv['oversubscription']:g}:1" for lv in topo["levels"])
    lines = [
        "# Topology-aware training placement",
        "",
        f"Cluster: {topo['file']} ({topo['nodes']} hosts, {topo['gpus']} {figures['gpu']} GPUs; "
        f"oversubscription {levels}). Trace: {trace['jobs']} jobs, offered load "
        f"{trace['offered_load']:.2f} at ideal step times, over "
        f"{trace['arrival_span_s'] / 86400:.1f} days; GPUs per job {trace['gpus']}. "
        f"Workload {trace.get('generated', 'from file')}, contention "
        f"{figures.get('contention', 'off')}.",
        "",
        "| policy | avg JCT (h) | p99 JCT (h) | avg step slowdown | max step slowdown | "
        "inflicted | GPU util. | util. while arriving | avg queue (h) | multi-node jobs | "
        "unplaced |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in figures["policies"]:
        util = row.get("gpu_utilization_while_arriving")
        lines.append(
            f"| {row['policy']} | {_hours(row['avg_jct_s'])} | {_hours(row['p99_jct_s'])} | "
            f"{row['avg_step_slowdown']:.4f} | {row['max_step_slowdown']:.4f} | "
            f"{row.get('avg_inflicted_slowdown') or 0.0:.4f} | {row['gpu_utilization']:.3f} | "
            f"{'-' if util is None else f'{util:.3f}'} | "
            f"{_hours(row['avg_queue_s'])} | {row['multi_node_jobs']} | {row['unplaced']} |"
        )
    lines += [
        "",
        "Goals (issue 32): average JCT >= 10% below the better Kueue TAS and >= 25% below "
        "best-fit, p99 no worse, utilisation no lower, contention slowdown at most half of "
        "Kueue's.",
        "",
        "| voltpack | Kueue | JCT below Kueue % | JCT below best-fit % | p99 no worse | "
        "util. no lower | slowdown / Kueue's | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for item in goals(figures["policies"]):
        ratio = item["contention_slowdown_over_kueue"]
        lines.append(
            f"| {item['voltpack']} | {item['kueue']} | {item['jct_below_kueue_pct']:+.1f} | "
            f"{item.get('jct_below_best_fit_pct', float('nan')):+.1f} | "
            f"{item['p99_no_worse_than_kueue']} | {item['utilization_no_lower']} | "
            f"{'-' if ratio is None else f'{ratio:.2f}'} | {item['met']} |"
        )
    lines += _gain_table(goals(figures["policies"]))
    opt = figures["optimality"]
    lines += [
        "",
        f"Optimality ({opt['instances']} random {16}-host instances, predicted step time over "
        "the exact optimum):",
        "",
        "| policy | instances | max gap % | mean gap % | optimal share | below optimum |",
        "|---|---|---|---|---|---|",
    ]
    for name, item in opt["per_policy"].items():
        if not item["instances"]:
            continue
        lines.append(
            f"| {name} | {item['instances']} | {item['max_gap_pct']:.2f} | "
            f"{item['mean_gap_pct']:.2f} | {item['optimal_share']:.2f} | "
            f"{item['below_optimum']} |"
        )
    timing = figures["timing"]
    lines += [
        "",
        f"Simulation {timing['simulation_s']:.0f} s ({timing['processes']} process(es)), "
        f"optimality {timing['optimality_s']:.0f} s, total {timing['total_s']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


def _gain_table(items: list[dict[str, Any]]) -> list[str]:
    """The 'where the gain comes from' section of the report."""
    lines = [
        "",
        "Where the gain comes from: voltpack's average JCT gain over the peer split into "
        "waiting (queue) and running (step time), in hours; the peer's queue share of its JCT; "
        "and its step-time headroom: the share of its JCT that any placement could still save "
        "on step time (every job at its ideal, uncontended step).",
        "",
        "| voltpack | peer | JCT gain (h) | from queue (h) | from run (h) | peer queue share % | "
        "peer step headroom % |",
        "|---|---|---|---|---|---|---|",
    ]
    for item in items:
        for key, name in (("gain_vs_kueue", "kueue"), ("gain_vs_best_fit", "best_fit")):
            gain = item.get(key)
            if gain is None:
                continue
            lines.append(
                f"| {item['voltpack']} | {item[name]} | {gain['jct_gain_h']:+.3f} | "
                f"{gain['queue_gain_h']:+.3f} | {gain['run_gain_h']:+.3f} | "
                f"{gain['peer_queue_share_pct']:.1f} | {gain['peer_step_headroom_pct']:.2f} |"
            )
    return lines


if __name__ == "__main__":
    main()
