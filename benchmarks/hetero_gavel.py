"""Heterogeneity-aware training scheduling on Gavel-format traces, beside Gavel's own figures.

Every policy runs twice on the same trace and cluster: with the Gavel-compatible mechanism (the
allocation recomputed at most every 1,920 s, a job that arrived since then holding GPUs idle, as
Gavel's simulator does; this is the fidelity check against the published numbers) and with
voltpack's mechanism (the allocation recomputed at every arrival and completion). Then one
policy solve is timed for 1,000 active jobs on the cluster's GPU models.

Usage:
  python benchmarks/hetero_gavel.py                                  # the anchor trace, 8:8:8
  python benchmarks/hetero_gavel.py --trace data/gavel/msr-seed0/103959.trace --cluster 16:16:16
  python benchmarks/hetero_gavel.py --trace my.trace --cluster 36:36:36 --out /tmp/results
  python benchmarks/hetero_gavel.py --generate 400:600:1 --durations philly --cluster 36:36:36
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import RESULTS_DIR, machine

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.throughput_table import ThroughputTable, load_gavel_throughputs
from voltpack.policies.hetero.allocation import AllocationInput
from voltpack.policies.hetero.registry import allocation_policy_names, make_allocation_policy
from voltpack.sim.datasets import data_dir
from voltpack.sim.hetero import RoundConfig, RoundSimulator, parse_gavel_cluster, summarize
from voltpack.sim.traces.gavel import GavelJob, load_gavel_trace
from voltpack.sim.traces.gavel_generator import (
    GeneratorConfig,
    generate_trace,
    load_philly_distribution,
)

ANCHOR_TRACE = "gavel_gen_120jobs_lam1200_seed0.trace"
ANCHOR_CLUSTER = (8, 8, 8)
GAVEL_ANCHORS: dict[str, tuple[float, float, float]] = {
    "fifo": (19_035, 142_962, 237_564),
    "fifo_perf": (10_947, 21_574, 151_747),
    "max_min_fairness": (13_535, 28_792, 159_619),
    "max_min_fairness_perf": (10_471, 28_200, 150_847),
    "finish_time_fairness": (13_489, 28_622, 159_848),
    "finish_time_fairness_perf": (10_586, 26_437, 150_997),
    "min_total_duration": (13_500, 27_705, 159_488),
    "min_total_duration_perf": (10_960, 25_227, 150_847),
    "max_sum_throughput_perf": (10_397, 25_851, 152_496),
}
"""Gavel's simulator on the anchor trace (avg JCT, p99 JCT, makespan; data/gavel/generated)."""
BASELINE = "max_min_fairness_perf"
MECHANISMS = {"gavel": True, "voltpack": False}


def generated(spec: str, durations: str, table: ThroughputTable) -> tuple[str, list[GavelJob]]:
    """A trace from Gavel's generator: 'JOBS:MEAN_INTERARRIVAL_S:SEED', multi-GPU jobs on."""
    parts = spec.split(":")
    if len(parts) != 3:
        raise SystemExit(f"--generate {spec!r}: expected JOBS:MEAN_INTERARRIVAL_S:SEED")
    jobs, lam, seed = int(parts[0]), float(parts[1]), int(parts[2])
    config = GeneratorConfig(
        num_jobs=jobs,
        mean_interarrival_s=lam,
        seed=seed,
        multi_gpu=True,
        durations="philly" if durations == "philly" else "gavel",
    )
    philly = (
        load_philly_distribution(data_dir() / "gavel" / "philly_job_distribution.csv")
        if durations == "philly"
        else None
    )
    name = f"generated_{jobs}jobs_lam{lam:g}_seed{seed}_{durations}"
    return name, generate_trace(config, table, philly)


