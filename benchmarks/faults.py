"""Training under failures: lost GPU-time and effective training time, restart-all vs voltpack.

A month on a 1,024-GPU cluster (128 nodes x 8 GPUs) running two large pre-training gangs (512
and 256 GPUs, whole-node workers, elastic down to 75%) beside Philly-sized jobs at 90% of the
GPUs left; faults at Llama 3's interruption rate (419 in 54 days on 16,384 GPUs) with its mix
of causes (`data/failures/`). The same faults and jobs for every policy, per seed:

- `restart-all` (baseline): node-level cordon for any hardware fault; every fault restarts the
  whole gang from its last checkpoint at full size;
- `gpu-isolation`: GPU-level cordon, but still whole-gang restarts (what isolation alone gives);
- `voltpack`: GPU-level cordon, elastic gangs shrink in place and grow back, restarts may come
  back smaller; restart budget and backoff.

Anchors: C4 (Alibaba) cuts error-induced overhead by about 30%; Llama 3 kept effective training
time above 90%. Goals: >= 30% less lost GPU-time than restart-all, large jobs' effective
training time > 90%.

Usage: python benchmarks/faults.py [--seeds 20] [--days 30] [--failure-rate-scale 1]
       [--checkpoint-interval-s 3600] [--detection-delay-s 600] [--out DIR] [--name faults]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path

from _common import save

from voltpack.scheduler.fault_recovery import RESTART_ALL, RecoveryPolicy
from voltpack.sim.fault_jobs import FaultWorkload, fault_jobs
from voltpack.sim.faults import FaultSimConfig, FaultSimResult, simulate_faults
from voltpack.sim.traces.failures import LLAMA3_CATALOG, load_failure_catalog
from voltpack.sim.traces.gavel_generator import load_philly_distribution

REPO = Path(__file__).resolve().parents[1]
PHILLY = REPO / "data" / "gavel" / "philly_job_distribution.csv"
POLICIES = {
    "restart-all": RESTART_ALL,
    "gpu-isolation": RecoveryPolicy(isolation="gpu", shrink=False),
    "voltpack": RecoveryPolicy(),
}
GOAL_LOST_REDUCTION_PCT = 30.0
GOAL_EFFECTIVE_PCT = 90.0


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def summary(name: str, runs: list[FaultSimResult]) -> dict[str, object]:
    recoveries = [t for r in runs for t in r.recovery_times_s]
    faults = sum(r.faults for r in runs)
    return {
        "policy": name,
        "goodput_pct": round(mean([r.goodput_pct for r in runs]), 3),
        "effective_training_time_pct": round(
            mean([x for r in runs for x in r.large_effective_pct]), 2
        ),
        "min_effective_training_time_pct": round(
            min(x for r in runs for x in r.large_effective_pct), 2
        ),
        "lost_gpu_hours": round(mean([r.lost_gpu_h for r in runs]), 1),
        "lost_gpu_hours_per_fault": round(sum(r.lost_gpu_h for r in runs) / max(faults, 1), 1),
        "rollback_gpu_hours": round(mean([r.rollback_gpu_h for r in runs]), 1),
        "mean_time_to_recovery_s": round(mean(recoveries), 0),
        "faults_per_run": round(faults / len(runs), 2),
        "restarts_per_run": round(mean([float(r.restarts) for r in runs]), 2),
        "shrinks_per_run": round(mean([float(r.shrinks) for r in runs]), 2),
        "grows_per_run": round(mean([float(r.grows) for r in runs]), 2),
        "cordoned_gpu_hours": round(mean([r.cordoned_gpu_h for r in runs]), 1),
        "jobs_done": round(mean([float(r.jobs_done) for r in runs]), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--failure-rate-scale", type=float, default=1.0)
    parser.add_argument("--checkpoint-interval-s", type=float, default=3600.0)
    parser.add_argument("--detection-delay-s", type=float, default=600.0)
    parser.add_argument("--catalog", type=Path, default=LLAMA3_CATALOG)
    parser.add_argument("--philly", type=Path, default=PHILLY)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--name", default="faults")
    args = parser.parse_args()

    base = FaultSimConfig(nodes=args.nodes, days=args.days)
    config = replace(
        base,
        failures_per_gpu_day=base.failures_per_gpu_day * args.failure_rate_scale,
        checkpoint_interval_s=args.checkpoint_interval_s,
        detection_delay_s=args.detection_delay_s,
    )
    catalog = load_failure_catalog(args.catalog)
    philly = load_philly_distribution(args.philly)
    workload = FaultWorkload()
    runs: dict[str, list[FaultSimResult]] = {name: [] for name in POLICIES}
    started = time.perf_counter()
    for seed in range(args.seeds):
        jobs = fault_jobs(config, workload, philly, seed)
        for name, policy in POLICIES.items():
            runs[name].append(simulate_faults(config, jobs, policy, name, seed, catalog))
    elapsed_s = time.perf_counter() - started
    policies = [summary(name, results) for name, results in runs.items()]
    by_name = {p["policy"]: p for p in policies}
    base_lost = float(by_name["restart-all"]["lost_gpu_hours"])  # type: ignore[arg-type]
    ours = by_name["voltpack"]
    reduction_pct = 100.0 * (1 - float(ours["lost_gpu_hours"]) / base_lost) if base_lost else 0.0  # type: ignore[arg-type]
    paired = [
        100.0 * (1 - v.lost_gpu_h / b.lost_gpu_h)
        for b, v in zip(runs["restart-all"], runs["voltpack"], strict=True)
        if b.lost_gpu_h > 0
    ]
    figures = {
        "config": {
            "nodes": config.nodes,
            "gpus_per_node": config.gpus_per_node,
            "days": config.days,
            "failures_per_gpu_day": config.failures_per_gpu_day,
            "detection_delay_s": config.detection_delay_s,
            "restart_cost_s": config.restart_cost_s,
            "reconfigure_s": config.reconfigure_s,
            "checkpoint_interval_s": config.checkpoint_interval_s,
            "gpu_repair_s": config.gpu_repair_s,
            "node_repair_s": config.node_repair_s,
            "large_gpus": list(workload.large_gpus),
            "min_worker_share": workload.min_worker_share,
            "small_load": workload.small_load,
            "seeds": args.seeds,
            "catalog": str(args.catalog.name),
        },
        "policies": policies,
        "lost_reduction_vs_restart_all_pct": round(reduction_pct, 1),
        "paired_lost_reduction_pct": {
            "median": round(statistics.median(paired), 1) if paired else None,
            "min": round(min(paired), 1) if paired else None,
            "max": round(max(paired), 1) if paired else None,
        },
        "goals": {
            "lost_reduction_pct": GOAL_LOST_REDUCTION_PCT,
            "effective_training_time_pct": GOAL_EFFECTIVE_PCT,
        },
        "seconds": round(elapsed_s, 1),
    }
    save(args.name, figures, markdown(figures), args.out)


def markdown(figures: dict[str, object]) -> str:
    config: dict[str, object] = figures["config"]  # type: ignore[assignment]
    policies: list[dict[str, object]] = figures["policies"]  # type: ignore[assignment]
    paired: dict[str, object] = figures["paired_lost_reduction_pct"]  # type: ignore[assignment]
    lines = [
        "# Training under failures (fault simulator)",
        "",
        f"{int(config['nodes']) * int(config['gpus_per_node']):,} GPUs, {config['days']} days, "  # type: ignore[call-overload]
        f"{config['seeds']} seeds (the same faults and jobs for every policy); "
        f"{float(config['failures_per_gpu_day']):.3g} faults per GPU-day ({config['catalog']}); "  # type: ignore[arg-type]
        f"detection {config['detection_delay_s']} s, restart {config['restart_cost_s']} s, "
        f"reconfigure {config['reconfigure_s']} s, checkpoint every "
        f"{config['checkpoint_interval_s']} s; repair: GPU {config['gpu_repair_s']} s, node "
        f"{config['node_repair_s']} s (assumed). Large gangs {config['large_gpus']} GPUs, "
        f"elastic down to {config['min_worker_share']}. Means over seeds.",
        "",
        "| policy | goodput % | large jobs' effective training % (min) | lost GPU-h | "
        "lost GPU-h per fault | rollback GPU-h | time to recovery s | restarts | shrinks | grows |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in policies:
        lines.append(
            f"| {p['policy']} | {p['goodput_pct']} | {p['effective_training_time_pct']} "
            f"({p['min_effective_training_time_pct']}) | {p['lost_gpu_hours']} | "
            f"{p['lost_gpu_hours_per_fault']} | {p['rollback_gpu_hours']} | "
            f"{p['mean_time_to_recovery_s']:.0f} | {p['restarts_per_run']} | "
            f"{p['shrinks_per_run']} | {p['grows_per_run']} |"
        )
    reduction = figures["lost_reduction_vs_restart_all_pct"]
    lines += [
        "",
        f"voltpack loses {reduction}% less GPU-time than restart-all (per seed: median "
        f"{paired['median']}%, range {paired['min']}% to {paired['max']}%); goal >= "
        f"{GOAL_LOST_REDUCTION_PCT:.0f}% (C4: about 30%). Large jobs' effective training time "
        f"goal > {GOAL_EFFECTIVE_PCT:.0f}% (Llama 3).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
