"""ThroughputTable: Gavel's measured throughputs, estimates for unmeasured cells, online EMA."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.model.errors import TraceFormatError
from voltpack.model.gpu_sku import default_catalog
from voltpack.perf.throughput_table import (
    ONLINE_EMA_ALPHA,
    ThroughputTable,
    load_gavel_throughputs,
)
from voltpack.sim.datasets import data_dir

THROUGHPUTS = data_dir() / "gavel" / "simulation_throughputs.json"
MEASURED_MODELS = ("k80", "p100", "v100")


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(THROUGHPUTS.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture(scope="module")
def table() -> ThroughputTable:
    return load_gavel_throughputs(THROUGHPUTS)


def _write(tmp_path: Path, content: object, name: str = "throughputs.json") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return path


# --- measured cells -------------------------------------------------------------------------


def test_every_measured_cell_equals_the_json_null_value(
    raw: dict[str, Any], table: ThroughputTable
) -> None:
    cells = 0
    for gpu in MEASURED_MODELS:
        for key_text, entry in raw[gpu].items():
            if key_text == "null":
                continue
            job_type, workers = ast.literal_eval(key_text)
            assert table.is_measured(job_type, gpu, workers)
            assert table.rate(job_type, gpu, workers) == entry["null"]
            cells += 1
    assert cells == 3 * 83
    assert table.gpu_models == MEASURED_MODELS
    assert len(table.job_types) == 26
    assert table.source == str(THROUGHPUTS)


def test_unconsolidated_measurements_are_renamed_to_the_plain_model(raw: dict[str, Any]) -> None:
    spread = load_gavel_throughputs(THROUGHPUTS, consolidated=False)
    assert spread.gpu_models == MEASURED_MODELS
    for key_text, entry in raw["v100_unconsolidated"].items():
        if key_text == "null":
            continue
        job_type, workers = ast.literal_eval(key_text)
        assert spread.rate(job_type, "v100", workers) == entry["null"]


def test_gpu_models_filter_keeps_only_the_named_models() -> None:
    only = load_gavel_throughputs(THROUGHPUTS, gpu_models=["v100"])
    assert only.gpu_models == ("v100",)


# --- unmeasured worker counts ---------------------------------------------------------------


def _measured_counts(table: ThroughputTable, job_type: str, gpu: str) -> list[int]:
    return sorted(
        w for (job, w), rates in table.steps_per_s.items() if job == job_type and gpu in rates
    )


def test_beyond_the_largest_measured_count_rates_never_decrease(table: ThroughputTable) -> None:
    for job_type in table.job_types:
        for gpu in MEASURED_MODELS:
            largest = _measured_counts(table, job_type, gpu)[-1]
            previous = table.rate(job_type, gpu, largest)
            for workers in range(largest + 1, 65):
                assert not table.is_measured(job_type, gpu, workers)
                current = table.rate(job_type, gpu, workers)
                assert current >= previous - 1e-12, (job_type, gpu, workers)
                previous = current


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_unmeasured_counts_interpolate_or_scale_below_linear(
    table: ThroughputTable, data: st.DataObject
) -> None:
    job_type = data.draw(st.sampled_from(table.job_types))
    gpu = data.draw(st.sampled_from(MEASURED_MODELS))
    counts = _measured_counts(table, job_type, gpu)
    workers = data.draw(st.integers(1, 128).filter(lambda w: w not in counts))
    base = max(w for w in counts if w <= workers)
    base_rate = table.rate(job_type, gpu, base)
    estimate = table.rate(job_type, gpu, workers)
    assert math.isfinite(estimate)
    above = [w for w in counts if w > workers]
    if above:
        # between two measured counts: on the line between their rates
        upper_rate = table.rate(job_type, gpu, above[0])
        assert min(base_rate, upper_rate) - 1e-9 <= estimate <= max(base_rate, upper_rate) + 1e-9
    else:
        assert estimate >= base_rate - 1e-12
        assert estimate <= base_rate * workers / base + 1e-9


def test_single_count_job_types_use_the_default_efficiency(table: ThroughputTable) -> None:
    # A3C was measured on one worker only: 0.9 per doubling.
    one = table.rate("A3C", "v100", 1)
    assert _measured_counts(table, "A3C", "v100") == [1]
    assert table.rate("A3C", "v100", 2) == pytest.approx(one * 2 * 0.9)
    assert table.rate("A3C", "v100", 4) == pytest.approx(one * 4 * 0.9**2)


def test_measured_efficiency_is_clamped_to_half_per_doubling() -> None:
    # 8 workers measured slower than 4: the per-doubling efficiency clamps at 0.5.
    custom = ThroughputTable({("job", 4): {"v100": 10.0}, ("job", 8): {"v100": 4.0}})
    assert custom.rate("job", "v100", 16) == pytest.approx(4.0 * 2 * 0.5)


def test_perfect_scaling_is_clamped_to_linear() -> None:
    custom = ThroughputTable({("job", 1): {"v100": 1.0}, ("job", 2): {"v100": 3.0}})
    assert custom.rate("job", "v100", 4) == pytest.approx(3.0 * 2)


# --- unmeasured GPU models ------------------------------------------------------------------


def test_unmeasured_model_is_estimated_from_the_fp32_nearest_measured_model(
    table: ThroughputTable,
) -> None:
    catalog = default_catalog()
    tflops = {gpu: catalog.get(gpu).fp32_tflops for gpu in (*MEASURED_MODELS, "A100", "T4")}
    assert all(value is not None for value in tflops.values())
    for target, reference in (("A100", "v100"), ("T4", "p100")):
        nearest = min(
            MEASURED_MODELS,
            key=lambda gpu: abs(math.log(tflops[target] / tflops[gpu])),  # type: ignore[operator]
        )
        assert nearest == reference
        ratio = tflops[target] / tflops[reference]  # type: ignore[operator]
        for job_type in table.job_types:
            for workers in (1, 2, 3, 8, 16):
                assert not table.is_measured(job_type, target, workers)
                assert table.rate(job_type, target, workers) == pytest.approx(
                    table.rate(job_type, reference, workers) * ratio
                )


def test_gpu_model_missing_from_the_catalog_raises_lookup_error(table: ThroughputTable) -> None:
    with pytest.raises(LookupError, match="no-such-gpu"):
        table.rate("A3C", "no-such-gpu", 1)


def test_unknown_job_type_raises_lookup_error_naming_it(table: ThroughputTable) -> None:
    with pytest.raises(LookupError, match=r"'GPT-17 \(batch size 3\)'"):
        table.rate("GPT-17 (batch size 3)", "v100", 1)


# --- online refinement ----------------------------------------------------------------------


def test_observed_moves_a_measured_cell_halfway(table: ThroughputTable) -> None:
    assert ONLINE_EMA_ALPHA == 0.5
    old = table.rate("A3C", "v100", 1)
    refined = table.observed("A3C", "v100", 1, old + 10.0)
    assert refined.rate("A3C", "v100", 1) == pytest.approx(old + 5.0)
    again = refined.observed("A3C", "v100", 1, old + 10.0)
    assert again.rate("A3C", "v100", 1) == pytest.approx(old + 7.5)
    # The original table is unchanged, and other cells are untouched.
    assert table.rate("A3C", "v100", 1) == old
    assert refined.rate("A3C", "p100", 1) == table.rate("A3C", "p100", 1)
    assert refined.source == table.source


def test_observed_adds_an_unseen_cell_as_measured(table: ThroughputTable) -> None:
    assert not table.is_measured("A3C", "A100", 16)
    refined = table.observed("A3C", "A100", 16, 123.0)
    assert refined.is_measured("A3C", "A100", 16)
    assert refined.rate("A3C", "A100", 16) == 123.0
    assert "A100" in refined.gpu_models
    assert not table.is_measured("A3C", "A100", 16)


def test_observed_can_add_a_new_job_type() -> None:
    refined = ThroughputTable({}).observed("new job", "v100", 1, 2.0)
    assert refined.job_types == ("new job",)
    assert refined.rate("new job", "v100", 1) == 2.0


@pytest.mark.parametrize("bad", [-1.0, -1e-9, math.nan, math.inf, -math.inf])
def test_observed_rejects_negative_or_non_finite(table: ThroughputTable, bad: float) -> None:
    with pytest.raises(ValueError, match="A3C"):
        table.observed("A3C", "v100", 1, bad)


def test_observed_accepts_zero() -> None:
    refined = ThroughputTable({("job", 1): {"v100": 4.0}}).observed("job", "v100", 1, 0.0)
    assert refined.rate("job", "v100", 1) == 2.0


# --- malformed files ------------------------------------------------------------------------

GOOD_ENTRY = {"null": 1.5}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ("", "not valid JSON"),
        ("[1, 2]", "expected an object"),
        ({"v100": [1, 2]}, "v100 is not an object"),
        ({"v100": {"('job', 1)": {"other": 2.0}}}, "field null"),
        ({"v100": {"('job', 1)": 3.0}}, "field null"),
        ({"v100": {"('job', 1)": {"null": "fast"}}}, "field null"),
        ({"v100": {"('job', 1)": {"null": None}}}, "field null"),
        ({"v100": {"job-1": GOOD_ENTRY}}, "key 'job-1'"),
        ({"v100": {"('job', 0)": GOOD_ENTRY}}, r"key \"\('job', 0\)\""),
        ({"v100": {"('job', 1.5)": GOOD_ENTRY}}, "is not"),
        ({"v100": {"(1, 1)": GOOD_ENTRY}}, "is not"),
        ({"v100": {"('job', 1, 2)": GOOD_ENTRY}}, "is not"),
        ({"v100": {"('job', 1)": {"null": -0.5}}}, "negative"),
        ({"v100": {}}, "no throughput measurements"),
        ({}, "no throughput measurements"),
    ],
)
def test_bad_file_raises_trace_format_error_naming_the_file(
    tmp_path: Path, content: object, message: str
) -> None:
    path = _write(tmp_path, content, "bad-throughputs.json")
    with pytest.raises(TraceFormatError, match=message) as caught:
        load_gavel_throughputs(path)
    assert str(path) in str(caught.value)


def test_not_utf8_raises_trace_format_error(tmp_path: Path) -> None:
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TraceFormatError, match=r"binary\.json"):
        load_gavel_throughputs(path)


def test_missing_file_raises_trace_format_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(TraceFormatError, match=r"absent\.json: cannot open"):
        load_gavel_throughputs(path)


def test_minimal_valid_file_loads(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "v100": {"null": {}, "('job', 1)": {"null": 2.0, "('other', 1)": [1.0, 1.0]}},
            "v100_unconsolidated": {"('job', 1)": {"null": 9.0}},
        },
    )
    loaded = load_gavel_throughputs(path)
    assert loaded.rate("job", "v100", 1) == 2.0
    assert loaded.job_types == ("job",)


def test_a_boolean_rate_is_not_a_number(tmp_path: Path) -> None:
    path = _write(tmp_path, {"v100": {"('A3C', 1)": {"null": True}}})
    with pytest.raises(TraceFormatError, match="not a number"):
        load_gavel_throughputs(path)