def solve_speed(
    table: ThroughputTable, cluster: dict[str, int], policies: list[str], jobs: int, repeats: int
) -> dict[str, dict[str, float]]:
    """Median and max seconds of one allocation solve for `jobs` random active jobs."""
    rng = random.Random(0)
    models = tuple(cluster)
    types = table.job_types
    rows, sfs = [], []
    for _ in range(jobs):
        job_type = rng.choice(types)
        sf = rng.choice((1, 1, 1, 2, 4))
        rows.append([table.rate(job_type, m, sf) for m in models])
        sfs.append(sf)
    problem = AllocationInput(
        gpu_models=models,
        capacity_gpus=np.array([cluster[m] for m in models], dtype=np.int64),
        throughputs_steps_per_s=np.array(rows),
        scale_factors=np.array(sfs, dtype=np.int64),
        priority_weights=np.ones(jobs),
        steps_remaining=np.array([rng.uniform(1e3, 1e6) for _ in range(jobs)]),
        time_since_arrival_s=np.array([rng.uniform(0, 1e5) for _ in range(jobs)]),
        job_ids=tuple(range(jobs)),
    )
    figures: dict[str, dict[str, float]] = {}
    for name in policies:
        times = []
        for _ in range(repeats):
            policy = make_allocation_policy(name)
            started = time.perf_counter()
            policy.allocate(problem)
            times.append(time.perf_counter() - started)
        figures[name] = {"median_s": float(np.median(times)), "max_s": float(max(times))}
    return figures


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def markdown(figures: dict[str, Any]) -> str:
    """The result tables."""
    lines = [
        f"# Heterogeneity-aware scheduling on `{figures['trace']}`, cluster "
        f"{figures['cluster']} (v100:p100:k80)",
        "",
        f"Round {figures['round_s']:.0f} s; {figures['jobs']} jobs; throughputs "
        "`simulation_throughputs.json` (Gavel). Gavel's columns: its own simulator on this trace "
        "and cluster (data/gavel/generated/README.md); shown only for that trace and cluster.",
        "",
        "| policy | mechanism | avg JCT (s) | Gavel avg | vs Gavel | p99 JCT (s) | Gavel p99 "
        "| makespan (s) | util | preemptions | FTF rho median / p90 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in figures["runs"]:
        anchor = row.get("gavel")
        avg = row["avg_jct_s"]
        versus = f"{(avg / anchor[0] - 1) * 100:+.1f}%" if anchor else "—"
        lines.append(
            f"| {row['policy']} | {row['mechanism']} | {avg:,.0f} | "
            f"{_fmt(anchor[0] if anchor else None)} | {versus} | {row['p99_jct_s']:,.0f} | "
            f"{_fmt(anchor[1] if anchor else None)} | {row['makespan_s']:,.0f} | "
            f"{row['utilization']:.3f} | {row['preemptions']:.0f} | "
            f"{row['ftf_rho_median']:.2f} / {row['ftf_rho_p90']:.2f} |"
        )
    best = figures.get("best")
    if best:
        lines += [
            "",
            f"Best voltpack run: **{best['policy']}** ({best['mechanism']} mechanism), avg JCT "
            f"{best['avg_jct_s']:,.0f} s, p99 {best['p99_jct_s']:,.0f} s; against "
            f"{BASELINE} as published by Gavel ({_fmt(best['baseline_avg'])} s, p99 "
            f"{_fmt(best['baseline_p99'])} s): {best['change_pct']:+.1f}% avg JCT.",
        ]
    lines += [
        "",
        f"One allocation solve, {figures['solve_jobs']} active jobs on "
        f"{len(figures['cluster'].split(':'))} GPU models (median of {figures['solve_repeats']}):",
        "",
        "| policy | median (s) | max (s) |",
        "|---|---:|---:|",
    ]
    for name, speed in figures["solve_speed"].items():
        lines.append(f"| {name} | {speed['median_s']:.3f} | {speed['max_s']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None, help="a Gavel-format trace")
    parser.add_argument("--generate", default=None, help="JOBS:MEAN_INTERARRIVAL_S:SEED instead")
    parser.add_argument("--durations", choices=("gavel", "philly"), default="gavel")
    parser.add_argument("--cluster", default="8:8:8", help="GPUs as V100:P100:K80")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="results folder")
    parser.add_argument("--name", default=None, help="results file stem")
    parser.add_argument("--policies", default=",".join(allocation_policy_names()))
    parser.add_argument("--round-s", type=float, default=360.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--solve-jobs", type=int, default=1000)
    parser.add_argument("--solve-repeats", type=int, default=5)
    args = parser.parse_args()

    gavel = data_dir() / "gavel"
    try:
        cluster = parse_gavel_cluster(args.cluster)
    except InvalidRequestError as exc:
        raise SystemExit(f"--cluster: {exc}") from None
    table = load_gavel_throughputs(gavel / "simulation_throughputs.json")
    if args.generate:
        trace_name, trace = generated(args.generate, args.durations, table)
    else:
        trace_path = args.trace or gavel / "generated" / ANCHOR_TRACE
        trace_name, trace = trace_path.name, load_gavel_trace(trace_path)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    anchored = trace_name == ANCHOR_TRACE and tuple(cluster.values()) == ANCHOR_CLUSTER
    runs: list[dict[str, Any]] = []
    for name in policies:
        for mechanism, compatible in MECHANISMS.items():
            config = RoundConfig(round_s=args.round_s, seed=args.seed, gavel_compatible=compatible)
            started = time.perf_counter()
            result = RoundSimulator(make_allocation_policy(name, args.seed), table, cluster, config)
            summary = summarize(result.run(trace))
            row: dict[str, Any] = {"policy": name, "mechanism": mechanism, **summary}
            row["wall_s"] = time.perf_counter() - started
            if anchored and name in GAVEL_ANCHORS:
                row["gavel"] = GAVEL_ANCHORS[name]
            runs.append(row)
            print(
                f"{name:28s} {mechanism:9s} avg {summary['avg_jct_s']:9.0f} "
                f"p99 {summary['p99_jct_s']:9.0f} ({row['wall_s']:.1f} s)",
                flush=True,
            )
    figures: dict[str, Any] = {
        "trace": trace_name,
        "cluster": args.cluster,
        "round_s": args.round_s,
        "jobs": len(trace),
        "runs": runs,
        "solve_jobs": args.solve_jobs,
        "solve_repeats": args.solve_repeats,
        "solve_speed": solve_speed(table, cluster, policies, args.solve_jobs, args.solve_repeats),
    }
    if anchored:
        baseline_avg, baseline_p99, _ = GAVEL_ANCHORS[BASELINE]
        best = min(runs, key=lambda r: r["avg_jct_s"])
        figures["best"] = {
            **{k: best[k] for k in ("policy", "mechanism", "avg_jct_s", "p99_jct_s")},
            "baseline_avg": baseline_avg,
            "baseline_p99": baseline_p99,
            "change_pct": (best["avg_jct_s"] / baseline_avg - 1) * 100,
        }
    stem = args.name or ("hetero_gavel" if anchored else f"hetero_gavel_{Path(trace_name).stem}")
    args.out.mkdir(parents=True, exist_ok=True)
    document = {"benchmark": "hetero_gavel", "machine": machine(), **figures}
    (args.out / f"{stem}.json").write_text(json.dumps(document, indent=1) + "\n")
    text = markdown(figures)
    (args.out / f"{stem}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
