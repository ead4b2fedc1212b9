"""A soak with faults on a real control plane: etcd + kube-apiserver + kwok, GPU pods and
GPUJobs arriving and finishing for `--duration-s`, while a fault injector restarts the
apiserver and etcd, SIGKILLs the operator, drops watches and sends them 410, answers a share of
bindings with 500 (through a proxy in front of the apiserver) and flips GPU faults. Invariants
are checked all along (tests/soak/invariants.py): no partial gang past a cycle + grace after a
fault, no pod or GPU bound twice, no power domain over budget past the documented latency,
every GPUJob Running or with a clear reason, the operator's memory bounded.

The parts live in tests/soak/ (the short version is tests/integration/test_soak.py); this
script runs the long one and writes <out>/soak.{json,md}. See docs/soak.md.

Usage:
  python benchmarks/soak.py [--duration-s 600] [--nodes 64] [--pods-per-s 4] [--out DIR]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import RESULTS_DIR, save

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.soak

from tests.soak.faults import KINDS, Timings  # noqa: E402
from tests.soak.run import SoakConfig, run_soak  # noqa: E402


def markdown(result: dict[str, Any]) -> str:
    config, workload, invariants = result["config"], result["workload"], result["invariants"]
    operator = result["operator"]
    lines = [
        "# Soak with faults on a real control plane",
        "",
        f"etcd + kube-apiserver + kwok; {result['cluster']['nodes']} nodes, "
        f"{result['cluster']['gpus']} GPUs ({result['cluster']['racks']} racks, each a "
        f"PowerBudget of {config['budget_ratio']:.0%} of its GPUs' TDP); the operator "
        "(`python -m voltpack operator`, a process, through the fault proxy) for "
        f"{config['duration_s']:.0f} s (run took {result['duration_s']:.0f} s with the last "
        f"recovery); arrivals {config['pods_per_s']} pods/s asked.",
        "",
        f"**Invariant violations: {invariants['violations']}** "
        f"({invariants['by_invariant'] or 'none'})",
        "",
        "| figure | value |",
        "|---|---|",
        f"| pods bound | {workload['pods_bound']} |",
        f"| pods/s sustained (mean) | {workload['pods_per_s']} |",
        f"| pods/s, worst minute | {workload['pods_per_s_worst_minute']} |",
        f"| gangs created / finished / cancelled | {workload['gangs_created']} / "
        f"{workload['gangs_finished']} / {workload['gangs_cancelled']} |",
        f"| GPUJobs created | {workload['gpujobs_created']} |",
        f"| arrivals deferred (backlog full) | {workload['arrivals_deferred_for_backlog']} |",
        f"| operator peak RSS | {operator['peak_rss_mib']} MiB |",
        f"| operator RSS growth | {operator['rss_growth']} |",
        f"| operator incarnations | {operator['incarnations']} |",
        f"| load average (1 min), mean / max | {result['load_average_1m']['mean']} / "
        f"{result['load_average_1m']['max']} |",
        f"| longest partial gang | {invariants['longest_partial_gang_s']} s |",
        f"| longest power excursion over budget | {invariants['longest_power_excursion_s']} s |",
        f"| power samples over budget | {invariants['power_samples_over_budget']} |",
        "",
        "## Faults",
        "",
        "| kind | count | recovery (s) | not recovered |",
        "|---|---|---|---|",
    ]
    for kind, entry in result["faults_by_kind"].items():
        recoveries = ", ".join(f"{v:.1f}" for v in entry["recovery_s"]) or "-"
        lines.append(f"| {kind} | {entry['count']} | {recoveries} | {entry['not_recovered']} |")
    lines += ["", "| # | kind | at (s) | ended (s) | recovered (s) | detail |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for index, fault in enumerate(result["faults"], 1):
        lines.append(
            f"| {index} | {fault['kind']} | {fault['started_s']} | {fault['ended_s']} | "
            f"{fault['recovery_s']} | {fault['detail']} |"
        )
    proxy = result["proxy"]
    lines += [
        "",
        f"Proxy: {proxy['requests']} requests, {proxy['bindings']} bindings "
        f"({proxy['bindings_failed_before']} answered 500 unforwarded, "
        f"{proxy['bindings_failed_after']} answered 500 after binding), "
        f"{proxy['watches_opened']} watches opened, {proxy['watches_dropped']} dropped, "
        f"{proxy['watches_expired']} sent 410.",
        "",
        "## Violations",
        "",
    ]
    if not invariants["details"]:
        lines.append("None.")
    for violation in invariants["details"][:50]:
        lines.append(
            f"- `{violation['invariant']}` at {violation['at_s']} s, {violation['subject']}: "
            f"{violation['detail']}"
        )
    if len(invariants["details"]) > 50:
        lines.append(f"- ... {len(invariants['details']) - 50} more in soak.json")
    if operator["tracebacks"]:
        lines += ["", "## Operator tracebacks", ""]
        lines += [f"```\n{text}\n```" for text in operator["tracebacks"]]
    lines += ["", f"Limits: {invariants['limits']}", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration-s", type=float, default=600.0)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--nodes-per-rack", type=int, default=8)
    parser.add_argument("--pods-per-s", type=float, default=4.0)
    parser.add_argument("--budget-ratio", type=float, default=0.75)
    parser.add_argument("--gap-s", type=float, default=20.0, help="quiet time between faults")
    parser.add_argument("--window-s", type=float, default=15.0,
                        help="how long a binding-5xx window or a GPU fault lasts")  # fmt: skip
    parser.add_argument("--kinds", default=",".join(KINDS), help="fault kinds, in order")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--workdir", type=Path, default=None, help="keep logs here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    config = SoakConfig(
        duration_s=args.duration_s, nodes=args.nodes, nodes_per_rack=args.nodes_per_rack,
        pods_per_s=args.pods_per_s, budget_ratio=args.budget_ratio, seed=args.seed,
        kinds=tuple(k for k in args.kinds.split(",") if k),
        timings=Timings(window_s=args.window_s, gap_s=args.gap_s),
    )  # fmt: skip
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="voltpack-soak-"))
    result = run_soak(config, workdir)
    result["workdir"] = str(workdir)
    save("soak", result, markdown(result), args.out)
    return 1 if result["invariants"]["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
