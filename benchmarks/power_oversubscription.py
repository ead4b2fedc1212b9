"""Power oversubscription on a row of eight-GPU A100 servers (POLCA's setup), beside POLCA.

The row's budget is the provisioned power of 40 servers (40 x 6.5 kW). The servers run
inference driven by the Azure LLM 2023 traces (by default both services, conversation and
code, sharing the inference servers in proportion to their request rates, every server at the
same mean rate: `voltpack.sim.traces.service_mix`; a diurnal rate, peak/trough 2, peak at
14:00; a share of inference servers serve low-priority requests) plus a share of low-priority
training. The mean request rate per inference server is calibrated on every run (unless
--rate is given) so that the uncapped row of 40 inference servers peaks at 79 % of its
provisioned power over the run, POLCA's row-level inference anchor
(`voltpack.sim.power_calibration.calibrate_rate_per_s`; the JSON records the rates tried).
For each policy, servers are added until a constraint breaks (high-priority p50 within 1% and
p99 within 5% of the same servers uncapped, low-priority throughput loss at most 5%, no
emergency brake, no excursion over budget longer than interval + actuation latency + telemetry
delay; and voltpack's own goals beyond POLCA's: low-priority request p50 within 25% and p99
within 50% of uncapped, and no breaker trip). Published anchor: POLCA (ASPLOS'24) deploys 30%
more servers (+12 on 40).

Every result reports its safety (brakes, seconds over budget, the longest excursion, the
breaker trip curve's heat peak and margin, the row's peak second and peak 60-s average against
the budget) and its energy (per request completed within the run on the inference servers, per
server-iteration on the training servers).

Usage:
  python benchmarks/power_oversubscription.py                 # default scenario, 1 day
  python benchmarks/power_oversubscription.py --rate 0.36     # skip the calibration
  python benchmarks/power_oversubscription.py --days 2 --training-share 0.25
  python benchmarks/power_oversubscription.py --trace path/to/azure_format.csv  # one service
  python benchmarks/power_oversubscription.py --trace a.csv --trace b.csv       # a mix
  python benchmarks/power_oversubscription.py --policies thresholds,headroom,my-policy.yaml
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from _common import save

from voltpack.policies.schema import PowerSpec, load_policy
from voltpack.sim.power_calibration import RateCalibration, calibrate_rate_per_s
from voltpack.sim.power_experiment import Limits, RowOutcome, evaluate, uncapped_outcome
from voltpack.sim.power_row import RowScenario
from voltpack.sim.traces.azure_llm import CODE_TRACE, CONVERSATION_TRACE, azure_llm_dir
from voltpack.sim.traces.service_mix import RowTraffic, load_service_mix

POLCA_EXTRA_SERVERS_PCT = 30.0
MAX_SERVERS_FACTOR = 2.0


def resolve_power_spec(spec: str) -> tuple[str, PowerSpec]:
    """A power-policy name (defaults) or a policy file whose `spec.power` is used."""
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        policy = load_policy(path)
        return policy.metadata.name, policy.spec.power
    return spec, PowerSpec(policy=spec)


def search(
    name: str, spec: PowerSpec, scenario: RowScenario, trace: RowTraffic, limits: Limits,
    bounds: tuple[int, int] | None = None,
) -> tuple[int, list[RowOutcome]]:  # fmt: skip
    """Largest server count meeting every constraint (bisection; assumes monotone).

    `bounds` (low, high): the bracket to bisect (default: the budget's servers and twice
    them); `low` is evaluated first and a failure there ends the search below it."""
    seen: dict[int, RowOutcome] = {}

    def ok(servers: int) -> bool:
        if servers not in seen:
            (outcome,) = evaluate(replace(scenario, servers=servers), trace, {name: spec}, limits)
            seen[servers] = outcome
            print(
                f"  {name} {servers} servers: ok={outcome.ok} p50 {outcome.p50_increase_pct:+.2f}% "
                f"p99 {outcome.p99_increase_pct:+.2f}% training -{outcome.training_loss_pct:.2f}% "
                f"low-pri requests -{outcome.low_inference_loss_pct:.2f}% low-pri p50 "
                f"{outcome.low_p50_increase_pct:+.1f}% p99 {outcome.low_p99_increase_pct:+.1f}% "
                f"brakes {outcome.brakes} longest excursion {outcome.longest_excursion_s}s "
                f"breaker heat {outcome.breaker_heat_peak_share:.3f}",
                flush=True,
            )
        return seen[servers].ok

    low, high = bounds or (
        scenario.budget_servers,
        int(scenario.budget_servers * MAX_SERVERS_FACTOR),
    )
    if not ok(low):
        while low > scenario.budget_servers:
            low -= 1
            if ok(low):
                return low, sorted(seen.values(), key=lambda o: o.servers)
        return low - 1, sorted(seen.values(), key=lambda o: o.servers)
    while high - low > 1:
        middle = (low + high) // 2
        if ok(middle):
            low = middle
        else:
            high = middle
    return low, sorted(seen.values(), key=lambda o: o.servers)


SearchJob = tuple[str, PowerSpec, RowScenario, list[Path], Limits, tuple[int, int] | None]


def _search_job(args: SearchJob) -> dict[str, Any]:
    name, spec, scenario, trace_paths, limits, bounds = args
    started = time.perf_counter()
    servers, outcomes = search(name, spec, scenario, load_service_mix(trace_paths), limits, bounds)
    failing = next((o for o in outcomes if o.servers > servers and not o.ok), None)
    return {
        "policy": name,
        "servers": servers,
        "outcomes": [o.as_dict() for o in outcomes],
        "best": next((o.as_dict() for o in outcomes if o.servers == servers), None),
        "margins": next((o.margins(limits) for o in outcomes if o.servers == servers), None),
        "first_failure": None
        if failing is None
        else {"servers": failing.servers, "broken": broken(failing, limits)},
        "wall_s": time.perf_counter() - started,
    }


def broken(outcome: RowOutcome, limits: Limits) -> list[str]:
    """The constraints `outcome` breaks (negative margins, or a tripped breaker)."""
    names = [name for name, margin in outcome.margins(limits).items() if margin < 0]
    return [*names, "breaker"] if outcome.breaker_tripped else names


def _run_searches(jobs: list[SearchJob], processes: int) -> Iterator[dict[str, Any]]:
    """One search per policy: in this process one after the other, or in a process pool."""
    if processes <= 1:
        yield from map(_search_job, jobs)
        return
    with ProcessPoolExecutor(max_workers=processes) as pool:
        yield from pool.map(_search_job, jobs)


def markdown(
    scenario: RowScenario,
    baseline: RowOutcome,
    results: list[dict[str, Any]],
    trace: str,
    calibration: RateCalibration | None,
    limits: Limits,
) -> str:
    """Deployable servers, then the constraints, safety and energy at the deployable count."""
    base_n = scenario.budget_servers
    lines = [
        "# Power oversubscription on a row of DGX-A100 servers",
        "",
        f"Budget: provisioned power of {base_n} servers; traces {trace}; "
        f"{scenario.duration_s / 86_400:g} simulated day(s); training share "
        f"{scenario.training_share:.0%}; low-priority inference share "
        f"{scenario.low_priority_inference_share:.0%}; {scenario.mean_rate_per_s:.4f} requests/s "
        f"per inference server on average; seed {scenario.seed}.",
        "",
        _calibration_line(calibration, base_n),
        "",
        "Constraints at the deployable server count:",
        "",
        "| policy | servers | extra | p50 | p99 | low-pri p50 | low-pri p99 | training loss "
        "| low-pri requests lost | capping actions |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        _row("no oversubscription", base_n, base_n, baseline.as_dict()),
    ]
    deployed = [(r["policy"], r["servers"], r["best"]) for r in results]
    for name, servers, best in deployed:
        lines.append(
            _row(name, servers, base_n, best)
            if best is not None
            else f"| {name} | < {base_n} | - |" + " |" * 7
        )
    lines += [
        "",
        "Safety at the deployable server count (breaker: the largest heat of the trip curve "
        "as a share of the heat that trips it, `voltpack.power.breaker`; 1 trips; peaks: the "
        "row's peak second and its peak average over consecutive 60-s windows):",
        "",
        "| policy | servers | brakes | seconds over budget | longest over budget (allowed) "
        "| breaker heat peak (margin) | peak/budget 1 s | peak/budget 60 s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *_table_rows(_safety_row, base_n, baseline, deployed),
        "",
        "Energy at the deployable server count (per request: the inference servers' energy "
        "over the requests of both priorities completed within the run; per iteration: the "
        "training servers' energy over their server-iterations):",
        "",
        "| policy | servers | energy kWh | inference kWh | training kWh | requests completed "
        "| Wh per request | Wh per training iteration |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *_table_rows(_energy_row, base_n, baseline, deployed),
    ]
    lines += ["", "First failing server count evaluated, and what broke there:", ""]
    for result in results:
        failure = result.get("first_failure")
        text = (
            "none within the searched range"
            if failure is None
            else f"{failure['servers']} servers: {', '.join(failure['broken'])}"
        )
        lines.append(f"- {result['policy']}: {text}")
    lines += [
        "",
        f"Published: POLCA deploys +{POLCA_EXTRA_SERVERS_PCT:.0f}% servers (+12 on 40) for "
        "inference with under 1% median latency impact on high priority and no power brake.",
        "p50/p99: high-priority latency against the same servers uncapped; low-pri p50/p99: "
        "low-priority request latency against the same servers uncapped ("
        + _low_goal_text(limits)
        + ").",
    ]
    return "\n".join(lines) + "\n"


def _low_goal_text(limits: Limits) -> str:
    """How the low-priority latency goals enter `ok`."""
    if limits.low_p50_increase_pct is None and limits.low_p99_increase_pct is None:
        return "reported, not required: POLCA bounds only low-priority throughput"
    return (
        f"required: p50 within {limits.low_p50_increase_pct}% and p99 within "
        f"{limits.low_p99_increase_pct}%, voltpack's own goal, not POLCA's"
    )


def _calibration_line(calibration: RateCalibration | None, servers: int) -> str:
    if calibration is None:
        return "Request rate given on the command line (not calibrated)."
    return (
        f"Request rate calibrated (`calibrate_rate_per_s`, {len(calibration.evaluations)} "
        f"uncapped runs): at this rate the uncapped row of {servers} inference servers peaks "
        f"at {calibration.peak_share:.4f} of its provisioned power over the run (POLCA's "
        f"row-level inference anchor: {calibration.target_share:.2f})."
    )


def _row(name: str, servers: int, base_n: int, o: dict[str, Any]) -> str:
    extra = 100.0 * (servers / base_n - 1.0)
    return (
        f"| {name} | {servers} | {extra:+.0f}% | {o['p50_increase_pct']:+.2f}% "
        f"| {o['p99_increase_pct']:+.2f}% | {o['low_p50_increase_pct']:+.1f}% "
        f"| {o['low_p99_increase_pct']:+.1f}% | {o['training_loss_pct']:.2f}% "
        f"| {o['low_inference_loss_pct']:.2f}% | {o['actions']} |"
    )


def parse_search(text: str | None, budget_servers: int) -> tuple[int, int] | None:
    """`LOW:HIGH` with budget_servers <= LOW < HIGH, or None."""
    if text is None:
        return None
    try:
        low, high = (int(part) for part in text.split(":"))
    except ValueError:
        raise SystemExit(f"--search {text!r}: expected LOW:HIGH, e.g. 54:64") from None
    if not budget_servers <= low < high:
        raise SystemExit(f"--search {text!r}: need {budget_servers} <= LOW < HIGH")
    return low, high


def _table_rows(
    row: Callable[[str, int, dict[str, Any]], str],
    base_n: int,
    baseline: RowOutcome,
    deployed: list[tuple[str, int, dict[str, Any] | None]],
) -> list[str]:
    """One table's lines: the unmanaged row, then each policy at its deployable count."""
    lines = [row("no oversubscription", base_n, baseline.as_dict())]
    return lines + [row(name, servers, best) for name, servers, best in deployed if best]


