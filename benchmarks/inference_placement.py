"""The cheapest GPU-type mix at a latency SLO: voltpack's planner against Mélange's formulation
and the best single GPU type, each plan replayed in voltpack's serving simulator.

For every (trace, TPOT SLO, request rate): the request mix of the trace (Azure LLM 2023
conversation and/or code, or any file of that format) is bucketed, the three planners choose
fleets from the same profiles and prices, and the trace, rescaled to the rate, is replayed
against each fleet (`voltpack.sim.serving`) for SLO attainment. Also:

- Splitwise's own setting (`--splitwise`): llama2-70b on A100-80GB and H100 only, split
  prefill/decode pools allowed, against the cheapest unsplit fleet of one type at the same
  rate (Splitwise, ISCA'24: 1.4x throughput per cost);
- solve time for 8 GPU types x 100 buckets (`--speed`; goal: 2 s).

Published anchors: Mélange (Griggs et al., 2024) reports 9-77% lower cost than the best single
GPU type with >= 99.5% of requests within the TPOT SLO; Splitwise 1.4x throughput per cost.

Usage:
  python benchmarks/inference_placement.py [--trace conv|code|both|FILE]... [--model NAME]
      [--slo-ttft-ms X] [--slo-tpot-ms Y]... [--rate R]... [--prices FILE]
      [--splitwise] [--speed] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _common import save
from numpy.typing import NDArray

from voltpack.perf.inference_profile import default_profile_book
from voltpack.perf.serving_capacity import ServingSlo
from voltpack.policies.inference.buckets import request_mix
from voltpack.policies.inference.melange import melange_plan
from voltpack.policies.inference.mix_planner import (
    InfeasiblePlanError,
    PlanRequest,
    allowed_profiles,
    best_single_type_plan,
    plan_service,
)
from voltpack.policies.inference.plan import ServingPlan
from voltpack.policies.inference.prices import PriceList, example_prices
from voltpack.policies.inference.scaling import (
    backlog_planning_rate_per_s,
    peak_window_rate_per_s,
)
from voltpack.sim.serving import ServingResult, scale_to_rate, simulate_serving
from voltpack.sim.traces.azure_llm import (
    CODE_TRACE,
    CONVERSATION_TRACE,
    LlmRequests,
    azure_llm_dir,
    load_azure_llm_trace,
)

DEFAULT_TPOT_MS = (40.0, 120.0)
DEFAULT_RATES = (2.0, 8.0, 32.0)
DEFAULT_TTFT_MS = 4000.0
"""Mélange sets only a TPOT SLO; a generous TTFT bound keeps the longest prompts (14k tokens
in the conversation trace) servable while still bounding queueing."""
SPLITWISE_TYPES = ("A100-80GB", "H100-SXM")
ATTAINMENT_GOAL_PCT = 99.0
SAVINGS_GOAL_PCT = 20.0
SPLITWISE_GAIN = 1.4
SPEED_GOAL_S = 2.0
SPEED_BUDGET_S = 1.5
PLANNING_WINDOW_S = 10.0
"""Shown for comparison: the PLANNING_QUANTILE of the request rate over windows this long."""
PLANNING_QUANTILE = 0.99
"""Plans are made for the rate at which a fleet draining prompt tokens at that rate's mean
would start this share of the requests (the attainment goal) within the TTFT SLO
(`backlog_planning_rate_per_s`): the Azure code trace holds up to 67 requests in one second
against a mean of 2.6, and a quantile of windowed rates counts a burst once however many
requests it holds."""


def planning_rate(requests: LlmRequests, slo: ServingSlo) -> float:
    """The rate the plans of a setting are made for (see PLANNING_QUANTILE)."""
    return backlog_planning_rate_per_s(
        requests.arrival_s, requests.prompt_tokens, slo.ttft_s, PLANNING_QUANTILE
    )


def traces(names: Sequence[str]) -> list[tuple[str, LlmRequests]]:
    """(label, requests) for `conv`, `code`, `both` or a file path."""
    out: list[tuple[str, LlmRequests]] = []
    for name in names:
        if name in ("conv", "both"):
            out.append(("conv", load_azure_llm_trace(azure_llm_dir() / CONVERSATION_TRACE)))
        if name in ("code", "both"):
            out.append(("code", load_azure_llm_trace(azure_llm_dir() / CODE_TRACE)))
        if name not in ("conv", "code", "both"):
            out.append((Path(name).stem, load_azure_llm_trace(Path(name))))
    return out


def idle_feasible(request: PlanRequest, requests: LlmRequests) -> NDArray[np.bool_]:
    """Per request, whether some allowed (GPU type, TP) could meet its SLO on an idle
    replica: its whole prompt prefilled within the TTFT SLO and one decode step of it alone
    within the TPOT SLO. A request failing this is infeasible for any plan."""
    prompts = np.asarray(requests.prompt_tokens, dtype=np.float64)
    outputs = np.asarray(requests.output_tokens)
    ttft_ok = np.zeros(prompts.size, dtype=bool)
    tpot_ok = outputs < 2
    for profile in allowed_profiles(request, default_profile_book()):
        ttft_ok |= profile.prefill_time_s(prompts, prompts**2) <= request.slo.ttft_s
        step = profile.decode_time_s(np.ones_like(prompts), prompts + outputs)
        tpot_ok |= step <= request.slo.tpot_s
    return np.asarray(ttft_ok & tpot_ok, dtype=np.bool_)


def replay(
    plan: ServingPlan, requests: LlmRequests, feasible: NDArray[np.bool_] | None = None
) -> dict[str, Any]:
    """A plan's cost and fleet, and what the (already rescaled) trace experienced on it:
    attainment over all requests and over those `feasible` on an idle replica."""
    started = time.perf_counter()
    result: ServingResult = simulate_serving(plan, requests)
    ok = np.ones(result.met_slo.size, dtype=bool) if feasible is None else feasible
    return {
        "formulation": plan.formulation,
        "cost_per_hour": round(plan.cost_per_hour, 2),
        "gpus_per_type": plan.gpus_by_type(),
        "groups": [group.label for group in plan.groups],
        "split": plan.split,
        "extrapolated_profiles": plan.extrapolated,
        "solve_s": round(plan.solve_s, 3),
        "optimality_gap": plan.optimality_gap,
        "slo_attainment_pct": round(result.slo_attainment_pct, 2),
        "slo_attainment_feasible_pct": round(100 * float(result.met_slo[ok].mean()), 2)
        if ok.any()
        else None,
        "ttft_p99_ms": round(result.ttft_p99_s * 1000, 1),
        "tpot_p99_ms": round(result.tpot_p99_s * 1000, 2),
        "energy_kwh": round(result.energy_j / 3.6e6, 3),
        "requests_unserved": result.requests_unserved,
        "simulate_s": round(time.perf_counter() - started, 2),
    }


def _try(planner: Callable[[PlanRequest], ServingPlan], request: PlanRequest) -> ServingPlan | str:
    try:
        return planner(request)
    except InfeasiblePlanError as exc:
        return f"infeasible: {exc}"


def sweep_row(
    label: str,
    requests: LlmRequests,
    model: str,
    slo: ServingSlo,
    rate: float,
    prices: PriceList,
    gpu_types: tuple[str, ...],
) -> dict[str, Any]:
    """One setting: the trace rescaled to mean `rate`, the three plans for its planning rate
    (`planning_rate`) and their replays."""
    mix = request_mix(requests.prompt_tokens, requests.output_tokens)
    replayed = scale_to_rate(requests, rate)
    planning = planning_rate(replayed, slo)
    window = peak_window_rate_per_s(replayed.arrival_s, PLANNING_WINDOW_S, PLANNING_QUANTILE)
    request = PlanRequest(model, mix, planning, slo, prices, gpu_types=gpu_types)
    feasible = idle_feasible(request, replayed)
    row: dict[str, Any] = {
        "trace": label,
        "model": model,
        "slo_ttft_ms": slo.ttft_s * 1000,
        "slo_tpot_ms": slo.tpot_s * 1000,
        "rate_per_s": rate,
        "planning_rate_per_s": round(planning, 3),
        "window_q99_rate_per_s": round(window, 3),
        "buckets": len(mix.buckets),
        "requests": int(feasible.size),
        "requests_infeasible_idle": int((~feasible).sum()),
    }
    plans = {
        "voltpack": _try(plan_service, request),
        "melange": _try(melange_plan, request),
        "best_single_type": _try(best_single_type_plan, request),
    }
    for name, plan in plans.items():
        row[name] = (
            replay(plan, replayed, feasible) if isinstance(plan, ServingPlan) else {"error": plan}
        )
    single = plans["best_single_type"]
    if isinstance(single, ServingPlan):
        row["best_single_type"]["type"] = single.formulation.removeprefix("single:")
    volt = plans["voltpack"]
    if isinstance(volt, ServingPlan) and isinstance(single, ServingPlan):
        row["savings_vs_single_pct"] = round(
            100 * (1 - volt.cost_per_hour / single.cost_per_hour), 2
        )
    melange = plans["melange"]
    if isinstance(volt, ServingPlan) and isinstance(melange, ServingPlan):
        row["savings_vs_melange_pct"] = round(
            100 * (1 - volt.cost_per_hour / melange.cost_per_hour), 2
        )
    return row


def splitwise_rows(
    requests: list[tuple[str, LlmRequests]],
    slo: ServingSlo,
    rates: Sequence[float],
    prices: PriceList,
) -> list[dict[str, Any]]:
    """Splitwise's setting: A100 + H100 with split pools against the best unsplit single type."""
    rows = []
    for label, trace in requests:
        mix = request_mix(trace.prompt_tokens, trace.output_tokens)
        for rate in rates:
            replayed = scale_to_rate(trace, rate)
            planning = planning_rate(replayed, slo)
            request = PlanRequest(
                "llama2-70b", mix, planning, slo, prices, gpu_types=SPLITWISE_TYPES
            )
            split = _try(plan_service, request)
            unsplit = _try(best_single_type_plan, request)
            row: dict[str, Any] = {
                "trace": label,
                "rate_per_s": rate,
                "planning_rate_per_s": round(planning, 3),
            }
            for name, plan in (("voltpack", split), ("unsplit_single_type", unsplit)):
                row[name] = (
                    replay(plan, replayed) if isinstance(plan, ServingPlan) else {"error": plan}
                )
            if isinstance(split, ServingPlan) and isinstance(unsplit, ServingPlan):
                row["throughput_per_cost_gain"] = round(
                    unsplit.cost_per_hour / split.cost_per_hour, 3
                )
            rows.append(row)
    return rows


