"""Forecast accuracy: every voltpack forecaster against statsforecast baselines on every target.

Targets come from `voltpack.sim.forecast_targets.build_targets` (GPU demand, request rate,
power; see docs/forecast.md). Every model sees the same rolling-origin splits
(`voltpack.forecast.splits.rolling_origins`: WINDOWS non-overlapping test windows of the
longest horizon, spread evenly over the last SPAN_FRACTION of each series, so the test sees
weeks of a long series rather than its last hours) and the same training window (the last
`train_cap` samples before each origin). Horizons are lead times: the first h steps of each
test window.

Baselines (statsforecast, `level=[80, 98]`): SeasonalNaive, AutoETS, AutoARIMA, MSTL. The
quantile q > 0.5 is the upper bound of the 100(2q-1)% interval, q < 0.5 the lower bound of the
100(1-2q)% interval, 0.5 the mean forecast. Where statsforecast needs it: AutoETS and AutoARIMA
take the shortest season only when it is at most `MAX_ETS_ARIMA_SEASON` steps (non-seasonal
otherwise: both fit a seasonal state per step, which is slow and, for ETS, not supported
beyond 24), AutoARIMA trains on at most `MAX_ARIMA_TRAIN` samples, and MSTL runs only on
series with a season (its trend is a non-seasonal AutoETS). Missing samples (NaN) in a
training window are filled by linear interpolation for the baselines; missing actuals are left
out of every metric. Forecasts of non-negative series are clipped at 0 for every model.

voltpack models come from `voltpack.forecast.registry` (`forecaster_names`,
`make_forecaster`). Each is driven through the `Forecaster` protocol (fit, predict).

Metrics per model, series and horizon: MASE (scale: the seasonal naive error of each training
window, shortest season), sMAPE, pinball at 0.5/0.9/0.99 and their mean, coverage of the 80%
([q0.1, q0.9]) and 98% ([q0.01, q0.99]) intervals. Families aggregate series of different
units, so their pinball is the scaled pinball (divided by the same scale as MASE), averaged
over series and horizons.

Usage:
  python benchmarks/forecast_accuracy.py                 # all targets, into benchmarks/results
  python benchmarks/forecast_accuracy.py --quick         # fewer targets and windows (smoke run)
  python benchmarks/forecast_accuracy.py --processes 2   # series evaluated in 2 processes
  python benchmarks/forecast_accuracy.py --data-dir /path/to/data --out /tmp/results
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from _common import RESULTS_DIR, machine
from statsforecast import StatsForecast
from statsforecast.models import MSTL, AutoARIMA, AutoETS, SeasonalNaive

from voltpack.forecast.default_model import DEFAULT_MODEL, cross_family_scores
from voltpack.forecast.metrics import coverage, mase, pinball_loss, seasonal_naive_scale, smape
from voltpack.forecast.registry import forecaster_names, make_forecaster
from voltpack.forecast.series import FloatArray, TimeSeries
from voltpack.forecast.splits import rolling_origins
from voltpack.model.errors import ForecastError
from voltpack.sim.datasets import data_dir
from voltpack.sim.forecast_targets import build_targets

NAME = "forecast_accuracy"
QUANTILES = (0.01, 0.1, 0.5, 0.9, 0.99)
PINBALL_LEVELS = (0.5, 0.9, 0.99)
INTERVALS = {80: (0.1, 0.9), 98: (0.01, 0.99)}
HORIZONS = (1, 6, 24)
"""Lead times evaluated, in steps of each series (10 min, 1 h and 4 h at a 10-minute step)."""
WINDOWS, QUICK_WINDOWS = 8, 4
SPAN_FRACTION = 0.4
MIN_TRAIN = 48
TRAIN_CAP_MIN = 1000
"""Training window: the last max(TRAIN_CAP_MIN, 2 x the longest season + the shortest)
samples (MSTL needs two cycles of its longest season)."""
MAX_ETS_ARIMA_SEASON = 24
MAX_ARIMA_TRAIN = 500
BASELINES = ("SeasonalNaive", "AutoETS", "AutoARIMA", "MSTL")
ACCEPT_COVERAGE_POINTS = 3.0


@dataclass
class Scores:
    """Errors of one model on one series, pooled over windows, per horizon."""

    abs_scaled: dict[int, list[FloatArray]] = field(default_factory=dict)
    actual: dict[int, list[FloatArray]] = field(default_factory=dict)
    predicted: dict[int, list[FloatArray]] = field(default_factory=dict)  # [h, quantile]
    scale: dict[int, list[FloatArray]] = field(default_factory=dict)
    fit_s: float = 0.0
    notes: set[str] = field(default_factory=set)
    failed: str = ""

    def add(self, actual: FloatArray, predicted: FloatArray, scale: float) -> None:
        for h in HORIZONS:
            if h > actual.size:
                continue
            self.actual.setdefault(h, []).append(actual[:h])
            self.predicted.setdefault(h, []).append(predicted[:h])
            self.scale.setdefault(h, []).append(np.full(h, scale))

    def metrics(self, horizon: int) -> dict[str, float]:
        actual = np.concatenate(self.actual[horizon])
        predicted = np.concatenate(self.predicted[horizon])
        scale = np.concatenate(self.scale[horizon])
        median = predicted[:, QUANTILES.index(0.5)]
        out: dict[str, float] = {
            "mase": mase(actual / scale, median / scale, 1.0),
            "smape": smape(actual, median),
        }
        for q in PINBALL_LEVELS:
            column = predicted[:, QUANTILES.index(q)]
            out[f"pinball_{q}"] = pinball_loss(actual, column, q)
            out[f"scaled_pinball_{q}"] = pinball_loss(actual / scale, column / scale, q)
        out["pinball_mean"] = float(np.mean([out[f"pinball_{q}"] for q in PINBALL_LEVELS]))
        out["scaled_pinball_mean"] = float(
            np.mean([out[f"scaled_pinball_{q}"] for q in PINBALL_LEVELS])
        )
        for level, (low, high) in INTERVALS.items():
            out[f"coverage_{level}"] = 100.0 * coverage(
                actual, predicted[:, QUANTILES.index(low)], predicted[:, QUANTILES.index(high)]
            )
        return out


def train_cap(series: TimeSeries) -> int:
    """How many samples before an origin every model trains on."""
    if not series.seasons:
        return TRAIN_CAP_MIN
    return max(TRAIN_CAP_MIN, 2 * max(series.seasons) + min(series.seasons))


def filled(values: FloatArray) -> FloatArray:
    """Missing samples filled by linear interpolation (ends: the nearest value)."""
    present = np.isfinite(values)
    if present.all():
        return values
    index = np.arange(values.size)
    return np.interp(index, index[present], values[present])


# --- statsforecast baselines -------------------------------------------------------------------


def baseline_model(name: str, series: TimeSeries) -> tuple[Any, int] | None:
    """The statsforecast model for `name` on `series` and its training cap (None: n/a)."""
    shortest = min(series.seasons, default=1)
    season = shortest if shortest <= MAX_ETS_ARIMA_SEASON else 1
    if name == "SeasonalNaive":
        return SeasonalNaive(season_length=shortest), train_cap(series)
    if name == "AutoETS":
        return AutoETS(season_length=season), train_cap(series)
    if name == "AutoARIMA":
        return AutoARIMA(season_length=season), min(train_cap(series), MAX_ARIMA_TRAIN)
    if name == "MSTL" and series.seasons:
        trend = AutoETS(model="ZZN")
        return MSTL(season_length=list(series.seasons), trend_forecaster=trend), train_cap(series)
    return None


def baseline_forecast(model: Any, history: FloatArray, horizon: int) -> FloatArray:
    """[horizon, QUANTILES] from one statsforecast model fitted on `history`."""
    frame = pd.DataFrame({"unique_id": "s", "ds": np.arange(history.size), "y": filled(history)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = StatsForecast(models=[model], freq=1, n_jobs=1).forecast(
            df=frame, h=horizon, level=[80, 98]
        )
    alias = str(model)
    columns = {0.5: alias, 0.1: f"{alias}-lo-80", 0.9: f"{alias}-hi-80",
               0.01: f"{alias}-lo-98", 0.99: f"{alias}-hi-98"}  # fmt: skip
    values = np.column_stack([out[columns[q]].to_numpy(dtype=np.float64) for q in QUANTILES])
    return np.asarray(np.sort(values, axis=1), dtype=np.float64)


# --- the run -----------------------------------------------------------------------------------

Predictor = Callable[[TimeSeries, int], tuple[FloatArray, tuple[str, ...]]]


def lightgbm_params(name: str, threads: int) -> dict[str, Any]:
    """The registry parameters that set LightGBM's threads in models that contain it."""
    if name == "global_gbm":
        return {"threads": threads}
    if name == "ensemble":
        return {"gbm": {"threads": threads}}
    if name == "auto":
        return {"candidate_params": {"global_gbm": {"threads": threads}}}
    return {}


