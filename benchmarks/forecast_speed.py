"""Speed of forecasting many series: fit + predict for 1,000 series of 4,000 samples each.

Series (seeded, 10-minute steps): `base * (1 + a sin(2 pi t / 144 + p) + b sin(2 pi t / 1008 + q))`
plus AR(1) noise (coefficient 0.7, sd 5% of base), clipped at 0; per series, base is drawn from
1..200, a from 0.1..0.5, b from 0.05..0.3 and the phases uniformly. Each model fits every
history and predicts 48 steps (8 hours) at quantiles 0.01/0.1/0.5/0.9/0.99; the wall time of
fit + predict is the median of `--repeats` runs. Goal: at most 30 s for voltpack's own model on
this machine. ETS fits one statsmodels model per series, so it is timed on `--ets-series`
series and the per-series time multiplied up to 1,000 (stated as an extrapolation).

Usage: python benchmarks/forecast_speed.py [--series 1000] [--length 4000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _common import save
from scipy.signal import lfilter

from voltpack.forecast.registry import make_forecaster
from voltpack.forecast.series import TimeSeries

GOAL_S = 30.0
HORIZON = 48
QUANTILES = (0.01, 0.1, 0.5, 0.9, 0.99)
STEP_S = 600.0
SEASONS = (144, 1008)


def synthetic_series(count: int, length: int, seed: int) -> list[TimeSeries]:
    """Diurnal + weekly + AR(1) noise histories (see the module docstring)."""
    rng = np.random.default_rng(seed)
    steps = np.arange(length)
    out = []
    for index in range(count):
        base = rng.uniform(1.0, 200.0)
        daily = rng.uniform(0.1, 0.5) * np.sin(2 * np.pi * steps / 144 + rng.uniform(0, 6.3))
        weekly = rng.uniform(0.05, 0.3) * np.sin(2 * np.pi * steps / 1008 + rng.uniform(0, 6.3))
        noise = lfilter([1.0], [1.0, -0.7], rng.normal(0.0, 0.05 * base, length))
        values = np.maximum(base * (1 + daily + weekly) + noise, 0.0)
        out.append(
            TimeSeries(f"synthetic/{index}", "gpu_demand", STEP_S, 0.0, values, "gpus", SEASONS)
        )
    return out


def fit_predict_s(name: str, histories: list[TimeSeries]) -> float:
    """Wall time of one fit_many + predict_many."""
    started = time.perf_counter()
    model = make_forecaster(name)
    model.fit_many(histories)
    forecasts = model.predict_many(HORIZON, QUANTILES)
    elapsed = time.perf_counter() - started
    assert len(forecasts) == len(histories)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--length", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ets-series", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    histories = synthetic_series(args.series, args.length, args.seed)
    rows = []
    for name, subset in (
        ("global_gbm", histories),
        ("seasonal_naive", histories),
        ("ets", histories[: args.ets_series]),
    ):
        runs = [fit_predict_s(name, subset) for _ in range(args.repeats)]
        median = statistics.median(runs)
        scaled = median * args.series / len(subset)
        rows.append(
            {
                "model": name,
                "series_timed": len(subset),
                "runs_s": runs,
                "median_s": median,
                "for_all_series_s": scaled,
                "extrapolated": len(subset) != args.series,
                "within_goal": scaled <= GOAL_S,
            }
        )
    lines = [
        f"# Forecast speed: fit + predict, {args.series} series x {args.length} samples",
        "",
        f"Synthetic diurnal + weekly + AR(1) series (seed {args.seed}), horizon {HORIZON}, "
        f"5 quantiles; median of {args.repeats}. Goal: <= {GOAL_S:g} s for voltpack's model.",
        "",
        "| model | series timed | runs (s) | median (s) | for all series (s) | within goal |",
        "|---|---:|---|---:|---:|---|",
    ]
    for row in rows:
        runs_text = ", ".join(f"{r:.2f}" for r in row["runs_s"])
        total = f"{row['for_all_series_s']:.1f}" + (
            " (extrapolated)" if row["extrapolated"] else ""
        )
        lines.append(
            f"| {row['model']} | {row['series_timed']} | {runs_text} | {row['median_s']:.2f} "
            f"| {total} | {'yes' if row['within_goal'] else 'no'} |"
        )
    save(
        "forecast_speed",
        {"series": args.series, "length": args.length, "horizon": HORIZON, "rows": rows},
        "\n".join(lines) + "\n",
    )


if __name__ == "__main__":
    main()
