"""The cheapest GPU-type mix at a latency SLO: voltpack's planner against Mélange's formulation
and the best single GPU type, each with and without split prefill/decode rights, every plan
replayed out of sample in voltpack's serving simulator.

For every (workload, model, TPOT SLO, request rate): the workload, rescaled to the mean rate,
is cut in time (`voltpack.sim.traces.trace_windows.split_by_time`): the request mix and the
burst-aware planning rate come from the first window only; five plans are made from them
(voltpack; the best single GPU type unified and with split pools; Mélange unified and with
split options) and each is replayed on the held-out window (the headline attainment,
`attainment_out_of_sample_pct`) and, for comparison, on the planning window it was sized on
(in-sample). Each row reports the GPU-type mixing gain at equal split rights
(`savings_mix_pct`: voltpack vs the best single type with split) apart from the split gain
(`savings_split_pct`: the best single type with split vs unified).

Workloads (`--trace`): Mélange's regimes (`voltpack.sim.traces.melange_workloads`): `arena`
(short context: the Azure conversation trace's short requests), `pubmed` (long context:
PubMed-summarization lengths at the Azure code trace's arrivals), `mixed` (80/20); or the
Azure traces themselves (`conv`, `code`, `both`) or a file of that format. Headline GPU types:
L4, A10 (the catalog's name for AWS's A10G), A100-80GB, H100-SXM at the listed on-demand
prices of `voltpack/policies/inference/gpu_prices.yaml` (AWS EC2, each entry cites its page).
Every priced type, B200/H200 included (extrapolated profiles, derived prices), goes in a
separate, flagged table, never in the headline. A plan resting on a profile Splitwise's
measurements do not back (label `(extrapolated)`) is marked in every table.

Also:
- Splitwise's own setting (`--splitwise`): llama2-70b on A100-80GB and H100 only, split
  prefill/decode pools allowed, against the cheapest unsplit fleet of one type at the same
  rate (Splitwise, ISCA'24: 1.4x throughput per cost); planned and replayed in-sample;
- solve time for 8 GPU types x 100 buckets (`--speed`; goal: 2 s).

Published anchors: Mélange (Griggs et al., 2024) reports 9-77% lower cost than the best single
GPU type (PubMed: 15-33% at TPOT 120 ms, 2-22% at 40 ms) with >= 99.5% of requests within the
TPOT SLO; Splitwise 1.4x throughput per cost.

Usage (from benchmarks/):
  python inference_placement.py [--trace arena|pubmed|mixed|conv|code|both|FILE]...
      [--model NAME]... [--slo-ttft-ms X] [--slo-tpot-ms Y]... [--rate R]...
      [--quick] [--max-requests N] [--planning-share S] [--seed N] [--gpu-types A,B]
      [--extended-rate R]... [--no-extended] [--prices FILE] [--splitwise] [--speed]
      [--out DIR]
The default run is the whole sweep: arena, pubmed, mixed x llama2-7b, llama2-70b x TPOT 40,
120 ms x rates 1, 2, 4, 8, 16, 32 req/s on the first DEFAULT_MAX_REQUESTS requests of each
workload, plus the extended table at 8 req/s (about 10 minutes on 2 loaded cores with the
planner of issue 20). `--quick`: llama2-7b at 2, 8, 32 req/s (about 4 minutes);
`--max-requests 0`: whole workloads (several times longer).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from _common import save
from numpy.typing import NDArray

from voltpack.perf.inference_profile import default_profile_book
from voltpack.perf.serving_capacity import TPOT_STATISTICS, ServingSlo, TpotStatistic
from voltpack.policies.inference.buckets import RequestMix, request_mix
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
    BacktestedRate,
    backlog_planning_rate_per_s,
    backtested_planning_rate_per_s,
    peak_window_rate_per_s,
)
from voltpack.policies.inference.window_sizing import plan_service_on_window, size_on_window
from voltpack.sim.serving import ServingResult, scale_to_rate, simulate_serving
from voltpack.sim.traces.azure_llm import (
    CODE_TRACE,
    CONVERSATION_TRACE,
    LlmRequests,
    azure_llm_dir,
    load_azure_llm_trace,
)
from voltpack.sim.traces.melange_workloads import CONTEXT_OF_REGIME, REGIMES, regime_workload
from voltpack.sim.traces.trace_windows import (
    DEFAULT_PLANNING_SHARE,
    first_requests,
    split_by_time,
)

HEADLINE_TYPES = ("L4", "A10", "A100-80GB", "H100-SXM")
"""Mélange's four GPU types (A10 is the catalog's name for the A10G)."""
DEFAULT_WORKLOADS = REGIMES
DEFAULT_MODELS = ("llama2-7b", "llama2-70b")
QUICK_MODELS = ("llama2-7b",)
DEFAULT_TPOT_MS = (40.0, 120.0)
DEFAULT_RATES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
QUICK_RATES = (2.0, 8.0, 32.0)
DEFAULT_EXTENDED_RATES = (8.0,)
DEFAULT_MAX_REQUESTS = 4000
"""Requests per workload (its first ones, a contiguous stretch with its bursts): half plan,
half are replayed out of sample. Bounds the run time; `--max-requests 0` takes them all."""
DEFAULT_TTFT_MS = 4000.0
"""Mélange sets only a TPOT SLO; a generous TTFT bound keeps the longest prompts (14k tokens
in the conversation trace) servable while still bounding queueing."""
SPLITWISE_TYPES = ("A100-80GB", "H100-SXM")
ATTAINMENT_GOAL_PCT = 99.0
MIX_GOAL_SHORT_PCT = 15.0
"""Mixing-gain goal on the short-context llama2-7b settings at TPOT 120 ms, in half of them."""
MIX_GOAL_LONG_PCT = 10.0
"""Mixing-gain goal on the long-context settings, in half of them."""
SPLITWISE_GAIN = 1.4
SPEED_GOAL_S = 2.0
SPEED_BUDGET_S = 1.5
SPEED_MODEL = "llama2-70b"
"""The model of the plan-time check (as in earlier runs)."""
PLANNING_WINDOW_S = 10.0
"""Shown for comparison: the PLANNING_QUANTILE of the request rate over windows this long."""
PLANNING_QUANTILE = 0.99
"""Plans are made for the rate at which a fleet draining prompt tokens at that rate's mean
would start this share of the requests (the attainment goal) within the TTFT SLO
(`backlog_planning_rate_per_s`): the Azure code trace holds up to 67 requests in one second
against a mean of 2.6, and a quantile of windowed rates counts a burst once however many
requests it holds."""
PLANNERS = ("voltpack", "best_single_type_split", "best_single_type", "melange_split", "melange")
"""The plans of a setting: voltpack, and each baseline with and without split rights."""


def planning_rate(requests: LlmRequests, slo: ServingSlo, backtest: bool = False) -> BacktestedRate:
    """The rate the plans of a setting are made for (see PLANNING_QUANTILE); with `backtest`
    raised by the window's own backtest (`backtested_planning_rate_per_s`: the headroom the
    window's second half needed over its first)."""
    if backtest:
        return backtested_planning_rate_per_s(
            requests.arrival_s, requests.prompt_tokens, slo.ttft_s, PLANNING_QUANTILE
        )
    rate = backlog_planning_rate_per_s(
        requests.arrival_s, requests.prompt_tokens, slo.ttft_s, PLANNING_QUANTILE
    )
    return BacktestedRate(rate, rate, 1.0)


