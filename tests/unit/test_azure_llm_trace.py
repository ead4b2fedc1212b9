"""Azure LLM trace loader (file:line: field errors) and the diurnal request stream."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voltpack.model import InvalidRequestError, TraceFormatError
from voltpack.sim.traces.azure_llm import (
    CODE_TRACE,
    CONVERSATION_TRACE,
    LlmRequests,
    azure_llm_dir,
    diurnal_rate_per_s,
    diurnal_request_stream,
    load_azure_llm_trace,
)

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
GOOD = "2023-11-16 18:17:03.9799600,4808,10"


def write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def error_at(path: Path, line: int) -> str:
    with pytest.raises(TraceFormatError) as error:
        load_azure_llm_trace(path)
    message = str(error.value)
    assert message.startswith(f"{path}:{line}:"), message
    return message


@pytest.fixture(scope="module")
def conversation() -> LlmRequests:
    return load_azure_llm_trace(azure_llm_dir() / CONVERSATION_TRACE)


@pytest.mark.parametrize(("name", "count"), [(CODE_TRACE, 8819), (CONVERSATION_TRACE, 19366)])
def test_shipped_traces_load(name: str, count: int) -> None:
    trace = load_azure_llm_trace(azure_llm_dir() / name)
    assert trace.arrival_s.size == trace.prompt_tokens.size == trace.output_tokens.size == count
    assert trace.arrival_s[0] == 0.0
    assert np.all(np.diff(trace.arrival_s) >= 0)
    assert 3300 < trace.arrival_s[-1] < 3600
    assert trace.prompt_tokens.min() > 0 and trace.output_tokens.min() > 0


def test_seven_digit_fractions_and_sorting(tmp_path: Path) -> None:
    path = write(
        tmp_path, [HEADER, "2023-11-16 18:17:04.0319600,3180,8", GOOD, "2023-11-16 18:18:00,1,2"]
    )
    trace = load_azure_llm_trace(path)
    assert trace.arrival_s == pytest.approx([0.0, 0.052, 56.02004])
    assert trace.prompt_tokens.tolist() == [4808, 3180, 1]
    assert trace.output_tokens.tolist() == [10, 8, 2]


def test_midnight_crossing(tmp_path: Path) -> None:
    path = write(tmp_path, [HEADER, "2023-11-16 23:59:59.5,1,1", "2023-11-17 00:00:00.5,1,1"])
    assert load_azure_llm_trace(path).arrival_s == pytest.approx([0.0, 1.0])


def test_bad_timestamp_names_line_and_field(tmp_path: Path) -> None:
    message = error_at(write(tmp_path, [HEADER, GOOD, "yesterday,1,2"]), 3)
    assert "TIMESTAMP='yesterday'" in message


def test_impossible_date_names_line_and_field(tmp_path: Path) -> None:
    message = error_at(write(tmp_path, [HEADER, "2023-02-30 10:00:00,1,2"]), 2)
    assert "TIMESTAMP" in message


def test_non_integer_tokens_name_line_and_field(tmp_path: Path) -> None:
    message = error_at(write(tmp_path, [HEADER, GOOD, GOOD, "2023-11-16 18:17:05,12.5,3"]), 4)
    assert "ContextTokens='12.5' is not an integer" in message


def test_negative_tokens_name_line_and_field(tmp_path: Path) -> None:
    message = error_at(write(tmp_path, [HEADER, "2023-11-16 18:17:05,12,-3"]), 2)
    assert "GeneratedTokens=-3 must not be negative" in message


def test_missing_field_is_named(tmp_path: Path) -> None:
    message = error_at(write(tmp_path, [HEADER, "2023-11-16 18:17:05,12"]), 2)
    assert "field GeneratedTokens is missing" in message


def test_missing_column_in_header(tmp_path: Path) -> None:
    message = error_at(write(tmp_path, ["TIMESTAMP,ContextTokens", "2023-11-16 18:17:05,12"]), 1)
    assert "GeneratedTokens" in message


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="holds no requests"):
        load_azure_llm_trace(write(tmp_path, [HEADER]))
    with pytest.raises(TraceFormatError, match="cannot open"):
        load_azure_llm_trace(tmp_path / "absent.csv")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes(HEADER.encode() + b"\n\xff\xfe,1,2\n")
    with pytest.raises(TraceFormatError, match="not UTF-8"):
        load_azure_llm_trace(path)


# --- diurnal stream --------------------------------------------------------------------------


def test_stream_is_deterministic_given_the_seed(conversation: LlmRequests) -> None:
    first = diurnal_request_stream(conversation, 7200, 1.0, np.random.default_rng(5))
    again = diurnal_request_stream(conversation, 7200, 1.0, np.random.default_rng(5))
    other = diurnal_request_stream(conversation, 7200, 1.0, np.random.default_rng(6))
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(a, b)
    assert not np.array_equal(first.arrival_s[:50], other.arrival_s[:50])


@pytest.mark.parametrize("rate", [0.5, 12.0])
def test_stream_hits_the_mean_rate_over_whole_days(conversation: LlmRequests, rate: float) -> None:
    stream = diurnal_request_stream(conversation, 86_400, rate, np.random.default_rng(1))
    assert stream.arrival_s.size / 86_400 == pytest.approx(rate, rel=0.03)
    assert np.all(np.diff(stream.arrival_s) >= 0)
    assert stream.arrival_s.min() >= 0 and stream.arrival_s.max() < 86_400


def test_stream_follows_the_diurnal_curve(conversation: LlmRequests) -> None:
    stream = diurnal_request_stream(
        conversation, 86_400, 2.0, np.random.default_rng(2), peak_to_trough=3.0, peak_hour=14
    )
    hourly = np.bincount((stream.arrival_s // 3600).astype(int), minlength=24)
    assert hourly.argmax() in range(12, 17)
    assert hourly.argmin() in (0, 1, 2, 3, 4)
    assert hourly[14] / hourly[2] == pytest.approx(3.0, rel=0.15)
    rate = diurnal_rate_per_s(np.array([14 * 3600.0, 2 * 3600.0]), 2.0, 3.0, 14)
    assert rate == pytest.approx([3.0, 1.0])


def test_stream_keeps_request_sizes_paired(conversation: LlmRequests) -> None:
    stream = diurnal_request_stream(conversation, 3600, 1.0, np.random.default_rng(3))
    pairs = set(
        zip(conversation.prompt_tokens.tolist(), conversation.output_tokens.tolist(), strict=True)
    )
    assert (
        set(zip(stream.prompt_tokens.tolist(), stream.output_tokens.tolist(), strict=True)) <= pairs
    )


def test_stream_rejects_nonsense(conversation: LlmRequests) -> None:
    with pytest.raises(InvalidRequestError):
        diurnal_request_stream(conversation, 3600, -1.0, np.random.default_rng(0))
    with pytest.raises(InvalidRequestError):
        diurnal_request_stream(
            conversation, 3600, 1.0, np.random.default_rng(0), peak_to_trough=0.5
        )
