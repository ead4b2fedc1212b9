"""How well voltpack's inference profile model predicts measured points it was not fitted on.

Two measures over a profile file in Splitwise's `perf_model.csv` format (default: the shipped
`data/splitwise-perf/perf_model.csv`, Splitwise ISCA'24):

- leave one out: every measured setting predicted from the rest of its configuration
  (the profiles voltpack plans with on measured GPU types); goal: median error within 10%;
- held-out GPU type: every setting of a GPU type predicted by the shared roofline fitted on
  the other types only: the error an extrapolated type (L4, A10, L40S, H200, B200, MI300X)
  can expect.

Usage:
  python benchmarks/inference_profiles.py [--measurements FILE] [--out DIR]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _common import save

from voltpack.perf.inference_measurements import (
    default_measurements_path,
    load_measurements,
    prefill_settings,
)
from voltpack.perf.inference_validation import Prediction, held_out_gpu_types, leave_one_out

GOAL_MEDIAN_PERCENT = 10.0


def summarise(
    predictions: Sequence[Prediction], group: Callable[[Prediction], str]
) -> list[dict[str, Any]]:
    """Median, 90th percentile and largest relative error (%) per group."""
    grouped: dict[str, list[float]] = defaultdict(list)
    for prediction in predictions:
        grouped[group(prediction)].append(100.0 * prediction.relative_error)
    return [
        {
            "group": name,
            "points": len(errors),
            "median_error_pct": round(float(np.median(errors)), 2),
            "p90_error_pct": round(float(np.percentile(errors, 90)), 2),
            "max_error_pct": round(float(np.max(errors)), 2),
        }
        for name, errors in sorted(grouped.items())
    ]


def _type_label(prediction: Prediction) -> str:
    key = prediction.key
    cap = "" if key.power_cap_ratio >= 1 else f" (capped {key.power_cap_ratio:g})"
    return f"{key.gpu_type}{cap} {prediction.phase}"


def _table(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| group | points | median % | p90 % | max % |", "|---|---|---|---|---|"]
    lines += [
        f"| {r['group']} | {r['points']} | {r['median_error_pct']} | {r['p90_error_pct']} | "
        f"{r['max_error_pct']} |"
        for r in rows
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--measurements", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    path = args.measurements or default_measurements_path()
    points = load_measurements(path)
    _, excluded = prefill_settings(points)
    loo = leave_one_out(points)
    held = held_out_gpu_types(points)
    loo_median = float(np.median([100 * p.relative_error for p in loo]))
    held_median = float(np.median([100 * p.relative_error for p in held])) if held else None
    figures = {
        "settings": {"measurements": str(path), "goal_median_error_pct": GOAL_MEDIAN_PERCENT},
        "leave_one_out": {
            "median_error_pct": round(loo_median, 2),
            "meets_goal": loo_median <= GOAL_MEDIAN_PERCENT,
            "per_gpu_type": summarise(loo, _type_label),
            "per_configuration": summarise(loo, lambda p: f"{p.key.label()} {p.phase}"),
        },
        "held_out_gpu_type": {
            "median_error_pct": None if held_median is None else round(held_median, 2),
            "per_gpu_type": summarise(held, _type_label),
        },
        "excluded_settings": [e.reason for e in excluded],
    }
    markdown = "\n".join(
        [
            "# Inference profile model: error on points it was not fitted on",
            "",
            f"Measurements: `{path.name}` ({len(points)} settings). Goal: median leave-one-out "
            f"error within {GOAL_MEDIAN_PERCENT:g}%.",
            "",
            f"## Leave one out: median {loo_median:.1f}% over {len(loo)} predictions "
            f"({'meets' if loo_median <= GOAL_MEDIAN_PERCENT else 'misses'} the goal)",
            "",
            _table(figures["leave_one_out"]["per_gpu_type"]),
            "",
            "## Held-out GPU type (what an extrapolated type can expect)"
            + ("" if held_median is None else f": median {held_median:.1f}%"),
            "",
            _table(figures["held_out_gpu_type"]["per_gpu_type"]),
            "",
            "Left out of every fit as measurement anomalies:",
            "",
            *[f"- {reason}" for reason in figures["excluded_settings"]],
            "",
        ]
    )
    save("inference_profiles", figures, markdown, args.out)


if __name__ == "__main__":
    main()