def voltpack_predictor(name: str, threads: int) -> Predictor:
    def predict(history: TimeSeries, horizon: int) -> tuple[FloatArray, tuple[str, ...]]:
        model = make_forecaster(name, **lightgbm_params(name, threads))
        model.fit(history)
        forecast = model.predict(horizon, QUANTILES)
        columns = [forecast.quantile(q) for q in QUANTILES]
        return np.column_stack(columns).astype(np.float64), tuple(forecast.notes)

    return predict


def evaluate_series(
    series: TimeSeries, windows: int, models: Sequence[str], threads: int = 2
) -> tuple[dict[str, Scores], dict[str, Any]]:
    """Every model on one series; the split used; last-window forecasts for the plot."""
    log = logging.getLogger(NAME)
    horizon = max(HORIZONS)
    min_train = max(MIN_TRAIN, 2 * max(series.seasons, default=0))
    origins = rolling_origins(len(series), horizon, windows, min_train, SPAN_FRACTION)
    season = min(series.seasons, default=1)
    scores: dict[str, Scores] = {}
    last: dict[str, Any] = {"origin": origins[-1], "forecasts": {}}
    for model_name in models:
        score = scores.setdefault(model_name, Scores())
        for origin in origins:
            actual = series.values[origin : origin + horizon]
            try:
                started = time.perf_counter()
                if model_name.startswith("sf:"):
                    built = baseline_model(model_name[3:], series)
                    if built is None:
                        score.failed = "not applicable (no season)"
                        break
                    model, cap = built
                    history = series.values[max(0, origin - cap) : origin]
                    predicted = baseline_forecast(model, history, horizon)
                else:
                    cap = train_cap(series)
                    start = max(0, origin - cap)
                    window = TimeSeries(
                        series.name, series.family, series.step_s, series.time_s(start),
                        series.values[start:origin], series.unit, series.seasons,
                        series.nonnegative,
                    )  # fmt: skip
                    predictor = voltpack_predictor(model_name, threads)
                    predicted, notes = predictor(window, horizon)
                    score.notes.update(notes)
                score.fit_s += time.perf_counter() - started
            except Exception as exc:  # a model failing on one series is a result, not a crash
                score.failed = f"{type(exc).__name__}: {exc}"[:300]
                log.warning("%s on %s failed: %s", model_name, series.name, score.failed)
                break
            if series.nonnegative:
                predicted = np.maximum(predicted, 0.0)
            scale = seasonal_naive_scale(filled(series.values[:origin]), season)
            score.add(actual, predicted, scale)
            if origin == origins[-1]:
                last["forecasts"][model_name] = predicted
    return scores, last