def traces(names: Sequence[str], seed: int = 0) -> list[tuple[str, LlmRequests]]:
    """(label, requests) for Mélange's regimes (`arena`, `pubmed`, `mixed`), the Azure traces
    (`conv`, `code`, `both`) or a file path."""
    out: list[tuple[str, LlmRequests]] = []
    for name in names:
        if name in REGIMES:
            out.append((name, regime_workload(name, seed)))
        if name in ("conv", "both"):
            out.append(("conv", load_azure_llm_trace(azure_llm_dir() / CONVERSATION_TRACE)))
        if name in ("code", "both"):
            out.append(("code", load_azure_llm_trace(azure_llm_dir() / CODE_TRACE)))
        if name not in (*REGIMES, "conv", "code", "both"):
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
        "extrapolated_groups": [g.label for g in plan.groups if g.profile.extrapolated],
        "solve_s": round(plan.solve_s, 3),
        "optimality_gap": plan.optimality_gap,
        "slo_attainment_pct": round(result.slo_attainment_pct, 2),
        "slo_attainment_feasible_pct": round(100 * float(result.met_slo[ok].mean()), 2)
        if ok.any()
        else None,
        "ttft_p99_ms": round(result.ttft_p99_s * 1000, 1),
        "tpot_p99_ms": round(result.tpot_p99_s * 1000, 2),
        "tpot_mean_ms": round(result.tpot_mean_s * 1000, 2),
        "energy_kwh": round(result.energy_j / 3.6e6, 3),
        "requests_unserved": result.requests_unserved,
        "simulate_s": round(time.perf_counter() - started, 2),
    }


