"""Forecast-driven against reactive scaling of an inference service over a simulated day.

Arrivals: the Azure LLM conversation trace (or any file of its format) replayed with a
diurnal rate (`diurnal_request_stream`: mean `--rate`, peak/trough 2) for `--history-days`
days of history plus one evaluated day. Every `--interval-min` minutes each policy plans a
fleet (voltpack's planner) that comes up `--startup-min` minutes later; each segment is
replayed in the serving simulator. Goal (issue 20): higher SLO attainment than reactive
scaling at no more than 10% more cost.

Usage:
  python benchmarks/inference_autoscale.py [--trace conv|code|FILE] [--model NAME] [--rate R]
      [--forecaster NAME] [--quantile Q] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import save

from voltpack.perf.serving_capacity import ServingSlo
from voltpack.policies.inference.buckets import request_mix
from voltpack.policies.inference.prices import example_prices
from voltpack.sim.inference_autoscale import AutoscaleSetup, simulate_day
from voltpack.sim.traces.azure_llm import (
    CODE_TRACE,
    CONVERSATION_TRACE,
    LlmRequests,
    azure_llm_dir,
    diurnal_request_stream,
    load_azure_llm_trace,
)

DAY_S = 86_400.0
COST_GOAL_PCT = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", default="conv")
    parser.add_argument("--model", default="llama2-70b")
    parser.add_argument("--rate", type=float, default=4.0)
    parser.add_argument("--slo-ttft-ms", type=float, default=4000.0)
    parser.add_argument("--slo-tpot-ms", type=float, default=120.0)
    parser.add_argument("--history-days", type=int, default=2)
    parser.add_argument("--interval-min", type=float, default=15.0)
    parser.add_argument("--startup-min", type=float, default=5.0)
    parser.add_argument("--forecaster", default="ets")
    parser.add_argument("--quantile", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    files = {"conv": CONVERSATION_TRACE, "code": CODE_TRACE}
    path = azure_llm_dir() / files[args.trace] if args.trace in files else Path(args.trace)
    trace = load_azure_llm_trace(path)
    started = time.perf_counter()
    days = args.history_days + 1
    stream = diurnal_request_stream(
        trace, days * DAY_S, args.rate, np.random.default_rng(args.seed)
    )
    day_start = args.history_days * DAY_S
    before = stream.arrival_s < day_start
    history = LlmRequests(
        stream.arrival_s[before], stream.prompt_tokens[before], stream.output_tokens[before]
    )
    day = LlmRequests(
        stream.arrival_s[~before], stream.prompt_tokens[~before], stream.output_tokens[~before]
    )
    setup = AutoscaleSetup(
        model=args.model,
        mix=request_mix(trace.prompt_tokens, trace.output_tokens),
        slo=ServingSlo(args.slo_ttft_ms / 1000, args.slo_tpot_ms / 1000),
        prices=example_prices(),
        interval_s=args.interval_min * 60,
        startup_s=args.startup_min * 60,
        forecaster=args.forecaster,
        quantile=args.quantile,
    )
    outcomes = simulate_day(setup, history, day, day_start)
    reactive, forecast = outcomes["reactive"], outcomes["forecast"]
    extra_cost_pct = 100.0 * (forecast.cost_usd / reactive.cost_usd - 1.0)
    rows: list[dict[str, Any]] = [
        {
            "policy": o.name,
            "requests": o.requests,
            "slo_attainment_pct": round(o.slo_attainment_pct, 2),
            "cost_usd": round(o.cost_usd, 2),
            "gpu_hours": round(o.gpu_hours, 1),
            "mean_planning_rate_per_s": round(float(np.mean(o.planning_rates_per_s)), 3),
        }
        for o in (reactive, forecast)
    ]
    figures = {
        "settings": {
            "trace": str(path.name),
            "model": args.model,
            "mean_rate_per_s": args.rate,
            "slo_ttft_ms": args.slo_ttft_ms,
            "slo_tpot_ms": args.slo_tpot_ms,
            "history_days": args.history_days,
            "interval_min": args.interval_min,
            "startup_min": args.startup_min,
            "forecaster": args.forecaster,
            "quantile": args.quantile,
            "seed": args.seed,
        },
        "policies": rows,
        "forecast_extra_cost_pct": round(extra_cost_pct, 2),
        "meets_goal": forecast.slo_attainment_pct > reactive.slo_attainment_pct
        and extra_cost_pct <= COST_GOAL_PCT,
        "runtime_s": round(time.perf_counter() - started, 1),
    }
    lines = [
        "# Forecast-driven against reactive scaling over one simulated day",
        "",
        f"{path.name}, {args.model}, mean {args.rate:g} req/s (diurnal, peak/trough 2), SLO "
        f"TTFT {args.slo_ttft_ms:g} ms / TPOT {args.slo_tpot_ms:g} ms; plans every "
        f"{args.interval_min:g} min, fleets up {args.startup_min:g} min later; forecast: "
        f"{args.forecaster} q{args.quantile:g} over {args.history_days} days of history.",
        "",
        "| policy | requests | SLO attainment % | cost USD | GPU-hours | mean planned rate/s |",
        "|---|---|---|---|---|---|",
        *[
            f"| {r['policy']} | {r['requests']} | {r['slo_attainment_pct']} | {r['cost_usd']} | "
            f"{r['gpu_hours']} | {r['mean_planning_rate_per_s']} |"
            for r in rows
        ],
        "",
        f"Forecast-driven costs {extra_cost_pct:+.1f}% against reactive (goal: higher "
        f"attainment at no more than +{COST_GOAL_PCT:g}%): "
        f"{'met' if figures['meets_goal'] else 'not met'}.",
        "",
    ]
    save("inference_autoscale", figures, "\n".join(lines), args.out)


if __name__ == "__main__":
    main()
