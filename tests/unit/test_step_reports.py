"""Step-time reports on pods: parsing, refusals that name the field, gathering a gang."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from voltpack.operator.scheduling.step_reports import (
    MAX_ENTRIES,
    STEP_TIMES_ANNOTATION,
    StepReportError,
    gang_step_reports,
    parse_step_times,
    rank_report,
)
from voltpack.policies.stragglers import StragglerDetector, align_samples


def pod(name: str, annotations: dict[str, str], node: str | None = "node-a") -> dict[str, Any]:
    spec = {"nodeName": node} if node else {}
    return {"metadata": {"name": name, "namespace": "ml", "annotations": annotations}, "spec": spec}


def worker(name: str, rank: int, times: str | None, gang: str = "llm") -> dict[str, Any]:
    annotations = {
        "voltpack.io/pod-group": gang,
        "voltpack.io/rank": str(rank),
        "voltpack.io/gpu-indices": "3",
    }
    if times is not None:
        annotations[STEP_TIMES_ANNOTATION] = times
    return pod(name, annotations)


def test_parse_step_times() -> None:
    assert parse_step_times("1200:1.532, 1201:1.529,1202:1.611") == (
        (1200, 1.532),
        (1201, 1.529),
        (1202, 1.611),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        ("12", r"entry 1 \('12'\) has no ':'"),
        ("1:1.0,x:1.0", r"entry 2 \('x:1.0'\): field step 'x' is not an integer"),
        ("-1:1.0", "field step must be >= 0"),
        ("1:fast", "field seconds 'fast' is not a number"),
        ("1:0", "field seconds must be a finite number > 0"),
        ("1:nan", "field seconds must be a finite number > 0"),
        ("1:-2", "field seconds must be a finite number > 0"),
        ("5:1.0,5:1.1", "field step 5 is not after the previous entry's step 5"),
        ("5:1.0,4:1.1", "steps must increase"),
    ],
)
def test_malformed_step_times_are_refused_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(StepReportError, match=message) as caught:
        parse_step_times(text, "ml/w-3")
    assert str(caught.value).startswith(f"ml/w-3: annotation {STEP_TIMES_ANNOTATION}")


def test_too_many_entries_are_refused() -> None:
    text = ",".join(f"{step}:1.0" for step in range(MAX_ENTRIES + 1))
    with pytest.raises(StepReportError, match=f"keep at most the last {MAX_ENTRIES}"):
        parse_step_times(text)


def test_rank_report_reads_rank_node_and_gpus() -> None:
    report = rank_report(worker("w-1", 1, "7:1.5"))
    assert report is not None
    assert (report.pod, report.rank, report.node, report.gpu_indices) == (
        "ml/w-1",
        1,
        "node-a",
        (3,),
    )
    assert report.samples == ((7, 1.5),)
    assert rank_report(worker("w-1", 1, None)) is None
    with pytest.raises(StepReportError, match=r"no voltpack\.io/rank"):
        rank_report(pod("w-2", {STEP_TIMES_ANNOTATION: "1:1.0"}))
    with pytest.raises(StepReportError, match=r"voltpack\.io/rank 'two' is not an integer"):
        rank_report(pod("w-2", {STEP_TIMES_ANNOTATION: "1:1.0", "voltpack.io/rank": "two"}))


def test_gang_reports_collect_missing_errors_and_duplicates() -> None:
    pods = [
        worker("w-0", 0, "1:1.0,2:1.1"),
        worker("w-1", 1, "1:1.0,2:bad"),
        worker("w-2", 2, None),
        worker("w-3", 0, "2:1.0"),
        worker("other-0", 0, "1:9.0", gang="other"),
    ]
    reports = gang_step_reports(pods, "llm")
    assert list(reports.ranks) == [0]
    assert reports.missing == ("ml/w-2",)
    assert len(reports.errors) == 2
    assert "ml/w-1: annotation voltpack.io/step-times entry 2" in reports.errors[0]
    assert "field seconds 'bad'" in reports.errors[0]
    assert "rank 0 is also reported by ml/w-0" in reports.errors[1]


def test_reports_feed_the_detector() -> None:
    rng = np.random.default_rng(0)
    pods = []
    for rank in range(16):
        slow = 1.25 if rank == 9 else 1.0
        times = 1.5 * slow * (1 + rng.normal(0, 0.02, size=40))
        text = ",".join(f"{100 + step}:{value:.4f}" for step, value in enumerate(times))
        pods.append(worker(f"w-{rank}", rank, text))
    reports = gang_step_reports(pods, "llm")
    steps, matrix = align_samples(reports.samples(), 16)
    detector = StragglerDetector(16)
    for step, row in zip(steps, matrix, strict=True):
        report = detector.observe(step, row)
    assert [flag.rank for flag in report.flagged] == [9]
    assert reports.ranks[9].node == "node-a"
