"""How many servers a row could host at best: its power with high priority untouched.

For each row of `docs/power.md` (trace mix, training share, seed, days), the request rate is
calibrated as `power_oversubscription.py` does (79 % row anchor), the row of `--servers`
servers is built, and its power is split (`voltpack.sim.power_bound`): high priority
uncapped (POLCA's 1 % p50 constraint leaves it essentially so), low-priority inference and
training at the cap floor all the time (`frugal`: no policy that leaves high priority alone
draws less), and the same with training at full speed (`training kept`). Reported as shares
of the budget: peak-hour means and peak seconds. A row whose `training kept` peak hour is
above the budget must slow training in its busiest hours whatever the policy; one whose
`frugal` peak hour is near the budget cannot host the servers with any policy.

Usage:
  python benchmarks/power_energy_bound.py                   # every docs/power.md row, 60 servers
  python benchmarks/power_energy_bound.py --servers 50 --servers 60 --row mix:0.1:0:1
  python benchmarks/power_energy_bound.py --anchor-resolution-s 60 --servers 47 --servers 50
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from _common import save

from voltpack.sim.power_bound import row_power_parts
from voltpack.sim.power_calibration import calibrate_rate_per_s
from voltpack.sim.power_row import RowScenario, build_workload
from voltpack.sim.traces.azure_llm import CODE_TRACE, CONVERSATION_TRACE, azure_llm_dir
from voltpack.sim.traces.service_mix import load_service_mix

TRACES = {
    "mix": (CONVERSATION_TRACE, CODE_TRACE),
    "conv": (CONVERSATION_TRACE,),
    "code": (CODE_TRACE,),
}
DOC_ROWS = (
    "mix:0.1:0:1", "mix:0.1:0:2", "mix:0.0:0:1", "mix:0.0:1:1", "mix:0.0:0:2", "mix:0.1:1:1",
    "conv:0.1:0:1", "conv:0.0:0:1", "conv:0.1:1:1", "code:0.1:1:1",
)  # fmt: skip


def parse_row(text: str) -> tuple[str, float, int, float]:
    """`traces:training_share:seed:days`, e.g. `mix:0.1:0:1`."""
    parts = text.split(":")
    if len(parts) != 4 or parts[0] not in TRACES:
        raise SystemExit(
            f"--row {text!r}: expected traces:training_share:seed:days with traces one of "
            f"{', '.join(TRACES)}"
        )
    return parts[0], float(parts[1]), int(parts[2]), float(parts[3])


def measure(row: str, servers: list[int], resolution_s: int = 1) -> list[dict[str, Any]]:
    """Calibrate the row's rate (its peak of `resolution_s`-second averages at the anchor),
    then split its power at each count in `servers`."""
    traces, training_share, seed, days = parse_row(row)
    trace = load_service_mix([azure_llm_dir() / name for name in TRACES[traces]])
    scenario = RowScenario(
        servers=40, training_share=training_share, duration_s=int(days * 86_400), seed=seed
    )
    calibration = calibrate_rate_per_s(scenario, trace, resolution_s=resolution_s)
    out = []
    for count in servers:
        counted = replace(scenario, servers=count, mean_rate_per_s=calibration.rate_per_s)
        parts = row_power_parts(build_workload(counted, trace))
        out.append({"row": row, "rate_per_s": calibration.rate_per_s, "servers": count,
                    "anchor_resolution_s": resolution_s, **parts.summary()})  # fmt: skip
    return out


def markdown(results: list[dict[str, Any]]) -> str:
    """One line per row and count: peak-hour means (and peak seconds) as shares of the
    budget."""
    lines = [
        "# Power of a row with high priority untouched",
        "",
        "Shares of the budget (provisioned power of 40 servers); rows "
        "`traces:training share:seed:days`; peak hour: largest mean over a clock hour; in "
        "brackets: the peak second.",
        "",
        "| row | servers | requests/s per server | uncapped | high priority alone "
        "| frugal: all low priority at the floor "
        "| training kept, low-priority inference at the floor "
        "| seconds over budget (training kept) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['row']} | {r['servers']} | {r['rate_per_s']:.4f} "
            f"| {r['uncapped_peak_hour_share']:.3f} ({r['uncapped_peak_second_share']:.3f}) "
            f"| {r['high_priority_peak_hour_share']:.3f} "
            f"({r['high_priority_peak_second_share']:.3f}) "
            f"| {r['frugal_peak_hour_share']:.3f} ({r['frugal_peak_second_share']:.3f}) "
            f"| {r['training_kept_peak_hour_share']:.3f} "
            f"({r['training_kept_peak_second_share']:.3f}) "
            f"| {r['training_kept_seconds_over_budget']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, action="append", help="default: 60")
    parser.add_argument("--row", action="append", help="traces:training_share:seed:days")
    parser.add_argument(
        "--anchor-resolution-s", type=int, default=1,
        help="calibrate the anchor as the peak of averages over this many seconds",
    )  # fmt: skip
    parser.add_argument("--name", default="power_energy_bound")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default: results/)")
    args = parser.parse_args()
    started = time.perf_counter()
    results = []
    for row in args.row or DOC_ROWS:
        results += measure(row, args.servers or [60], args.anchor_resolution_s)
        print(f"  {row}: {results[-1]}", flush=True)
    figures = {"rows": results, "wall_s": time.perf_counter() - started}
    save(args.name, figures, markdown(results), args.out)


if __name__ == "__main__":
    main()
