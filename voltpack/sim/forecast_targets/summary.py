"""A table of forecasting targets for people (what the CLI prints): one row per series."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from voltpack.forecast.series import TimeSeries


def target_rows(targets: Sequence[TimeSeries]) -> list[dict[str, object]]:
    """Name, family, unit, step, length, span, seasons, mean, peak and missing share of each
    series (NaN-free figures: a series of only missing samples shows None)."""
    rows: list[dict[str, object]] = []
    for series in targets:
        present = series.values[np.isfinite(series.values)]
        rows.append(
            {
                "name": series.name,
                "family": series.family,
                "unit": series.unit,
                "step_s": series.step_s,
                "samples": len(series),
                "span_days": round(len(series) * series.step_s / 86_400, 2),
                "seasons": list(series.seasons),
                "mean": float(present.mean()) if present.size else None,
                "peak": float(present.max()) if present.size else None,
                "missing_share": round(1 - present.size / max(1, len(series)), 4),
            }
        )
    return rows