def speed_rows(model: str, slo: ServingSlo, prices: PriceList) -> list[dict[str, Any]]:
    """Plan time for 8 priced GPU types x 100 buckets (every cell of a 10 x 10 size grid),
    proven optimal and within a SPEED_BUDGET_S budget."""
    rng = np.random.default_rng(0)
    prompt_edges = (0, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096)
    output_edges = (0, 16, 32, 64, 128, 192, 256, 384, 512, 768)
    prompt_top = (*prompt_edges[1:], 6000)
    output_top = (*output_edges[1:], 1000)
    prompts, outputs = [], []
    for p_low, p_high in zip(prompt_edges, prompt_top, strict=True):
        for o_low, o_high in zip(output_edges, output_top, strict=True):
            prompts.append(rng.integers(p_low + 1, p_high + 1, 40))
            outputs.append(rng.integers(o_low + 1, o_high + 1, 40))
    mix = request_mix(np.concatenate(prompts), np.concatenate(outputs), prompt_edges, output_edges)
    rows = []
    for rate in (8.0, 32.0, 100.0):
        for budget in (None, SPEED_BUDGET_S):
            kwargs = {} if budget is None else {"time_limit_s": budget}
            request = PlanRequest(model, mix, rate, slo, prices, **kwargs)  # type: ignore[arg-type]
            started = time.perf_counter()
            plan = plan_service(request)
            rows.append(
                {
                    "gpu_types": len(prices.gpu_types),
                    "buckets": len(mix.buckets),
                    "rate_per_s": rate,
                    "time_budget_s": budget,
                    "plan_s": round(time.perf_counter() - started, 3),
                    "solve_s": round(plan.solve_s, 3),
                    "cost_per_hour": round(plan.cost_per_hour, 2),
                    "optimality_gap": round(plan.optimality_gap, 5),
                }
            )
    return rows