def _try(planner: Callable[[PlanRequest], ServingPlan], request: PlanRequest) -> ServingPlan | str:
    try:
        return planner(request)
    except InfeasiblePlanError as exc:
        return f"infeasible: {exc}"


def plans_for(
    request: PlanRequest, window: LlmRequests | None = None
) -> dict[str, ServingPlan | str]:
    """The five plans of a setting (PLANNERS), or why one is infeasible; with a `window`
    (the planning window's requests) each planner sizes its plan on it (`size_on_window`:
    its rate raised until the window's replay meets the SLO)."""
    planners: dict[str, Callable[[PlanRequest], ServingPlan]] = {
        "voltpack": plan_service,
        "best_single_type_split": partial(best_single_type_plan, split=True),
        "best_single_type": best_single_type_plan,
        "melange_split": partial(melange_plan, split=True),
        "melange": melange_plan,
    }
    if window is None:
        return {name: _try(planners[name], request) for name in PLANNERS}
    sized = {name: partial(_sized, planners[name], window) for name in PLANNERS}
    sized["voltpack"] = partial(_voltpack_sized, window)
    return {name: _try(sized[name], request) for name in PLANNERS}


def _sized(
    planner: Callable[[PlanRequest], ServingPlan], window: LlmRequests, request: PlanRequest
) -> ServingPlan:
    """`planner`'s plan sized on the window (`size_on_window`: its rate raised until the
    window's replay meets the SLO)."""
    return size_on_window(
        lambda rate_per_s: [planner(replace(request, rate_per_s=rate_per_s))],
        request.rate_per_s,
        window.arrival_s,
        np.asarray(window.prompt_tokens),
        np.asarray(window.output_tokens),
    ).plan


def _voltpack_sized(window: LlmRequests, request: PlanRequest) -> ServingPlan:
    """voltpack's plan sized on the window (`plan_service_on_window`)."""
    return plan_service_on_window(
        request,
        window.arrival_s,
        np.asarray(window.prompt_tokens),
        np.asarray(window.output_tokens),
    ).plan


def outside_mix(mix: RequestMix, requests: LlmRequests) -> int:
    """Requests whose size falls in no bucket of `mix` (a size the planning window never
    held): the router serves them with the groups of the nearest larger bucket."""
    return int((mix.bucket_of(requests.prompt_tokens, requests.output_tokens) < 0).sum())


def _savings_pct(cheaper: ServingPlan | str, dearer: ServingPlan | str) -> float | None:
    if isinstance(cheaper, ServingPlan) and isinstance(dearer, ServingPlan):
        return round(100 * (1 - cheaper.cost_per_hour / dearer.cost_per_hour), 2)
    return None


