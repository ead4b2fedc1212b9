"""Fair share and reclaim between two guaranteed queues, simulated through the core's session.

Gavel-trace jobs go alternately (by line) to two queues, `research` and `production`, each
guaranteed half the cluster. Research's jobs arrive as the trace says; production's arrive
together, in one burst at the trace's median arrival time (while research may borrow the idle
half). A job is a gang of `scale_factor` one-GPU pods that runs `total_steps` at Gavel's
measured V100 rate for that scale factor. The queue simulator (`voltpack/sim/queues.py`) runs
the same scheduling session as the operator every round, twice: with reclaim and priority
preemption on (the policy's defaults), and with both off (the baseline). Nothing is fitted to
the trace.

Usage:
  python benchmarks/queue_fair_share.py
  python benchmarks/queue_fair_share.py --trace data/gavel/msr-seed0/0e4a51.trace --nodes 8
  python benchmarks/queue_fair_share.py --round-s 30 --out /tmp/results
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any

from _common import RESULTS_DIR, save

from voltpack.model import Node
from voltpack.model.resources.queue import QueueSpec
from voltpack.perf.throughput_table import ThroughputTable, load_gavel_throughputs
from voltpack.policies.schema import PolicyFile, parse_policy
from voltpack.sim.datasets import data_dir
from voltpack.sim.queues import QueueJob, QueueSimResult, QueueSimulator
from voltpack.sim.traces.gavel import GavelJob, load_gavel_trace

DEFAULT_TRACE = Path("gavel") / "generated" / "gavel_gen_120jobs_lam1200_seed0.trace"
QUEUES = ("research", "production")
GPU_MODEL = "V100"
RATE_MODEL = "v100"
"""The throughput table's name for the GPU model the durations are measured on."""
MODES = {"reclaim on": True, "reclaim off (baseline)": False}


def policy(reclaim: bool, min_runtime_s: float) -> PolicyFile:
    """Best-fit with fair-share queues; reclaim and priority preemption both on or both off."""
    flag = str(reclaim).lower()
    return parse_policy(
        "apiVersion: voltpack.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: queues}\n"
        "spec:\n  scoring: {strategy: best-fit}\n"
        f"  queueing: {{ordering: fair-share, min_runtime_s: {min_runtime_s:g}, "
        f"reclaim: {flag}, priority_preemption: {flag}}}\n"
    )


def queue_jobs(trace: list[GavelJob], table: ThroughputTable) -> list[QueueJob]:
    """Odd lines to research (arrivals as traced), even lines to production (one burst)."""
    burst_s = statistics.median(job.arrival_s for job in trace)
    jobs = []
    for line, job in enumerate(trace, start=1):
        queue = QUEUES[0] if line % 2 else QUEUES[1]
        duration_s = job.total_steps / table.rate(job.job_type, RATE_MODEL, job.scale_factor)
        arrival_s = job.arrival_s if queue == QUEUES[0] else burst_s
        jobs.append(
            QueueJob.gang(
                f"{queue}-{line:05d}", queue, job.scale_factor, 1, duration_s, (GPU_MODEL,),
                arrival_s=arrival_s,
            )
        )  # fmt: skip
    return jobs


def figures(result: QueueSimResult, wall_s: float) -> dict[str, Any]:
    """What one run measured: per queue, and the logs."""
    return {
        "wall_s": round(wall_s, 2),
        "rounds": result.rounds,
        "makespan_s": round(result.makespan_s, 1),
        "unfinished": result.unfinished,
        "queues": {q: dataclasses.asdict(f) for q, f in result.queues.items()},
        "evictions": [dataclasses.asdict(e) for e in result.evictions],
        "placements": [dataclasses.asdict(p) for p in result.placements],
    }


def hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def markdown(name: str, runs: dict[str, dict[str, Any]], setup: dict[str, Any]) -> str:
    lines = [
        "# Queue fair share and reclaim (queue simulator, the core's scheduling session)",
        "",
        f"Trace `{name}`: {setup['jobs']} jobs, {setup['gpus']} {GPU_MODEL} GPUs "
        f"({setup['nodes']} nodes x {setup['gpus_per_node']}); `research` and `production` "
        f"guaranteed {setup['guaranteed_gpus']:g} GPUs each; research's jobs arrive as traced, "
        f"production's in one burst at {setup['burst_s']:,.0f} s. Rounds every "
        f"{setup['round_s']:g} s, min_runtime_s {setup['min_runtime_s']:g}, best-fit.",
        "",
        "| run | queue | GPU-h | mean share | guarantee | below guarantee while waiting (h) "
        "| reclaimed from | preempted | lost GPU-h | JCT p50 (h) | JCT p95 (h) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, run in runs.items():
        for queue, f in run["queues"].items():
            lines.append(
                f"| {mode} | {queue} | {f['gpu_hours']:.1f} | {f['mean_share']:.3f} | "
                f"{f['guaranteed_share']:.2f} | {hours(f['below_guarantee_waiting_s'])} | "
                f"{f['reclaimed_from']} | {f['preempted']} | {f['lost_gpu_hours']:.1f} | "
                f"{hours(f['jct_p50_s'])} | {hours(f['jct_p95_s'])} |"
            )
    lines += ["", "| run | makespan (h) | rounds | evictions | unfinished | wall (s) |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for mode, run in runs.items():
        lines.append(
            f"| {mode} | {hours(run['makespan_s'])} | {run['rounds']} | {len(run['evictions'])} "
            f"| {len(run['unfinished'])} | {run['wall_s']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None, help="a Gavel-format trace")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--round-s", type=float, default=10.0)
    parser.add_argument("--min-runtime-s", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    if args.nodes < 1 or args.gpus_per_node < 1:
        raise SystemExit("--nodes and --gpus-per-node must be at least 1")
    trace_path = args.trace or data_dir() / DEFAULT_TRACE
    table = load_gavel_throughputs(data_dir() / "gavel" / "simulation_throughputs.json")
    trace = load_gavel_trace(trace_path)
    too_big = [j for j in trace if j.scale_factor > args.nodes * args.gpus_per_node]
    if too_big:
        raise SystemExit(
            f"{len(too_big)} jobs need more GPUs than the cluster has "
            f"({too_big[0].scale_factor}); raise --nodes"
        )
    jobs = queue_jobs(trace, table)
    gpus = args.nodes * args.gpus_per_node
    guarantee = gpus / 2
    specs = {
        q: QueueSpec.model_validate({"quotas": [{"gpuModel": GPU_MODEL, "guaranteed": guarantee}]})
        for q in QUEUES
    }
    nodes = [
        Node.empty(f"gpu-{i:03d}", cpu_milli=64000, memory_mib=512000,
                   gpu_count=args.gpus_per_node, gpu_model=GPU_MODEL)
        for i in range(args.nodes)
    ]  # fmt: skip
    runs = {}
    for mode, reclaim in MODES.items():
        sim = QueueSimulator(
            nodes, specs, policy(reclaim, args.min_runtime_s), args.seed, args.round_s
        )
        started = time.perf_counter()
        result = sim.run(jobs)
        runs[mode] = figures(result, time.perf_counter() - started)
    setup = {
        "trace": str(trace_path),
        "jobs": len(jobs),
        "nodes": args.nodes,
        "gpus_per_node": args.gpus_per_node,
        "gpus": gpus,
        "guaranteed_gpus": guarantee,
        "burst_s": statistics.median(job.arrival_s for job in trace),
        "round_s": args.round_s,
        "min_runtime_s": args.min_runtime_s,
        "seed": args.seed,
    }
    text = markdown(trace_path.name, runs, setup)
    save("queue_fair_share", {"setup": setup, "runs": runs}, text, args.out)


if __name__ == "__main__":
    main()