def _cell(result: dict[str, Any]) -> str:
    if "error" in result:
        return "infeasible"
    return f"${result['cost_per_hour']:.1f} ({result['slo_attainment_pct']:.1f}%)"


def markdown(figures: dict[str, Any]) -> str:
    """The tables of the run."""
    lines = [
        "# Inference GPU-type mix at an SLO",
        "",
        f"Model {figures['settings']['model']}; TTFT SLO {figures['settings']['slo_ttft_ms']:g} "
        "ms. Each trace is replayed at its mean rate; plans are made for the rate in brackets: "
        "the rate at which a fleet draining prompt tokens at that rate's mean would start 99% "
        "of the requests within the TTFT SLO (bursts counted by the requests they hold; the "
        f"99th percentile of {PLANNING_WINDOW_S:g}-second rates, the earlier planning rate, is "
        "in the JSON). Cost per hour and SLO attainment in the serving simulator (the router "
        "starts a request on another group able to serve its bucket when that starts it "
        "sooner). Goals: never above Mélange or the best single "
        "type; >= 20% below the best single type in half the settings; >= 99% attainment for "
        "every plan.",
        "",
        "| trace | TPOT ms | rate/s (planned) | voltpack | Mélange | best single type | "
        "savings vs single | voltpack fleet |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in figures["sweep"]:
        single = row["best_single_type"]
        lines.append(
            f"| {row['trace']} | {row['slo_tpot_ms']:g} | {row['rate_per_s']:g} "
            f"({row['planning_rate_per_s']:g}) | {_cell(row['voltpack'])} | "
            f"{_cell(row['melange'])} | {_cell(single)} "
            f"{single.get('type', '')} | {row.get('savings_vs_single_pct', '-')}% | "
            f"{', '.join(row['voltpack'].get('groups', []))} |"
        )
    summary = figures["summary"]
    lines += [
        "",
        f"Settings with voltpack >= {SAVINGS_GOAL_PCT:g}% below the best single type: "
        f"{summary['settings_with_20pct_savings']} of {summary['settings']}. Plans with >= "
        f"{ATTAINMENT_GOAL_PCT:g}% attainment: {summary['plans_meeting_attainment']} of "
        f"{summary['plans']}. voltpack above Mélange: {summary['voltpack_above_melange']}; "
        f"above the best single type: {summary['voltpack_above_single']}. Requests no "
        "allowed GPU type serves within the SLO even on an idle replica: "
        f"{summary['requests_infeasible_idle']}; plans with >= {ATTAINMENT_GOAL_PCT:g}% "
        "attainment over the other requests: "
        f"{summary['plans_meeting_attainment_on_feasible_requests']} of {summary['plans']}.",
    ]
    if figures.get("splitwise"):
        lines += [
            "",
            "## Splitwise's setting (llama2-70b, A100-80GB + H100)",
            "",
            "| trace | rate/s | voltpack (split allowed) | unsplit single type | "
            "throughput per cost |",
            "|---|---|---|---|---|",
        ]
        for row in figures["splitwise"]:
            lines.append(
                f"| {row['trace']} | {row['rate_per_s']:g} | {_cell(row['voltpack'])} "
                f"{', '.join(row['voltpack'].get('groups', []))} | "
                f"{_cell(row['unsplit_single_type'])} | "
                f"{row.get('throughput_per_cost_gain', '-')}x (Splitwise: {SPLITWISE_GAIN}x) |"
            )
    if figures.get("speed"):
        lines += [
            "",
            "## Plan time, 8 GPU types x 100 buckets (goal: 2 s)",
            "",
            *([figures["speed_note"], ""] if figures.get("speed_note") else []),
            "| rate/s | budget s | plan s | cost/h | gap |",
            "|---|---|---|---|---|",
        ]
        for row in figures["speed"]:
            lines.append(
                f"| {row['rate_per_s']:g} | {row['time_budget_s'] or 'none'} | {row['plan_s']} | "
                f"{row['cost_per_hour']} | {row['optimality_gap']:.2%} |"
            )
    return "\n".join(lines) + "\n"


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts behind the acceptance goals."""
    plans = [row[name] for row in rows for name in ("voltpack", "melange", "best_single_type")]
    feasible = [p for p in plans if "error" not in p]
    return {
        "settings": len(rows),
        "settings_with_20pct_savings": sum(
            row.get("savings_vs_single_pct", -1) >= SAVINGS_GOAL_PCT for row in rows
        ),
        "plans": len(plans),
        "plans_meeting_attainment": sum(
            p["slo_attainment_pct"] >= ATTAINMENT_GOAL_PCT for p in feasible
        ),
        "voltpack_above_melange": sum(row.get("savings_vs_melange_pct", 0) < -0.01 for row in rows),
        "voltpack_above_single": sum(row.get("savings_vs_single_pct", 0) < -0.01 for row in rows),
        "min_attainment_pct": min((p["slo_attainment_pct"] for p in feasible), default=None),
        "plans_meeting_attainment_on_feasible_requests": sum(
            (p["slo_attainment_feasible_pct"] or 0) >= ATTAINMENT_GOAL_PCT for p in feasible
        ),
        "requests_infeasible_idle": sum(row["requests_infeasible_idle"] for row in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", action="append", default=None)
    parser.add_argument("--model", default="llama2-70b")
    parser.add_argument("--slo-ttft-ms", type=float, default=DEFAULT_TTFT_MS)
    parser.add_argument("--slo-tpot-ms", type=float, action="append", default=None)
    parser.add_argument("--rate", type=float, action="append", default=None)
    parser.add_argument("--gpu-types", default="", help="comma-separated; default every priced")
    parser.add_argument("--prices", type=Path, default=None)
    parser.add_argument("--splitwise", action="store_true")
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--name", default="inference_placement")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    prices = PriceList.from_yaml(args.prices) if args.prices else example_prices()
    tpots = args.slo_tpot_ms or list(DEFAULT_TPOT_MS)
    rates = args.rate or list(DEFAULT_RATES)
    gpu_types = tuple(t for t in args.gpu_types.split(",") if t)
    loaded = traces(args.trace or ["both"])
    rows = []
    for label, requests in loaded:
        for tpot in tpots:
            for rate in rates:
                slo = ServingSlo(args.slo_ttft_ms / 1000, tpot / 1000)
                rows.append(sweep_row(label, requests, args.model, slo, rate, prices, gpu_types))
                print(f"{label} TPOT {tpot:g} ms rate {rate:g}: done", flush=True)
    figures: dict[str, Any] = {
        "settings": {
            "model": args.model,
            "traces": [label for label, _ in loaded],
            "slo_ttft_ms": args.slo_ttft_ms,
            "slo_tpot_ms": tpots,
            "rates_per_s": rates,
            "prices": str(args.prices or "voltpack/policies/inference/gpu_prices.yaml"),
            "gpu_types": list(gpu_types) or prices.gpu_types,
        },
        "sweep": rows,
        "summary": summarise(rows),
    }
    if args.splitwise:
        slo = ServingSlo(args.slo_ttft_ms / 1000, max(tpots) / 1000)
        figures["splitwise"] = splitwise_rows(loaded, slo, rates, prices)
    if args.speed:
        figures["speed"] = speed_rows(args.model, ServingSlo(4.0, 0.12), prices)
    save(args.name, figures, markdown(figures), args.out)


if __name__ == "__main__":
    main()