def sweep_row(
    label: str,
    requests: LlmRequests,
    model: str,
    slo: ServingSlo,
    rate: float,
    prices: PriceList,
    gpu_types: tuple[str, ...],
    planning_share: float = DEFAULT_PLANNING_SHARE,
    in_sample: bool = True,
    backtest: bool = True,
    window_sizing: bool = True,
) -> dict[str, Any]:
    """One setting: the workload rescaled to mean `rate` and cut in time; the five plans made
    from the planning window alone (its request mix and its planning rate, `planning_rate`),
    each replayed on the held-out window (out of sample) and, if `in_sample`, on the
    planning window too."""
    replayed = scale_to_rate(requests, rate)
    windows = split_by_time(replayed, planning_share)
    planning_part, holdout = windows.planning, windows.holdout
    mix = request_mix(planning_part.prompt_tokens, planning_part.output_tokens)
    backtested = planning_rate(planning_part, slo, backtest)
    planning = backtested.rate_per_s
    request = PlanRequest(model, mix, planning, slo, prices, gpu_types=gpu_types)
    feasible = idle_feasible(request, holdout)
    feasible_in = idle_feasible(request, planning_part) if in_sample else None
    row: dict[str, Any] = {
        "trace": label,
        "context": CONTEXT_OF_REGIME.get(label, "trace"),
        "model": model,
        "slo_ttft_ms": slo.ttft_s * 1000,
        "slo_tpot_ms": slo.tpot_s * 1000,
        "tpot_statistic": slo.tpot_statistic,
        "rate_per_s": rate,
        "planning_rate_per_s": round(planning, 3),
        "planning_rate_window_per_s": round(backtested.window_rate_per_s, 3),
        "planning_headroom": round(backtested.headroom, 3),
        "planning_rate_whole_trace_per_s": round(planning_rate(replayed, slo).rate_per_s, 3),
        "holdout_needs_rate_per_s": round(planning_rate(holdout, slo).rate_per_s, 3),
        "window_q99_rate_per_s": round(
            peak_window_rate_per_s(planning_part.arrival_s, PLANNING_WINDOW_S, PLANNING_QUANTILE),
            3,
        ),
        "planning_share": planning_share,
        "planning_window_s": round(windows.split_s, 1),
        "holdout_rate_per_s": round(
            holdout.arrival_s.size / max(float(holdout.arrival_s[-1]), 1e-9), 3
        ),
        "buckets": len(mix.buckets),
        "requests_planning": int(planning_part.arrival_s.size),
        "requests": int(holdout.arrival_s.size),
        "requests_infeasible_idle": int((~feasible).sum()),
        "requests_outside_planned_buckets": outside_mix(mix, holdout),
    }
    plans = plans_for(request, planning_part if window_sizing else None)
    for name, plan in plans.items():
        if not isinstance(plan, ServingPlan):
            row[name] = {"error": plan}
            continue
        result = replay(plan, holdout, feasible)
        result["attainment_out_of_sample_pct"] = result["slo_attainment_pct"]
        result["planned_rate_per_s"] = round(plan.rate_per_s, 3)
        result["window_rate_factor"] = round(plan.rate_per_s / planning, 3)
        if in_sample:
            inside = simulate_serving(plan, planning_part)
            ok = feasible_in if feasible_in is not None and feasible_in.any() else None
            result["attainment_in_sample_pct"] = round(inside.slo_attainment_pct, 2)
            result["attainment_in_sample_feasible_pct"] = (
                round(100 * float(inside.met_slo[ok].mean()), 2) if ok is not None else None
            )
        if plan.formulation.startswith("single:"):
            result["type"] = plan.formulation.removeprefix("single:")
        row[name] = result
    volt = row["voltpack"]
    row["attainment_out_of_sample_pct"] = volt.get("attainment_out_of_sample_pct")
    row["attainment_in_sample_pct"] = volt.get("attainment_in_sample_pct")
    row["savings_mix_pct"] = _savings_pct(plans["voltpack"], plans["best_single_type_split"])
    row["savings_split_pct"] = _savings_pct(
        plans["best_single_type_split"], plans["best_single_type"]
    )
    row["savings_vs_single_pct"] = _savings_pct(plans["voltpack"], plans["best_single_type"])
    row["savings_vs_melange_pct"] = _savings_pct(plans["voltpack"], plans["melange"])
    row["savings_vs_melange_split_pct"] = _savings_pct(plans["voltpack"], plans["melange_split"])
    row["extrapolated_plans"] = [
        name for name in PLANNERS if row[name].get("extrapolated_profiles")
    ]
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
            planning = planning_rate(replayed, slo).rate_per_s
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
    mark = " †" if result.get("extrapolated_profiles") else ""
    factor = result.get("window_rate_factor", 1.0)
    sized = f" (rate x{factor:.2f})" if factor > 1.0 else ""
    return f"${result['cost_per_hour']:.1f}{mark}{sized}"