def _safety_row(name: str, servers: int, o: dict[str, Any]) -> str:
    return (
        f"| {name} | {servers} | {o['brakes']} | {o['seconds_over_budget']} s "
        f"| {o['longest_excursion_s']} s ({o['allowed_excursion_s']} s) "
        f"| {o['breaker_heat_peak_share']:.3f} ({o['breaker_margin_share']:.3f}) "
        f"| {o['peak_share_of_budget']:.3f} | {o['peak_60s_share_of_budget']:.3f} |"
    )


def _energy_row(name: str, servers: int, o: dict[str, Any]) -> str:
    return (
        f"| {name} | {servers} | {o['energy_kwh']:.0f} | {o['inference_energy_kwh']:.0f} "
        f"| {o['training_energy_kwh']:.0f} | {o['requests_completed']} "
        f"| {_wh(o['energy_per_request_wh'])} | {_wh(o['energy_per_iteration_wh'])} |"
    )


def _wh(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trace",
        type=Path,
        action="append",
        help="Azure-format CSV, one per service; repeat for a mix (default: the conversation "
        "and code traces)",
    )
    parser.add_argument("--policies", default="thresholds,headroom")
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--budget-servers", type=int, default=40)
    parser.add_argument("--training-share", type=float, default=0.1)
    parser.add_argument("--low-priority-share", type=float, default=0.3)
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="mean requests/s per inference server (default: calibrated to the 79%% row peak)",
    )
    parser.add_argument(
        "--anchor-resolution-s",
        type=int,
        default=1,
        help="calibrate the peak of the row's power averaged over windows of this many seconds",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--processes", type=int, default=1, help="policies searched in parallel (1: in turn)"
    )
    parser.add_argument(
        "--search",
        default=None,
        help="LOW:HIGH server counts to bisect between (default: the budget's and twice it); "
        "LOW is tried first and, if it fails, counts below it one by one",
    )
    parser.add_argument("--name", default="power_oversubscription")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default: results/)")
    args = parser.parse_args()
    trace_paths = args.trace or [azure_llm_dir() / CONVERSATION_TRACE, azure_llm_dir() / CODE_TRACE]
    scenario = RowScenario(
        servers=args.budget_servers,
        budget_servers=args.budget_servers,
        training_share=args.training_share,
        low_priority_inference_share=args.low_priority_share,
        duration_s=int(args.days * 86_400),
        seed=args.seed,
    )
    trace = load_service_mix(trace_paths)
    started = time.perf_counter()
    calibration = None
    if args.rate is None:
        calibration = calibrate_rate_per_s(scenario, trace, resolution_s=args.anchor_resolution_s)
        print(
            f"calibrated rate {calibration.rate_per_s:.4f} requests/s per server: uncapped row "
            f"peak {calibration.peak_share:.4f} of provisioned ({len(calibration.evaluations)} "
            f"runs, {time.perf_counter() - started:.0f} s)",
            flush=True,
        )
        scenario = replace(scenario, mean_rate_per_s=calibration.rate_per_s)
    else:
        scenario = replace(scenario, mean_rate_per_s=args.rate)
    limits = Limits()
    specs = [resolve_power_spec(p) for p in args.policies.split(",") if p]
    bounds = parse_search(args.search, scenario.budget_servers)
    jobs = [(name, spec, scenario, trace_paths, limits, bounds) for name, spec in specs]
    results = list(_run_searches(jobs, args.processes))
    baseline = uncapped_outcome(scenario, trace, limits)
    figures = {
        "scenario": asdict(scenario),
        "rate_calibration": None
        if calibration is None
        else {**asdict(calibration), "resolution_s": args.anchor_resolution_s},
        "trace": [p.name for p in trace_paths],
        "services": trace.label(),
        "limits": asdict(limits),
        "no_oversubscription": baseline.as_dict(),
        "policies": results,
        "published": {"polca_extra_servers_pct": POLCA_EXTRA_SERVERS_PCT},
        "wall_s": time.perf_counter() - started,
    }
    traces = " + ".join(f"`{p.name}`" for p in trace_paths)
    text = markdown(scenario, baseline, results, f"{traces} ({trace.label()})", calibration, limits)
    if calibration is not None and args.anchor_resolution_s != 1:
        text = text.replace(
            "over the run (POLCA's",
            f"over the run, averaged over {args.anchor_resolution_s}-s windows (POLCA's",
        )
    save(args.name, figures, text, args.out)


if __name__ == "__main__":
    main()
