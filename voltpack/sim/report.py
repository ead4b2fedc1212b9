"""Reports of an experiment: JSON with every series, a Markdown summary and a PNG plot."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from voltpack import __version__
from voltpack.sim.experiment import RunResult


@dataclass(frozen=True)
class PolicySummary:
    """Mean and spread over seeds of one policy's figures at the final arrived demand."""

    policy: str
    strategy: str
    runs: int
    allocation_ratio_pct_mean: float
    allocation_ratio_pct_stdev: float
    frag_amount_pct_mean: float
    frag_ratio_pct_mean: float
    failed_pods_mean: float
    wall_time_s_mean: float


def summarise(results: Sequence[RunResult]) -> list[PolicySummary]:
    """One summary per policy, in the order the policies first appear."""
    by_policy: dict[str, list[RunResult]] = {}
    for result in results:
        by_policy.setdefault(result.policy_name, []).append(result)
    summaries = []
    for name, runs in by_policy.items():
        ratios = [r.final_allocation_ratio_pct for r in runs]
        summaries.append(
            PolicySummary(
                policy=name,
                strategy=runs[0].strategy,
                runs=len(runs),
                allocation_ratio_pct_mean=statistics.fmean(ratios),
                allocation_ratio_pct_stdev=statistics.stdev(ratios) if len(ratios) > 1 else 0.0,
                frag_amount_pct_mean=statistics.fmean(r.final_frag_amount_pct for r in runs),
                frag_ratio_pct_mean=statistics.fmean(r.final_frag_ratio_pct for r in runs),
                failed_pods_mean=statistics.fmean(r.failed_pods for r in runs),
                wall_time_s_mean=statistics.fmean(r.wall_time_s for r in runs),
            )
        )
    return summaries


def markdown_table(summaries: Sequence[PolicySummary], final_pct: int) -> str:
    """The summary as a Markdown table."""
    lines = [
        f"| policy | strategy | runs | allocation ratio at {final_pct}% (mean ± sd) "
        "| frag amount (% of GPUs) | frag ratio (% of idle) | failed pods | s/run |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        lines.append(
            f"| {s.policy} | {s.strategy} | {s.runs} | {s.allocation_ratio_pct_mean:.2f}% ± "
            f"{s.allocation_ratio_pct_stdev:.2f} | {s.frag_amount_pct_mean:.2f} | "
            f"{s.frag_ratio_pct_mean:.2f} | {s.failed_pods_mean:.0f} | {s.wall_time_s_mean:.1f} |"
        )
    return "\n".join(lines) + "\n"


def write_reports(
    out_dir: Path,
    results: Sequence[RunResult],
    config: dict[str, Any],
    policy_texts: dict[str, str],
) -> list[PolicySummary]:
    """Write `results.json`, `summary.md` and `allocation.png` into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = summarise(results)
    final_pct = max((r.demand_pct[-1] for r in results if r.demand_pct), default=0)
    document = {
        "voltpack_version": __version__,
        "config": config,
        "policies": policy_texts,
        "summary": [s.__dict__ for s in summaries],
        "runs": [r.to_json() for r in results],
    }
    (out_dir / "results.json").write_text(json.dumps(document, indent=1), encoding="utf-8")
    header = (
        f"# voltpack simulation\n\nvoltpack {__version__}; trace `{config.get('pods')}` on "
        f"`{config.get('nodes')}`; seeds {config.get('seeds')}; "
        f"inflation to {config.get('target_demand_ratio')} of GPU capacity.\n\n"
    )
    (out_dir / "summary.md").write_text(
        header + markdown_table(summaries, final_pct), encoding="utf-8"
    )
    plot_allocation(results, out_dir / "allocation.png")
    return summaries


def plot_allocation(results: Sequence[RunResult], path: Path) -> None:
    """Allocation ratio against arrived GPU demand, mean over seeds, one line per policy."""
    by_policy: dict[str, list[RunResult]] = {}
    for result in results:
        by_policy.setdefault(result.policy_name, []).append(result)
    figure = Figure(figsize=(7, 4.5), dpi=120)
    axes = figure.subplots()
    for name, runs in by_policy.items():
        by_pct: dict[int, list[float]] = {}
        for run in runs:
            for pct, value in zip(run.demand_pct, run.allocation_ratio_pct, strict=True):
                by_pct.setdefault(pct, []).append(value)
        x = sorted(by_pct)
        y = [statistics.fmean(by_pct[pct]) for pct in x]
        axes.plot(x, y, label=name, linewidth=1.4)
    axes.plot([0, 100], [0, 100], color="grey", linestyle=":", linewidth=0.8, label="ideal")
    axes.set_xlabel("arrived GPU demand (% of cluster GPUs)")
    axes.set_ylabel("GPU allocation ratio (%)")
    axes.set_title("GPU allocation ratio vs arrived demand")
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