def _tpot_judged(statistic: str) -> str:
    """How the run judges the TPOT SLO, in words."""
    if statistic == "mean":
        return (
            "the mean over requests (Mélange's; attainment: the share within TTFT, 0 if the "
            "mean TPOT misses)"
        )
    return "every request"


def _planned(row: dict[str, Any]) -> str:
    """The planning rate, with the backtest headroom that raised it."""
    headroom = row.get("planning_headroom", 1.0)
    if headroom <= 1.0:
        return f"{row['planning_rate_per_s']:g}"
    return f"{row['planning_rate_window_per_s']:g} x {headroom:.2f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:g}%"


def _attainment(result: dict[str, Any]) -> str:
    if "error" in result:
        return "-"
    inside = result.get("attainment_in_sample_pct")
    text = f"{result['attainment_out_of_sample_pct']:.1f}%"
    return text + ("" if inside is None else f" ({inside:.1f}%)")


def _fleet(result: dict[str, Any]) -> str:
    return ", ".join(g.replace(" (extrapolated)", "†") for g in result.get("groups", []))


SWEEP_HEADER = [
    "| workload | model | TPOT ms | rate/s (planned) | voltpack | single, split | single | "
    "Mélange, split | Mélange | mix gain | split gain | attainment out of sample (in) | "
    "voltpack fleet |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
]


def sweep_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One table line per setting."""
    lines = list(SWEEP_HEADER)
    for row in rows:
        single = row["best_single_type_split"]
        lines.append(
            f"| {row['trace']} | {row['model']} | {row['slo_tpot_ms']:g} | "
            f"{row['rate_per_s']:g} ({_planned(row)}) | "
            f"{_cell(row['voltpack'])} | {_cell(single)} {single.get('type', '')} | "
            f"{_cell(row['best_single_type'])} {row['best_single_type'].get('type', '')} | "
            f"{_cell(row['melange_split'])} | {_cell(row['melange'])} | "
            f"{_pct(row['savings_mix_pct'])} | {_pct(row['savings_split_pct'])} | "
            f"{_attainment(row['voltpack'])} | {_fleet(row['voltpack'])} |"
        )
    return lines


MARKS = (
    "† rests on an extrapolated profile: Splitwise's measurements have no point for this model "
    "on this GPU type (only llama2-70b on A100-80GB and H100 is measured), so its latency is "
    "the roofline with coefficients fitted on other settings."
)


def _goal(met: bool) -> str:
    return "met" if met else "NOT met"


def _half(met: int, settings: int) -> str:
    """Whether `met` is at least half of `settings` (n/a without settings)."""
    return "no such setting in this run" if settings == 0 else _goal(2 * met >= settings)


def goal_lines(summary: dict[str, Any]) -> list[str]:
    """The issue's goals, evaluated on the headline settings (not tuned to)."""
    short, long_ = summary["mix_goal_short"], summary["mix_goal_long"]
    feasible = summary["plans"] - summary["plans_infeasible"]
    return [
        "Goals (headline settings):",
        "",
        f"- never costlier than the best single type with split: voltpack above it in "
        f"{summary['voltpack_above_single_split']} of {summary['settings']} settings "
        f"({_goal(summary['voltpack_above_single_split'] == 0)}); above Mélange with split in "
        f"{summary['voltpack_above_melange_split']} "
        f"({_goal(summary['voltpack_above_melange_split'] == 0)});",
        f"- mixing gain >= {MIX_GOAL_SHORT_PCT:g}% in at least half of the short-context "
        f"llama2-7b TPOT-120 settings: {short['met']} of {short['settings']} "
        f"({_half(short['met'], short['settings'])});",
        f"- mixing gain >= {MIX_GOAL_LONG_PCT:g}% in at least half of the long-context "
        f"settings: {long_['met']} of {long_['settings']} "
        f"({_half(long_['met'], long_['settings'])}); at "
        f"TPOT 120 ms {long_['met_tpot120']} of {long_['settings_tpot120']};",
        f"- out-of-sample attainment >= {ATTAINMENT_GOAL_PCT:g}% for every headline plan: "
        f"{summary['plans_meeting_attainment']} of {feasible} plans ("
        f"{summary['plans_infeasible']} more infeasible), voltpack "
        f"{summary['voltpack_plans_meeting_attainment']} of {summary['settings']} "
        f"({_goal(summary['plans_meeting_attainment'] == feasible)}); lowest "
        f"{summary['min_attainment_out_of_sample_pct']}%.",
        "",
        f"Requests no allowed type serves within the SLO even on an idle replica: "
        f"{summary['requests_infeasible_idle']}; held-out requests of a size the planning "
        f"window never held (served by the groups of the nearest larger planned bucket): "
        f"{summary['requests_outside_planned_buckets']}."
        f" Plans resting on extrapolated profiles: {summary['extrapolated_plans']} of "
        f"{summary['plans']}.",
    ]


