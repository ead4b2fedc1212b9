"""GPU packing quality on openb-format traces, beside the FGD paper's figures.

For each trace and policy, the FGD experiment protocol (demand inflated to 130% of GPU capacity,
no departures) over the seeds: allocation ratio at 130% arrived demand (mean, sd), unallocated
GPUs, fragmentation ratio at 80% arrived demand, failed pods and wall time per run, next to the
paper's mean for the same trace and policy where it has one.

Usage:
  python benchmarks/packing_openb.py                       # every openb trace in data/
  python benchmarks/packing_openb.py --traces default,gpushare40 --seeds 42-44
  python benchmarks/packing_openb.py --traces path/to/pods.csv --nodes path/to/nodes.csv
  python benchmarks/packing_openb.py --policies best-fit,fgd-paper,my-policy.yaml
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import save

from voltpack.policies.registry import strategy_names
from voltpack.policies.schema import PolicyFile, load_policy, policy_for_strategy
from voltpack.sim.datasets import OPENB_NODES, fgd_paper_allocation_pct, openb_dir
from voltpack.sim.experiment import RunResult
from voltpack.sim.runner import ExperimentPlan, run_plan

EXAMPLES = Path(__file__).resolve().parents[1] / "voltpack" / "policies" / "examples"
OPENB_TRACES = (
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
DEFAULT_POLICIES = "best-fit,fgd-paper,fgd"


def resolve_policy(spec: str) -> PolicyFile:
    """A policy file path, an example policy's name, or a strategy name."""
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return load_policy(path)
    if (EXAMPLES / f"{spec}.yaml").is_file():
        return load_policy(EXAMPLES / f"{spec}.yaml")
    if spec in strategy_names():
        return policy_for_strategy(spec)
    raise SystemExit(f"--policies: {spec!r} is no policy file, example or strategy")


def resolve_trace(spec: str, data: Path) -> Path:
    """An openb trace name (e.g. 'gpushare40') or a path to a pod list CSV."""
    if spec in OPENB_TRACES:
        return data / f"openb_pod_list_{spec}.csv"
    path = Path(spec)
    if not path.is_file():
        raise SystemExit(f"--traces: {spec!r} is no openb trace name and no file")
    return path


def parse_seeds(text: str) -> tuple[int, ...]:
    """'42-51' or '42'."""
    low, _, high = text.partition("-")
    return tuple(range(int(low), int(high or low) + 1))


def value_at(result: RunResult, series: list[float], pct: int) -> float | None:
    """A per-percent series' value at `pct` arrived demand (None when the run never got there)."""
    if pct in result.demand_pct:
        return series[result.demand_pct.index(pct)]
    return None


@dataclass(frozen=True)
class Row:
    """One trace x policy: figures over the seeds."""

    trace: str
    policy: str
    strategy: str
    figures: dict[str, Any]


def summarise(trace: str, policy: PolicyFile, runs: list[RunResult], data: Path) -> Row:
    """Means over seeds and the paper's anchor."""
    ratios = [r.final_allocation_ratio_pct for r in runs]
    frag80 = [v for r in runs if (v := value_at(r, r.frag_ratio_pct, 80)) is not None]
    total_gpus = runs[0].total_gpus
    mean = statistics.fmean(ratios)
    paper = fgd_paper_allocation_pct(
        trace, policy.spec.scoring.strategy, 130, data / "fgd-expected-results"
    )
    paper_applies = (
        policy.spec.scoring.strategy != "fgd"
        or policy.spec.scoring.params.get("shapes") == "primed"
    )
    paper = paper if paper_applies else None
    return Row(
        trace=trace,
        policy=policy.metadata.name,
        strategy=policy.spec.scoring.strategy,
        figures={
            "seeds": [r.seed for r in runs],
            "allocation_ratio_pct": ratios,
            "mean_pct": round(mean, 3),
            "stdev_pct": round(statistics.stdev(ratios), 3) if len(ratios) > 1 else 0.0,
            "unallocated_gpus": round((100 - mean) / 100 * total_gpus, 1),
            "frag_ratio_at_80_pct": round(statistics.fmean(frag80), 2) if frag80 else None,
            "failed_pods_mean": round(statistics.fmean(r.failed_pods for r in runs), 1),
            "wall_s_per_run": round(statistics.fmean(r.wall_time_s for r in runs), 2),
            "paper_mean_pct": None if paper is None else round(paper, 3),
            "difference_pp": None if paper is None else round(mean - paper, 3),
        },
    )