def aggregate(rows: list[dict[str, Any]], key: str) -> float:
    values = [r[key] for r in rows if r.get(key) is not None and math.isfinite(r[key])]
    return float(np.mean(values)) if values else float("nan")


def evaluate_all(
    targets: list[TimeSeries], windows: int, models: Sequence[str], processes: int
) -> list[tuple[dict[str, Scores], dict[str, Any]] | ForecastError]:
    """`evaluate_series` of every target, in `processes` worker processes (LightGBM then gets
    the machine's two cores shared out), each result or the `ForecastError` of its split."""
    threads = max(1, 2 // processes)
    jobs = [(series, windows, models, threads) for series in targets]
    if processes <= 1:
        return [_evaluate_or_error(job) for job in jobs]
    with ProcessPoolExecutor(processes) as pool:
        return list(pool.map(_evaluate_or_error, jobs))


def _evaluate_or_error(
    job: tuple[TimeSeries, int, Sequence[str], int],
) -> tuple[dict[str, Scores], dict[str, Any]] | ForecastError:
    series = job[0]
    logging.getLogger(NAME).info("%s (%d samples)", series.name, len(series))
    try:
        return evaluate_series(*job)
    except ForecastError as exc:
        return exc


def run(data: Path, quick: bool, processes: int) -> dict[str, Any]:
    started = time.perf_counter()
    targets = build_targets(data, quick=quick)
    build_s = time.perf_counter() - started
    voltpack_models = list(forecaster_names())
    models = [f"sf:{b}" for b in BASELINES] + voltpack_models
    windows = QUICK_WINDOWS if quick else WINDOWS
    per_series: list[dict[str, Any]] = []
    plots: dict[str, tuple[TimeSeries, dict[str, Any]]] = {}
    model_time_s: dict[str, float] = dict.fromkeys(models, 0.0)
    for series, result in zip(
        targets, evaluate_all(targets, windows, models, processes), strict=True
    ):
        if isinstance(result, ForecastError):
            per_series.append({"series": series.name, "family": series.family,
                               "skipped": str(result)})  # fmt: skip
            continue
        scores, last = result
        plots[series.name] = (series, last)
        for model_name, score in scores.items():
            model_time_s[model_name] += score.fit_s
            row: dict[str, Any] = {
                "series": series.name, "family": series.family, "model": model_name,
                "samples": len(series), "step_s": series.step_s, "seasons": list(series.seasons),
                "train_cap": train_cap(series), "fit_s": round(score.fit_s, 3),
                "notes": sorted(score.notes),
            }  # fmt: skip
            if score.failed:
                row["failed"] = score.failed
                per_series.append(row)
                continue
            for h in HORIZONS:
                if h in score.actual:
                    per_series.append({**row, "horizon": h, **score.metrics(h)})
    families = summarize_families(per_series, models)
    return {
        "targets": len(targets),
        "build_targets_s": round(build_s, 1),
        "windows": windows,
        "span_fraction": SPAN_FRACTION,
        "processes": processes,
        "horizons_steps": list(HORIZONS),
        "quantiles": list(QUANTILES),
        "voltpack_models": voltpack_models,
        "registry": "voltpack.forecast.registry",
        "model_time_s": {k: round(v, 1) for k, v in model_time_s.items()},
        "families": families,
        "default_model": default_model_report(families),
        "per_series": per_series,
        "runtime_s": round(time.perf_counter() - started, 1),
        "_plots": plots,
    }


def summarize_families(rows: list[dict[str, Any]], models: Sequence[str]) -> dict[str, Any]:
    """Per family: each model's means over series and horizons, the best baseline, the best
    voltpack model and the acceptance check."""
    out: dict[str, Any] = {}
    for family in sorted({r["family"] for r in rows}):
        table: dict[str, dict[str, float]] = {}
        for model_name in models:
            scored = [r for r in rows if r["family"] == family and r.get("model") == model_name
                      and "horizon" in r]  # fmt: skip
            if not scored:
                continue
            keys = ("mase", "smape", "scaled_pinball_0.5", "scaled_pinball_0.9",
                    "scaled_pinball_0.99", "scaled_pinball_mean", "coverage_80",
                    "coverage_98")  # fmt: skip
            table[model_name] = {k: aggregate(scored, k) for k in keys}
            table[model_name]["series"] = len({r["series"] for r in scored})
        # a best model must have scored every series of the family (MSTL needs a season), so
        # the best baseline and the best voltpack model are compared on the same series
        everywhere = len({r["series"] for r in rows if r["family"] == family and "horizon" in r})
        baselines = {m: v for m, v in table.items()
                     if m.startswith("sf:") and v["series"] == everywhere}  # fmt: skip
        ours = {m: v for m, v in table.items()
                if not m.startswith("sf:") and v["series"] == everywhere}  # fmt: skip
        best_baseline = min(baselines, key=lambda m: baselines[m]["scaled_pinball_mean"],
                            default=None)  # fmt: skip
        best_ours = min(ours, key=lambda m: ours[m]["scaled_pinball_mean"], default=None)
        verdict: dict[str, Any] = {"best_baseline": best_baseline, "best_voltpack": best_ours}
        if best_baseline and best_ours:
            b = baselines[best_baseline]
            checks = {m: acceptance(v, b) for m, v in ours.items()}
            verdict.update(checks[best_ours])
            # every voltpack model that alone beats the best baseline with calibrated intervals
            verdict["accepted_models"] = [m for m, c in checks.items() if c["accepted"]]
        out[family] = {"models": table, **verdict}
    return out


def default_model_report(families: dict[str, Any]) -> dict[str, Any]:
    """The model best across families (`voltpack.forecast.default_model`), and the shipped
    default's own result per family against that family's best baseline."""
    scores = cross_family_scores(families)
    per_family: dict[str, Any] = {}
    for family, summary in families.items():
        baseline = summary.get("best_baseline")
        ours = summary["models"].get(DEFAULT_MODEL)
        if baseline is None or ours is None:
            continue
        base = summary["models"][baseline]
        per_family[family] = {
            "best_baseline": baseline,
            "baseline": {k: base[k] for k in ("scaled_pinball_mean", "coverage_80", "coverage_98")},
            "default": {k: ours[k] for k in ("scaled_pinball_mean", "coverage_80", "coverage_98")},
            "ratio": ours["scaled_pinball_mean"] / base["scaled_pinball_mean"],
            **acceptance(ours, base),
        }
    passing_everywhere = [
        m for m in {m for s in families.values() for m in s.get("accepted_models", [])}
        if all(m in s.get("accepted_models", []) for s in families.values())
    ]  # fmt: skip
    return {
        "rule": "lowest worst-family ratio of mean scaled pinball to the family's best baseline "
        "(ties: lowest mean ratio)",
        "best_across_families": scores[0].model if scores else None,
        "default": DEFAULT_MODEL,
        "scores": [
            {"model": s.model, "ratios": s.ratios, "worst": s.worst, "mean": s.mean} for s in scores
        ],
        "default_per_family": per_family,
        "models_passing_every_family": sorted(passing_everywhere),
    }


def acceptance(ours: dict[str, float], baseline: dict[str, float]) -> dict[str, bool]:
    """Issue 9's test of one model's family figures against the best baseline's."""
    checks = {
        "beats_best_baseline": ours["scaled_pinball_mean"] < baseline["scaled_pinball_mean"],
        "coverage_80_ok": abs(ours["coverage_80"] - 80) <= ACCEPT_COVERAGE_POINTS,
        "coverage_98_ok": abs(ours["coverage_98"] - 98) <= ACCEPT_COVERAGE_POINTS,
    }
    return {**checks, "accepted": all(checks.values())}


# --- report ------------------------------------------------------------------------------------


def markdown(figures: dict[str, Any]) -> str:
    lines = [
        "# Forecast accuracy",
        "",
        f"{figures['targets']} targets (built in {figures['build_targets_s']} s), "
        f"{figures['windows']} rolling-origin windows of {max(HORIZONS)} steps spread over the "
        f"last {figures['span_fraction']:.0%} of each series, lead times "
        f"{', '.join(map(str, HORIZONS))} steps; total {figures['runtime_s']} s in "
        f"{figures['processes']} process(es); fit s below is summed over processes.",
        f"voltpack models: {', '.join(figures['voltpack_models']) or 'none'} "
        f"({figures['registry']}).",
        "",
        "Family figures are means over series and lead times; pinball is scaled by each "
        "training window's seasonal-naive error (as MASE), so series of different units "
        "can be averaged. Coverage in percent (nominal 80 and 98).",
        "",
    ]
    for family, summary in figures["families"].items():
        lines += [f"## {family}", "",
                  "| model | series | MASE | sMAPE % | pinball 0.5 | 0.9 | 0.99 | mean | "
                  "cover 80 | cover 98 | fit s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for model_name, m in summary["models"].items():
            lines.append(
                f"| {model_name} | {m['series']} | {m['mase']:.3f} | {m['smape']:.1f} | "
                f"{m['scaled_pinball_0.5']:.3f} | {m['scaled_pinball_0.9']:.3f} | "
                f"{m['scaled_pinball_0.99']:.3f} | **{m['scaled_pinball_mean']:.3f}** | "
                f"{m['coverage_80']:.1f} | {m['coverage_98']:.1f} | "
                f"{figures['model_time_s'].get(model_name, float('nan')):.1f} |"
            )
        lines.append("")
        lines.append(f"Best baseline: {summary['best_baseline']}; best voltpack model: "
                     f"{summary['best_voltpack'] or 'none yet'}"
                     + (f"; accepted: {summary['accepted']}" if "accepted" in summary else "")
                     + "; voltpack models that beat the best baseline with both coverages "
                     f"within {ACCEPT_COVERAGE_POINTS:g} points: "
                     + (", ".join(summary.get("accepted_models", [])) or "none")
                     + ".")  # fmt: skip
        lines.append("")
    lines += default_model_markdown(figures["default_model"], list(figures["families"]))
    lines += [f"## Per series (lead time {HORIZONS[-1]}, mean scaled pinball, coverage)",
              "", "| series | samples | model | MASE | pinball mean | cover 80 | cover 98 |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in figures["per_series"]:
        if "skipped" in r:
            lines.append(f"| {r['series']} | | skipped: {r['skipped']} | | | | |")
        elif "failed" in r:
            lines.append(f"| {r['series']} | {r['samples']} | {r['model']}: {r['failed']} "
                         "| | | | |")  # fmt: skip
        elif r["horizon"] == HORIZONS[-1]:
            lines.append(
                f"| {r['series']} | {r['samples']} | {r['model']} | {r['mase']:.3f} | "
                f"{r['scaled_pinball_mean']:.3f} | {r['coverage_80']:.0f} | "
                f"{r['coverage_98']:.0f} |"
            )
    return "\n".join(lines) + "\n"


def default_model_markdown(report: dict[str, Any], families: list[str]) -> list[str]:
    """The section on the default model: the ranking across families and its own results."""
    best, default = report["best_across_families"], report["default"]
    lines = [
        "## The default model (CLI, API, operator)",
        "",
        f"Best across families: the {report['rule']}. Ratios below 1 beat the baseline.",
        "",
        "| model | " + " | ".join(families) + " | worst | mean |",
        "|---|" + "---|" * (len(families) + 2),
    ]
    for score in report["scores"]:
        cells = [f"{score['ratios'][f]:.3f}" for f in families]
        lines.append(f"| {score['model']} | {' | '.join(cells)} | **{score['worst']:.3f}** | "
                     f"{score['mean']:.3f} |")  # fmt: skip
    agree = "the same model" if best == default else f"**not** the benchmark's best ({best})"
    lines += [
        "",
        f"Best across families: {best}. The shipped default "
        f"(`voltpack.forecast.default_model.DEFAULT_MODEL`) is `{default}`, {agree}. Its own "
        "result per family (mean scaled pinball, coverage 80 / 98) against the family's best "
        "baseline:",
        "",
        "| family | best baseline | " + default + " | ratio | passes (beats it, both "
        f"coverages within {ACCEPT_COVERAGE_POINTS:g} points) |",
        "|---|---|---|---|---|",
    ]
    for family, row in report["default_per_family"].items():
        base, ours = row["baseline"], row["default"]
        checks = (("pinball", "beats_best_baseline"), ("80% coverage", "coverage_80_ok"),
                  ("98% coverage", "coverage_98_ok"))  # fmt: skip
        why = [name for name, key in checks if not row[key]]
        lines.append(
            f"| {family} | {row['best_baseline']} {base['scaled_pinball_mean']:.3f} "
            f"({base['coverage_80']:.1f} / {base['coverage_98']:.1f}) | "
            f"{ours['scaled_pinball_mean']:.3f} ({ours['coverage_80']:.1f} / "
            f"{ours['coverage_98']:.1f}) | {row['ratio']:.3f} | "
            + ("yes" if row["accepted"] else f"no ({', '.join(why)})")
            + " |"
        )
    everywhere = report["models_passing_every_family"]
    lines += [
        "",
        f"Models that pass every family: {', '.join(everywhere)}."
        if everywhere
        else "No single voltpack model passes every family.",
        "",
    ]
    return lines


def plot(figures: dict[str, Any], path: Path) -> None:
    """One panel per family: its first series' last test window, the family's best model."""
    plt.switch_backend("Agg")
    plots = figures["_plots"]
    chosen: dict[str, str] = {}
    for name, (series, _) in plots.items():
        chosen.setdefault(series.family, name)
    fig, axes = plt.subplots(len(chosen), 1, figsize=(10, 3.2 * len(chosen)), squeeze=False)
    for ax, (family, name) in zip(axes[:, 0], sorted(chosen.items()), strict=True):
        series, last = plots[name]
        summary = figures["families"].get(family, {})
        best = summary.get("best_voltpack") or summary.get("best_baseline")
        predicted = last["forecasts"].get(best)
        origin, horizon = last["origin"], max(HORIZONS)
        back = min(origin, 4 * horizon)
        hours = (np.arange(origin - back, origin + horizon) - origin) * series.step_s / 3600
        ax.plot(hours, series.values[origin - back : origin + horizon], color="black", lw=1,
                label="actual")  # fmt: skip
        if predicted is not None:
            ahead = hours[back:]
            ax.fill_between(ahead, predicted[:, 0], predicted[:, 4], alpha=0.2, label="98%")
            ax.fill_between(ahead, predicted[:, 1], predicted[:, 3], alpha=0.35, label="80%")
            ax.plot(ahead, predicted[:, 2], lw=1.5, label=f"{best} median")
        ax.set_title(f"{family}: {name}")
        ax.set_xlabel("hours from the forecast origin")
        ax.set_ylabel(series.unit)
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def rerender(json_path: Path) -> None:
    """Re-summarise a saved run's per-series rows (same figures, current summary code)."""
    document = json.loads(json_path.read_text())
    models = list(document["model_time_s"])
    document["families"] = summarize_families(document["per_series"], models)
    document["default_model"] = default_model_report(document["families"])
    json_path.write_text(json.dumps(document, indent=1, default=float) + "\n")
    json_path.with_suffix(".md").write_text(markdown(document))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="voltpack's data/ layout")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder for the results")
    parser.add_argument("--quick", action="store_true", help="fewer targets and windows")
    parser.add_argument("--processes", type=int, default=1, help="series evaluated in parallel")
    parser.add_argument("--rerender", type=Path, default=None, help="re-summarise a saved JSON")
    args = parser.parse_args()
    if args.rerender:
        rerender(args.rerender)
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("statsforecast").setLevel(logging.ERROR)
    figures = run(args.data_dir or data_dir(), args.quick, max(1, args.processes))
    args.out.mkdir(parents=True, exist_ok=True)
    stem = NAME + ("_quick" if args.quick else "")
    plot(figures, args.out / f"{stem}.png")
    figures.pop("_plots")
    document = {"benchmark": NAME, "quick": args.quick, "machine": machine(), **figures}
    (args.out / f"{stem}.json").write_text(json.dumps(document, indent=1, default=float) + "\n")
    text = markdown(figures)
    (args.out / f"{stem}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
