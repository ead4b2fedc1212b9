"""The contention model keeps the step model's single-job accuracy on the published points,
and Crux's co-location setup produces contention (benchmarks/contention_validation.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import contention_validation as validation

from voltpack.perf.published_points import NIC_CLASS_POINTS, TRAINING_POINTS

POINTS = (*TRAINING_POINTS, *NIC_CLASS_POINTS)


@pytest.mark.parametrize("point", POINTS, ids=lambda point: point.name)
def test_a_lone_gang_on_a_non_blocking_fabric_is_priced_as_the_step_model_prices_it(
    point: validation.TrainingPoint,
) -> None:
    row = validation.published_row(point)
    assert row["contention_step_s"] == pytest.approx(row["old_step_s"], rel=1e-9)


def test_the_published_errors_stay_inside_the_step_models_bounds() -> None:
    rows = validation.published_rows()
    megatron = [abs(r["contention_error_percent"]) for r in rows if r["point"].startswith("SC21")]
    holmes = [abs(r["contention_error_percent"]) for r in rows if r["point"].startswith("Holmes")]
    assert len(megatron) == len(TRAINING_POINTS) and len(holmes) == len(NIC_CLASS_POINTS)
    assert max(megatron) <= 7.65
    assert max(holmes) <= 15.0


def test_crux_pair_contends_on_the_tor_uplinks_once_they_are_the_bottleneck() -> None:
    # 8:1 ToR uplinks: 600 Gbit/s per ToR against GPT's 800 and BERT's 400 of cross-ToR hops
    case = validation.crux_case(8.0)
    assert case["gpt_slowdown"] > 0.0
    assert case["bert_slowdown"] > 0.0
    assert case["gpt_together_s"] > case["gpt_alone_s"]


def test_crux_primary_run_is_the_stated_setup_and_reports_its_result() -> None:
    primary = validation.crux_primary()
    assert primary["tor_oversubscription"] == validation.CRUX_TOR_OVERSUBSCRIPTION
    assert primary["gpt_global_batch"] == 1536
    # the alone step (compute) is within 15 % of the published 1.53 s
    assert primary["gpt_alone_s"] == pytest.approx(validation.CRUX_GPT_ALONE_S, rel=0.15)
    assert primary["gpt_slowdown"] >= 0.0
