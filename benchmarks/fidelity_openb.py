"""Fidelity: voltpack's strategies against the FGD paper's own results on openb.

Runs the FGD experiment protocol (130% demand, seeds 42-51 by default) for each strategy the
paper also ran, on each pod list given, and compares the mean allocation ratio at 130% arrived
demand with the paper's mean (`data/openb/fgd-expected-results/`). Goal (issue 2): best-fit and
random within 0.5 percentage points of the paper on `openb_pod_list_default`.

Usage: python benchmarks/fidelity_openb.py [--traces default,gpushare40,...|all] [--seeds 42-51]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from _common import save

from voltpack.policies.schema import PolicyFile, load_policy, policy_for_strategy
from voltpack.sim.datasets import FGD_PAPER_POLICY, OPENB_NODES, fgd_paper_allocation_pct, openb_dir
from voltpack.sim.runner import ExperimentPlan, run_plan

GOAL_PP = 0.5
EXAMPLES = Path(__file__).resolve().parents[1] / "voltpack" / "policies" / "examples"
ALL_TRACES = (
    "default",
    "cpu050",
    "cpu250",
    "gpushare40",
    "gpushare80",
    "gpuspec10",
    "gpuspec33",
    "multigpu20",
    "multigpu50",
)


def paper_policy(strategy: str) -> PolicyFile:
    """The strategy as the paper ran it: FGD with shapes fixed to the trace."""
    if strategy == "fgd":
        return load_policy(EXAMPLES / "fgd-paper.yaml")
    return policy_for_strategy(strategy)


def parse_seeds(text: str) -> tuple[int, ...]:
    low, _, high = text.partition("-")
    return tuple(range(int(low), int(high or low) + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="default")
    parser.add_argument("--seeds", default="42-51")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--data", type=Path, default=openb_dir())
    parser.add_argument("--name", default="fidelity_openb")
    parser.add_argument(
        "--strategies", default="random,dot-product,gpu-clustering,gpu-packing,best-fit"
    )
    args = parser.parse_args()
    traces = ALL_TRACES if args.traces == "all" else tuple(args.traces.split(","))
    strategies = args.strategies.split(",")
    unknown = [s for s in strategies if s not in FGD_PAPER_POLICY]
    if unknown:
        parser.error(f"no paper figures for {unknown}; choose from {list(FGD_PAPER_POLICY)}")
    seeds = parse_seeds(args.seeds)

    rows = []
    for trace in traces:
        workload = f"openb_pod_list_{trace}"
        plan = ExperimentPlan(
            nodes_path=args.data / OPENB_NODES,
            pods_path=args.data / f"{workload}.csv",
            policies=tuple(paper_policy(s) for s in strategies),
            seeds=seeds,
        )
        results = run_plan(plan, jobs=args.jobs)
        for strategy in strategies:
            ratios = [r.final_allocation_ratio_pct for r in results if r.strategy == strategy]
            frags = [r.final_frag_amount_pct for r in results if r.strategy == strategy]
            paper = fgd_paper_allocation_pct(
                workload, strategy, 130, args.data / "fgd-expected-results"
            )
            mean = statistics.fmean(ratios)
            rows.append(
                {
                    "trace": workload,
                    "strategy": strategy,
                    "seeds": list(seeds),
                    "allocation_ratio_pct": ratios,
                    "mean_pct": round(mean, 3),
                    "stdev_pct": round(statistics.stdev(ratios), 3) if len(ratios) > 1 else 0.0,
                    "frag_amount_pct_mean": round(statistics.fmean(frags), 3),
                    "paper_mean_pct": None if paper is None else round(paper, 3),
                    "difference_pp": None if paper is None else round(mean - paper, 3),
                }
            )
            print(f"{workload:28s} {strategy:15s} {mean:6.2f}  paper {paper}", flush=True)

    lines = [
        "# Fidelity to the FGD paper: allocation ratio at 130% arrived demand "
        f"(seeds {args.seeds})",
        "",
        f"Goal on openb_pod_list_default: best-fit and random within {GOAL_PP} pp of the paper.",
        "",
        "| trace | strategy | voltpack mean ± sd | FGD paper mean | difference (pp) |",
        "|---|---|---:|---:|---:|",
    ]
    for row in rows:
        paper = "-" if row["paper_mean_pct"] is None else f"{row['paper_mean_pct']:.2f}%"
        diff = "-" if row["difference_pp"] is None else f"{row['difference_pp']:+.2f}"
        lines.append(
            f"| {row['trace']} | {row['strategy']} | {row['mean_pct']:.2f}% ± "
            f"{row['stdev_pct']:.2f} | {paper} | {diff} |"
        )
    diffs = [abs(r["difference_pp"]) for r in rows if r["difference_pp"] is not None]
    if diffs:
        lines += [
            "",
            f"Mean absolute difference: {statistics.fmean(diffs):.2f} pp over {len(diffs)} "
            f"cells; largest {max(diffs):.2f} pp.",
        ]
    save(args.name, {"goal_pp": GOAL_PP, "rows": rows}, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
