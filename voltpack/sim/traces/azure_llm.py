"""Loader for the Azure LLM inference trace 2023 and multi-day request streams built from it.

Files (Azure/AzurePublicDataset, Splitwise ISCA'24; `data/azure-llm-2023/`):
`TIMESTAMP,ContextTokens,GeneratedTokens`, one request per row, timestamps such as
`2023-11-16 18:17:03.9799600`. A malformed row raises TraceFormatError naming the file, the
line and the field.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from voltpack.model.csv_rows import csv_rows
from voltpack.model.errors import InvalidRequestError, TraceFormatError
from voltpack.sim.datasets import data_dir

AZURE_LLM_FOLDER = "azure-llm-2023"
CODE_TRACE = "AzureLLMInferenceTrace_code.csv"
CONVERSATION_TRACE = "AzureLLMInferenceTrace_conv.csv"
COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
SECONDS_PER_DAY = 86_400.0

DEFAULT_PEAK_TO_TROUGH = 2.0
"""Default diurnal peak/trough request-rate ratio: a moderate day-night swing for an
interactive service that keeps serving at night. A scenario assumption (the one-hour 2023
trace cannot show a daily cycle), to revisit against a week-long production trace."""
DEFAULT_PEAK_HOUR = 14.0
"""Default hour of day (0-24, from the stream's start at midnight) of the rate's peak."""

_TIMESTAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?")


class LlmRequests(NamedTuple):
    """Requests as parallel arrays, in arrival order."""

    arrival_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]


def azure_llm_dir() -> Path:
    """The folder of the Azure LLM inference trace files in voltpack's data folder."""
    return data_dir() / AZURE_LLM_FOLDER


def _timestamp_s(path: Path, line: int, text: str) -> tuple[int, float]:
    """Whole seconds since 0001-01-01 (exact) and the fraction of a second."""
    match = _TIMESTAMP.fullmatch(text.strip())
    if match is None:
        raise TraceFormatError(
            f"{path}:{line}: field TIMESTAMP={text!r} is not a time like 2023-11-16 18:17:03.98"
        )
    year, month, day, hour, minute, second, fraction = match.groups()
    try:
        whole = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
    except ValueError as exc:
        raise TraceFormatError(f"{path}:{line}: field TIMESTAMP={text!r}: {exc}") from None
    seconds = whole.toordinal() * 86_400 + whole.hour * 3600 + whole.minute * 60 + whole.second
    return seconds, float(f"0.{fraction}") if fraction else 0.0


def _token_field(path: Path, line: int, field: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise TraceFormatError(f"{path}:{line}: field {field}={text!r} is not an integer") from None
    if value < 0:
        raise TraceFormatError(f"{path}:{line}: field {field}={value} must not be negative")
    return value


def load_azure_llm_trace(path: Path) -> LlmRequests:
    """Read one trace CSV; arrival_s is relative to the first request, rows sorted by time."""
    seconds: list[int] = []
    fractions: list[float] = []
    prompts: list[int] = []
    outputs: list[int] = []
    for line, row in csv_rows(path, COLUMNS):
        whole, fraction = _timestamp_s(path, line, row["TIMESTAMP"])
        seconds.append(whole)
        fractions.append(fraction)
        prompts.append(_token_field(path, line, "ContextTokens", row["ContextTokens"]))
        outputs.append(_token_field(path, line, "GeneratedTokens", row["GeneratedTokens"]))
    if not seconds:
        raise TraceFormatError(f"{path}: holds no requests")
    # subtract the first whole second in integers so sub-millisecond fractions survive
    first = min(seconds)
    relative = np.asarray([whole - first for whole in seconds], dtype=np.float64)
    arrival = relative + np.asarray(fractions, dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    arrival = arrival[order] - arrival[order[0]]
    return LlmRequests(
        arrival_s=arrival,
        prompt_tokens=np.asarray(prompts, dtype=np.int64)[order],
        output_tokens=np.asarray(outputs, dtype=np.int64)[order],
    )


def trace_span_s(trace: LlmRequests) -> float:
    """The time one replay of the trace covers: its arrivals plus one mean gap after the last
    request, so replayed blocks join without a seam (1 s for a single request)."""
    count = trace.arrival_s.size
    last_s = float(trace.arrival_s[-1]) if count else 0.0
    return last_s * count / (count - 1) if count > 1 and last_s > 0 else 1.0


def trace_rate_per_s(trace: LlmRequests) -> float:
    """Mean requests per second over the trace's span."""
    return trace.arrival_s.size / trace_span_s(trace)


def diurnal_rate_per_s(
    time_s: NDArray[np.float64],
    mean_rate_per_s: float,
    peak_to_trough: float = DEFAULT_PEAK_TO_TROUGH,
    peak_hour: float = DEFAULT_PEAK_HOUR,
) -> NDArray[np.float64]:
    """Sinusoidal request rate with period one day, mean `mean_rate_per_s`, and the given
    peak/trough ratio, peaking at `peak_hour` (time 0 is midnight)."""
    amplitude = (peak_to_trough - 1.0) / (peak_to_trough + 1.0)
    angle = 2.0 * np.pi * (time_s - peak_hour * 3600.0) / SECONDS_PER_DAY
    return np.asarray(mean_rate_per_s * (1.0 + amplitude * np.cos(angle)), dtype=np.float64)


def diurnal_request_stream(
    trace: LlmRequests,
    duration_s: float,
    mean_rate_per_s: float,
    rng: np.random.Generator,
    peak_to_trough: float = DEFAULT_PEAK_TO_TROUGH,
    peak_hour: float = DEFAULT_PEAK_HOUR,
) -> LlmRequests:
    """One server's arrivals over `duration_s`, built by replaying the trace hour.

    Each trace-length block of time gets `k` copies of the trace, each circularly shifted by
    its own random offset (k = enough copies to reach the peak rate); the superposed arrivals
    are then thinned, each kept with probability rate(t) / (k * trace rate), where rate(t) is
    `diurnal_rate_per_s`. Request sizes stay paired as in the trace. Same generator state,
    same stream; give each server its own generator (e.g. `np.random.default_rng([seed, i])`).
    """
    if duration_s <= 0 or mean_rate_per_s <= 0 or peak_to_trough < 1:
        raise InvalidRequestError(
            "duration_s and mean_rate_per_s must be positive and peak_to_trough >= 1"
        )
    count = trace.arrival_s.size
    if count == 0:
        raise InvalidRequestError("the trace holds no requests to replay")
    span_s = trace_span_s(trace)
    trace_rate = count / span_s
    peak_rate = mean_rate_per_s * 2.0 * peak_to_trough / (peak_to_trough + 1.0)
    copies = max(1, math.ceil(peak_rate / trace_rate))
    blocks = math.ceil(duration_s / span_s)
    offsets = rng.uniform(0.0, span_s, size=(blocks, copies))
    shifted = (trace.arrival_s[np.newaxis, np.newaxis, :] + offsets[..., np.newaxis]) % span_s
    arrival = (shifted + (np.arange(blocks) * span_s)[:, np.newaxis, np.newaxis]).ravel()
    source = np.broadcast_to(np.arange(count), (blocks, copies, count)).ravel()
    keep_probability = diurnal_rate_per_s(arrival, mean_rate_per_s, peak_to_trough, peak_hour) / (
        copies * trace_rate
    )
    keep = (rng.random(arrival.size) < keep_probability) & (arrival < duration_s)
    arrival, source = arrival[keep], source[keep]
    order = np.argsort(arrival, kind="stable")
    return LlmRequests(
        arrival_s=arrival[order],
        prompt_tokens=trace.prompt_tokens[source[order]],
        output_tokens=trace.output_tokens[source[order]],
    )