def markdown(figures: dict[str, Any]) -> str:
    """The tables of the run."""
    settings = figures["settings"]
    lines = [
        "# Inference GPU-type mix at an SLO, out of sample",
        "",
        f"TTFT SLO {settings['slo_ttft_ms']:g} ms; TPOT SLO on "
        f"{_tpot_judged(settings.get('tpot_statistic', 'p99'))}; headline GPU types "
        f"{', '.join(settings['gpu_types'])} at listed on-demand prices ({settings['prices']}). "
        f"Each workload (first {settings['max_requests'] or 'all'} requests) is rescaled to the "
        f"mean rate and cut at {settings['planning_share']:.0%} of its time: the request mix and "
        "the planning rate (in brackets: the rate at which a fleet draining prompt tokens at "
        "that rate's mean starts 99% of the planning window's requests within the TTFT SLO, "
        "times its backtest headroom where shown: how much more the planning window's second "
        "half needed than its first half gave, never below 1) "
        "come from the first window only; a plan that misses the SLO on the planning "
        "window's own requests is re-made for a 10% higher rate until it meets it (shown as "
        "`rate x1.21`; every planner alike); every plan is replayed on the rest (attainment out "
        "of sample; in brackets on the planning window, in sample). Cost per hour. Mix gain: "
        "voltpack below the best single type with split rights (the gain of mixing GPU types); "
        "split gain: the best single type with split below it unified.",
        "",
        *sweep_lines(figures["sweep"]),
        "",
        MARKS,
        "",
        *goal_lines(figures["summary"]),
    ]
    if figures.get("extended"):
        lines += [
            "",
            "## Every priced GPU type, B200/H200 included (NOT the headline)",
            "",
            "Flagged: B200 and H200 have no measured profile (extrapolated from the catalog's "
            "roofline) and a derived, not listed, price (the H100 price times a RunPod price "
            "ratio; see gpu_prices.yaml). For comparison only.",
            "",
            *sweep_lines(figures["extended"]),
        ]
    if figures.get("splitwise"):
        lines += [
            "",
            "## Splitwise's setting (llama2-70b, A100-80GB + H100; in sample)",
            "",
            "| trace | rate/s | voltpack (split allowed) | unsplit single type | "
            "throughput per cost |",
            "|---|---|---|---|---|",
        ]
        for row in figures["splitwise"]:
            volt = row["voltpack"]
            lines.append(
                f"| {row['trace']} | {row['rate_per_s']:g} | {_cell(volt)} "
                f"({volt.get('slo_attainment_pct', '-')}%) {_fleet(volt)} | "
                f"{_cell(row['unsplit_single_type'])} "
                f"({row['unsplit_single_type'].get('slo_attainment_pct', '-')}%) | "
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
    lines += ["", f"Run time: {figures['run_s']:.0f} s."]
    return "\n".join(lines) + "\n"


def _above(rows: list[dict[str, Any]], key: str) -> int:
    return sum((row.get(key) or 0.0) < -0.01 for row in rows)


def _met(rows: list[dict[str, Any]], goal_pct: float) -> int:
    return sum((row["savings_mix_pct"] or -100) >= goal_pct for row in rows)


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts behind the acceptance goals."""
    plans = [row[name] for row in rows for name in PLANNERS]
    feasible = [p for p in plans if "error" not in p]
    short = [
        row
        for row in rows
        if row["context"] == "short" and row["model"] == "llama2-7b" and row["slo_tpot_ms"] == 120
    ]
    long_ = [row for row in rows if row["context"] == "long"]
    long_120 = [row for row in long_ if row["slo_tpot_ms"] == 120]
    split_gains = [row["savings_split_pct"] for row in rows if row["savings_split_pct"] is not None]
    return {
        "settings": len(rows),
        "plans": len(plans),
        "plans_infeasible": len(plans) - len(feasible),
        "plans_meeting_attainment": sum(
            p["attainment_out_of_sample_pct"] >= ATTAINMENT_GOAL_PCT for p in feasible
        ),
        "voltpack_plans_meeting_attainment": sum(
            (row["attainment_out_of_sample_pct"] or 0) >= ATTAINMENT_GOAL_PCT for row in rows
        ),
        "min_attainment_out_of_sample_pct": min(
            (p["attainment_out_of_sample_pct"] for p in feasible), default=None
        ),
        "min_attainment_in_sample_pct": min(
            (p["attainment_in_sample_pct"] for p in feasible if "attainment_in_sample_pct" in p),
            default=None,
        ),
        "plans_meeting_attainment_on_feasible_requests": sum(
            (p["slo_attainment_feasible_pct"] or 0) >= ATTAINMENT_GOAL_PCT for p in feasible
        ),
        "voltpack_above_single_split": _above(rows, "savings_mix_pct"),
        "voltpack_above_melange_split": _above(rows, "savings_vs_melange_split_pct"),
        "voltpack_above_single": _above(rows, "savings_vs_single_pct"),
        "voltpack_above_melange": _above(rows, "savings_vs_melange_pct"),
        "mix_goal_short": {"settings": len(short), "met": _met(short, MIX_GOAL_SHORT_PCT)},
        "mix_goal_long": {
            "settings": len(long_),
            "met": _met(long_, MIX_GOAL_LONG_PCT),
            "settings_tpot120": len(long_120),
            "met_tpot120": _met(long_120, MIX_GOAL_LONG_PCT),
        },
        "median_savings_mix_pct": float(
            np.median(
                [row["savings_mix_pct"] for row in rows if row["savings_mix_pct"] is not None]
            )
        )
        if any(row["savings_mix_pct"] is not None for row in rows)
        else None,
        "median_savings_split_pct": float(np.median(split_gains)) if split_gains else None,
        "extrapolated_plans": sum(bool(p.get("extrapolated_profiles")) for p in feasible),
        "requests_infeasible_idle": sum(row["requests_infeasible_idle"] for row in rows),
        "requests_outside_planned_buckets": sum(
            row["requests_outside_planned_buckets"] for row in rows
        ),
    }


def run_sweep(
    loaded: list[tuple[str, LlmRequests]],
    models: Sequence[str],
    tpots_ms: Sequence[float],
    rates: Sequence[float],
    ttft_ms: float,
    prices: PriceList,
    gpu_types: tuple[str, ...],
    planning_share: float,
    tag: str,
    backtest: bool = True,
    window_sizing: bool = True,
    tpot_statistic: TpotStatistic = "p99",
) -> list[dict[str, Any]]:
    """Every (workload, model, TPOT, rate) setting, printed as it completes."""
    rows = []
    for label, requests in loaded:
        for model in models:
            for tpot in tpots_ms:
                for rate in rates:
                    started = time.perf_counter()
                    slo = ServingSlo(ttft_ms / 1000, tpot / 1000, tpot_statistic)
                    row = sweep_row(
                        label,
                        requests,
                        model,
                        slo,
                        rate,
                        prices,
                        gpu_types,
                        planning_share,
                        backtest=backtest,
                        window_sizing=window_sizing,
                    )
                    rows.append(row)
                    print(
                        f"{tag} {label} {model} TPOT {tpot:g} ms rate {rate:g}: mix gain "
                        f"{_pct(row['savings_mix_pct'])}, split gain "
                        f"{_pct(row['savings_split_pct'])}, out of sample "
                        f"{_pct(row['attainment_out_of_sample_pct'])} "
                        f"({time.perf_counter() - started:.0f} s)",
                        flush=True,
                    )
    return rows


def main() -> None:
    started = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", action="append", default=None)
    parser.add_argument("--model", action="append", default=None)
    parser.add_argument("--slo-ttft-ms", type=float, default=DEFAULT_TTFT_MS)
    parser.add_argument("--slo-tpot-ms", type=float, action="append", default=None)
    parser.add_argument("--rate", type=float, action="append", default=None)
    parser.add_argument("--quick", action="store_true", help="llama2-7b at 2, 8, 32 req/s")
    parser.add_argument("--max-requests", type=int, default=DEFAULT_MAX_REQUESTS)
    parser.add_argument("--planning-share", type=float, default=DEFAULT_PLANNING_SHARE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--tpot-statistic",
        choices=TPOT_STATISTICS,
        default="p99",
        help="judge the TPOT SLO per request (p99) or on the mean over requests (Mélange's)",
    )
    parser.add_argument(
        "--no-window-sizing",
        action="store_true",
        help="keep each planner's first plan even when it misses the SLO on its own window",
    )
    parser.add_argument(
        "--no-backtest",
        action="store_true",
        help="plan for the planning window's burst-aware rate without its backtest headroom",
    )
    parser.add_argument(
        "--gpu-types", default=",".join(HEADLINE_TYPES), help="comma-separated headline types"
    )
    parser.add_argument("--extended-rate", type=float, action="append", default=None)
    parser.add_argument("--no-extended", action="store_true")
    parser.add_argument("--prices", type=Path, default=None)
    parser.add_argument("--splitwise", action="store_true")
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--name", default="inference_placement")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    prices = PriceList.from_yaml(args.prices) if args.prices else example_prices()
    models = args.model or list(QUICK_MODELS if args.quick else DEFAULT_MODELS)
    tpots = args.slo_tpot_ms or list(DEFAULT_TPOT_MS)
    rates = args.rate or list(QUICK_RATES if args.quick else DEFAULT_RATES)
    extended_rates = args.extended_rate or list(DEFAULT_EXTENDED_RATES)
    gpu_types = tuple(t for t in args.gpu_types.split(",") if t)
    loaded = traces(args.trace or list(DEFAULT_WORKLOADS), args.seed)
    if args.max_requests > 0:
        loaded = [(label, first_requests(r, args.max_requests)) for label, r in loaded]
    rows = run_sweep(
        loaded,
        models,
        tpots,
        rates,
        args.slo_ttft_ms,
        prices,
        gpu_types,
        args.planning_share,
        "headline",
        backtest=not args.no_backtest,
        window_sizing=not args.no_window_sizing,
        tpot_statistic=args.tpot_statistic,
    )
    figures: dict[str, Any] = {
        "settings": {
            "models": models,
            "traces": [label for label, _ in loaded],
            "seed": args.seed,
            "max_requests": args.max_requests,
            "planning_share": args.planning_share,
            "backtest_headroom": not args.no_backtest,
            "window_sizing": not args.no_window_sizing,
            "tpot_statistic": args.tpot_statistic,
            "slo_ttft_ms": args.slo_ttft_ms,
            "slo_tpot_ms": tpots,
            "rates_per_s": rates,
            "prices": str(args.prices or "voltpack/policies/inference/gpu_prices.yaml"),
            "gpu_types": list(gpu_types),
            "extended_gpu_types": prices.gpu_types,
            "extended_rates_per_s": [] if args.no_extended else extended_rates,
        },
        "sweep": rows,
        "summary": summarise(rows),
    }
    if not args.no_extended:
        extended = run_sweep(
            loaded,
            models,
            tpots,
            extended_rates,
            args.slo_ttft_ms,
            prices,
            tuple(prices.gpu_types),
            args.planning_share,
            "extended",
            backtest=not args.no_backtest,
            window_sizing=not args.no_window_sizing,
            tpot_statistic=args.tpot_statistic,
        )
        figures["extended"] = extended
        figures["extended_summary"] = summarise(extended)
    if args.splitwise:
        slo = ServingSlo(args.slo_ttft_ms / 1000, max(tpots) / 1000)
        figures["splitwise"] = splitwise_rows(loaded, slo, rates, prices)
    if args.speed:
        figures["speed"] = speed_rows(SPEED_MODEL, ServingSlo(4.0, 0.12), prices)
    figures["run_s"] = round(time.perf_counter() - started, 1)
    save(args.name, figures, markdown(figures), args.out)


if __name__ == "__main__":
    main()