def markdown(rows: list[Row], seeds: str, title: str) -> str:
    """The rows as a Markdown table."""
    lines = [
        f"# {title}",
        "",
        f"FGD experiment protocol, 130% arrived GPU demand, seeds {seeds} "
        f"({len(rows[0].figures['seeds']) if rows else 0} per cell).",
        "",
        "| trace | policy | allocation at 130% (mean ± sd) | unallocated GPUs "
        "| paper | diff (pp) | frag ratio at 80% | failed pods | s/run |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        f = row.figures
        paper = "-" if f["paper_mean_pct"] is None else f"{f['paper_mean_pct']:.2f}%"
        diff = "-" if f["difference_pp"] is None else f"{f['difference_pp']:+.2f}"
        frag = "-" if f["frag_ratio_at_80_pct"] is None else f"{f['frag_ratio_at_80_pct']:.1f}%"
        lines.append(
            f"| {row.trace} | {row.policy} | {f['mean_pct']:.2f}% ± {f['stdev_pct']:.2f} | "
            f"{f['unallocated_gpus']:.0f} | {paper} | {diff} | {frag} | "
            f"{f['failed_pods_mean']:.0f} | {f['wall_s_per_run']:.1f} |"
        )
    diffs = [
        abs(r.figures["difference_pp"]) for r in rows if r.figures["difference_pp"] is not None
    ]
    if diffs:
        lines += [
            "",
            f"Against the paper: mean |difference| {statistics.fmean(diffs):.2f} pp over "
            f"{len(diffs)} cells, largest {max(diffs):.2f} pp.",
        ]
    return "\n".join(lines) + "\n"


def main(
    argv: list[str] | None = None,
    *,
    default_policies: str = DEFAULT_POLICIES,
    default_name: str = "packing_openb",
    title: str = "GPU packing on openb",
) -> None:
    """Run the benchmark; `argv` overrides the command line (for wrappers)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="all", help="'all', trace names or CSV paths")
    parser.add_argument("--nodes", type=Path, default=None, help="node list CSV")
    parser.add_argument("--policies", default=default_policies)
    parser.add_argument("--seeds", default="42-51")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--name", default=default_name, help="results file stem")
    args = parser.parse_args(argv)
    data = openb_dir()
    traces = OPENB_TRACES if args.traces == "all" else tuple(args.traces.split(","))
    policies = tuple(resolve_policy(p) for p in args.policies.split(","))
    seeds = parse_seeds(args.seeds)
    rows: list[Row] = []
    for trace in traces:
        pods_path = resolve_trace(trace, data)
        plan = ExperimentPlan(
            nodes_path=args.nodes or data / OPENB_NODES,
            pods_path=pods_path,
            policies=policies,
            seeds=seeds,
        )
        results = run_plan(plan, jobs=args.jobs)
        for policy in policies:
            runs = [r for r in results if r.policy_name == policy.metadata.name]
            row = summarise(pods_path.stem, policy, runs, data)
            rows.append(row)
            print(f"{row.trace:28s} {row.policy:16s} {row.figures['mean_pct']:6.2f}%", flush=True)
    save(
        args.name,
        {"seeds": list(seeds), "rows": [row.__dict__ for row in rows]},
        markdown(rows, args.seeds, title),
    )


if __name__ == "__main__":
    main()
