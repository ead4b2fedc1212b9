"""Request-rate targets: inference requests per second, averaged per window."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from voltpack.forecast.series import TimeSeries
from voltpack.sim.forecast_targets.windows import (
    FloatArray,
    sampling_interval_s,
    seasons_for,
    step_label,
    window_count,
    window_sums,
)
from voltpack.sim.traces.azure_llm import load_azure_llm_trace
from voltpack.sim.traces.genai import load_qps

FAMILY = "request_rate"
UNIT = "requests_per_s"
ALL = "all"


def _slug(text: str) -> str:
    """A key fit for a series name: "Generative Requests" -> "generative"."""
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return words.removesuffix("-requests") or "unnamed"


def _series(source: str, key: str, step_s: float, start_s: float, values: FloatArray) -> TimeSeries:
    return TimeSeries(
        name=f"{source}/{FAMILY}/{key}/{step_label(step_s)}", family=FAMILY, step_s=step_s,
        start_s=start_s, values=values, unit=UNIT, seasons=seasons_for(step_s, values.size),
    )  # fmt: skip


def genai_request_rate(path: Path, step_s: float, source: str = "genai") -> list[TimeSeries]:
    """Gateway QPS summed over containers per window: total and per request type.

    Each raw sample is one container's QPS over one sampling period (inferred as the median
    gap between distinct timestamps), so a window's rate is the sum of its samples times the
    period over the window length; a container with no sample in a period served nothing.
    Windows start at the first sample (rounded down to a step); the last, partial one is left
    out. Times are the trace's anonymised timestamps.
    """
    samples = load_qps(path)
    period_s = sampling_interval_s(samples.time_s)
    start_s = math.floor(float(samples.time_s.min()) / step_s) * step_s
    windows = window_count(start_s, float(samples.time_s.max()) + period_s, step_s)
    kinds = np.asarray([_slug(k) for k in samples.request_type], dtype=object)

    def rate(mask: np.ndarray) -> FloatArray:
        sums = window_sums(samples.time_s[mask], samples.qps[mask], start_s, step_s, windows)
        return np.asarray(sums * period_s / step_s, dtype=np.float64)

    out = [_series(source, ALL, step_s, start_s, rate(np.ones(kinds.size, dtype=bool)))]
    out += [_series(source, k, step_s, start_s, rate(kinds == k)) for k in sorted(set(kinds))]
    return out


def azure_request_rate(path: Path, step_s: float, source: str = "azure-llm-2023") -> TimeSeries:
    """Arrivals per second of one Azure LLM trace file, per window from its first request
    (keyed by the file's last `_` part: `code`, `conv`); the last, partial window is left out."""
    trace = load_azure_llm_trace(path)
    windows = window_count(0.0, float(trace.arrival_s[-1]), step_s)
    counts = window_sums(trace.arrival_s, np.ones_like(trace.arrival_s), 0.0, step_s, windows)
    key = path.stem.rsplit("_", 1)[-1].lower()
    return _series(source, key, step_s, 0.0, np.asarray(counts / step_s, dtype=np.float64))
