"""Inference profiles: the measured table, the fitted model, extrapolation and its flags."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voltpack.model.errors import TraceFormatError
from voltpack.perf.inference_measurements import (
    default_measurements_path,
    load_measurements,
    prefill_settings,
)
from voltpack.perf.inference_profile import (
    MIN_KV_TOKENS,
    PrefillTable,
    ProfileBook,
    default_profile_book,
)
from voltpack.perf.inference_validation import held_out_gpu_types, leave_one_out
from voltpack.perf.links import PerfModelError
from voltpack.perf.serving_models import ServingModelCatalog, default_serving_models

HEADER = (
    "model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,"
    "prompt_time,token_time,e2e_time,tensor_parallel\n"
)


def test_shipped_table_loads_every_configuration() -> None:
    points = load_measurements(default_measurements_path())
    labels = {p.key.label() for p in points}
    assert "llama2-70b/A100-80GB/TP2" in labels
    assert "bloom-176b/H100-SXM@cap0.7/TP8" in labels
    assert len(labels) == 12
    assert all(p.runs >= 5 for p in points)


def test_malformed_row_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "perf.csv"
    path.write_text(HEADER + "llama2-70b,a100-80gb,512,one,128,1,0.7,196,54,7000,2\n")
    with pytest.raises(TraceFormatError, match=r"perf.csv:2: field batch_size"):
        load_measurements(path)


def test_anomalous_prefill_settings_are_left_out_with_the_reason() -> None:
    kept, excluded = prefill_settings(load_measurements(default_measurements_path()))
    assert len(excluded) == 3
    assert all("batch 64" in e.reason and "TP2" in e.reason for e in excluded)
    assert all(s.batch_size < 64 or s.key.tensor_parallel != 2 for s in kept)


def test_measured_profile_reproduces_its_own_points() -> None:
    book = default_profile_book()
    profile = book.profile("llama2-70b", "H100-SXM", 4)
    assert not profile.extrapolated
    assert "measured" in profile.basis
    points = [p for p in book.points if p.key.label() == "llama2-70b/H100-SXM/TP4"]
    errors = [
        abs(
            profile.decode_step_s(
                p.batch_size, p.batch_size * (p.prompt_tokens + p.output_tokens / 2)
            )
            / p.token_time_s
            - 1
        )
        for p in points
    ]
    assert np.median(errors) < 0.05


def test_leave_one_out_median_error_within_ten_percent() -> None:
    predictions = leave_one_out(load_measurements(default_measurements_path()))
    errors = [p.relative_error for p in predictions]
    assert len(predictions) == 12 * 19 + 153
    assert np.median(errors) < 0.10


def test_held_out_gpu_type_predictions_exist_for_every_type() -> None:
    predictions = held_out_gpu_types(load_measurements(default_measurements_path()))
    assert {p.key.gpu_type for p in predictions} == {"A100-80GB", "H100-SXM"}
    assert all(np.isfinite(p.predicted_s) and p.predicted_s > 0 for p in predictions)


def test_unmeasured_type_is_extrapolated_and_says_so() -> None:
    profile = default_profile_book().profile("llama2-70b", "H200", 4)
    assert profile.extrapolated
    assert "(extrapolated)" in profile.label
    assert "extrapolated" in profile.basis and "H200" in profile.basis


def test_faster_memory_means_faster_decode_when_extrapolated() -> None:
    book = default_profile_book()
    h200 = book.profile("llama3-8b", "H200", 1)
    l4 = book.profile("llama3-8b", "L4", 1)
    assert h200.decode_step_s(8, 8 * 1000) < l4.decode_step_s(8, 8 * 1000)
    assert h200.prefill_s([1000]) < l4.prefill_s([1000])


def test_more_work_never_takes_less_time() -> None:
    profile = default_profile_book().profile("llama2-70b", "A100-80GB", 8)
    tokens = np.array([128.0, 512, 2048, 8192, 32768, 65536])
    prefill = profile.prefill_time_s(tokens, tokens**2)
    assert np.all(np.diff(prefill) > 0)
    batch = np.arange(1.0, 65)
    decode = profile.decode_time_s(batch, batch * 1000)
    assert np.all(np.diff(decode) >= 0)


def test_prefill_table_interpolates_and_extends_linearly() -> None:
    kept, _ = prefill_settings(load_measurements(default_measurements_path()))
    table = PrefillTable.from_settings(
        [s for s in kept if s.key.label() == "llama2-70b/A100-80GB/TP8"]
    )
    largest = table.tokens[-1]
    doubled = table.time_s(np.array([2 * largest]))[0]
    assert doubled == pytest.approx(2 * table.seconds[-1])
    inside = table.time_s(np.array([table.tokens[2]]))[0]
    assert inside == pytest.approx(table.seconds[2])


def test_feasible_profiles_need_room_for_weights_and_kv() -> None:
    book = default_profile_book()
    l4 = book.feasible_profiles("llama2-70b", "L4")
    assert [p.tensor_parallel for p in l4] == [8]
    assert all(p.kv_capacity_tokens >= MIN_KV_TOKENS for p in l4)
    assert [p.tensor_parallel for p in book.feasible_profiles("llama3-8b", "L4")] == [1, 2, 4, 8]


def test_power_cap_slows_prefill_of_an_extrapolated_type() -> None:
    book = default_profile_book()
    full = book.profile("llama2-70b", "H200", 8)
    capped = book.profile("llama2-70b", "H200", 8, power_cap_ratio=0.6)
    assert capped.prefill_s([4096]) > full.prefill_s([4096])
    assert capped.power_w(1.0, 0.0) <= 0.6 * 8 * capped.rates.tdp_w + 1e-9


def test_unknown_model_and_bad_tensor_parallel_are_refused() -> None:
    book = default_profile_book()
    with pytest.raises(PerfModelError, match="unknown serving model 'gpt-9'"):
        book.profile("gpt-9", "H100-SXM", 1)
    with pytest.raises(PerfModelError, match="does not divide"):
        book.profile("llama2-70b", "H100-SXM", 3)


def test_user_catalog_with_bad_field_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(
        "schema_version: 1\nmodels:\n  - name: x\n    parameters_billion: -1\n    layers: 2\n"
        "    hidden_size: 8\n    attention_heads: 2\n    kv_heads: 2\n    source: me\n"
    )
    with pytest.raises(PerfModelError, match=r"models\.0\.parameters_billion"):
        ServingModelCatalog.from_yaml(path)


def test_book_from_a_user_file_fits_its_own_points(tmp_path: Path) -> None:
    rows = []
    for batch in (1, 2, 4, 8):
        for prompt in (256, 1024):
            rows.append(
                f"llama2-70b,a100-80gb,{prompt},{batch},128,1.0,0.7,"
                f"{50 + 0.1 * prompt * batch},{40 + batch},9999,8\n"
            )
    path = tmp_path / "perf.csv"
    path.write_text(HEADER + "".join(rows))
    book = ProfileBook(load_measurements(path), default_serving_models())
    profile = book.profile("llama2-70b", "A100-80GB", 8)
    assert not profile.extrapolated
    assert profile.decode_step_s(4, 4 * 300) == pytest.approx(0.044, rel=0.05)
