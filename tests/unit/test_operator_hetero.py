"""The operator's heterogeneity-aware state on plain GPUJob and pod objects: which jobs take
part, when the allocation is solved again, how reports refine the table, and the warnings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from voltpack.model.errors import PolicyError
from voltpack.operator.scheduling.hetero import (
    JOB_TYPE_ANNOTATION,
    MEASURED_THROUGHPUT_ANNOTATION,
    HeteroAllocator,
)
from voltpack.policies.schema import AllocationSpec

RECOMMENDATION = "Recommendation (batch size 1024)"
CAPACITY = {"K80": 4.0, "V100M16": 4.0}
NODE_MODELS = {"k80-node": "K80", "v100-node": "V100M16"}


def gpujob(name: str, job_type: str | None, workers: int = 1, **extra: Any) -> dict[str, Any]:
    annotations = dict(extra.pop("annotations", {}))
    if job_type is not None:
        annotations[JOB_TYPE_ANNOTATION] = job_type
    return {
        "metadata": {
            "name": name,
            "namespace": "d",
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": annotations,
        },
        "spec": {"workers": workers, "template": {}, **extra},
    }


def worker(job: str, node: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{job}-worker-0",
            "namespace": "d",
            "labels": {"voltpack.io/job": job},
        },
        "spec": {"nodeName": node},
        "status": {"phase": "Running"},
    }


def allocator(round_s: float = 100.0) -> HeteroAllocator:
    return HeteroAllocator(AllocationSpec(policy="max_min_fairness_perf", round_s=round_s))


def test_only_typed_jobs_with_a_choice_of_models_take_part() -> None:
    jobs = [
        gpujob("typed", RECOMMENDATION),
        gpujob("untyped", None),
        gpujob("one-model", RECOMMENDATION, gpuModels=["K80"]),
        gpujob("done", RECOMMENDATION) | {"status": {"phase": "Succeeded"}},
    ]
    result = allocator().cycle(jobs, [], CAPACITY, NODE_MODELS, 0.0)
    assert set(result.choices) == {"d/typed"}
    assert result.choices["d/typed"].best == "K80"


def test_the_allocation_is_solved_per_round_or_when_the_jobs_change() -> None:
    state = allocator(round_s=100.0)
    jobs = [gpujob("a", RECOMMENDATION)]
    assert state.cycle(jobs, [], CAPACITY, NODE_MODELS, 0.0).solved
    assert not state.cycle(jobs, [], CAPACITY, NODE_MODELS, 50.0).solved
    both = [*jobs, gpujob("b", RECOMMENDATION)]
    assert state.cycle(both, [], CAPACITY, NODE_MODELS, 60.0).solved  # an arrival
    assert state.cycle(both, [], CAPACITY, NODE_MODELS, 100.0).solved  # the next round
    assert not state.cycle(both, [], CAPACITY, NODE_MODELS, 160.0).solved
    assert state.cycle(jobs, [], CAPACITY, NODE_MODELS, 161.0).solved  # a completion
    assert state.clock.round_index == 2


def test_a_report_refines_the_table_once_per_value_on_the_running_model() -> None:
    state = allocator()
    before = state.table.rate(RECOMMENDATION, "k80", 1)
    job = gpujob("a", RECOMMENDATION, annotations={MEASURED_THROUGHPUT_ANNOTATION: "2"})
    pods = [worker("a", "k80-node")]
    state.cycle([job], pods, CAPACITY, NODE_MODELS, 0.0)
    once = state.table.rate(RECOMMENDATION, "k80", 1)
    state.cycle([job], pods, CAPACITY, NODE_MODELS, 1.0)
    assert once == pytest.approx(0.5 * 2 + 0.5 * before)
    assert state.table.rate(RECOMMENDATION, "k80", 1) == once  # the same report, not again


def test_a_report_from_a_job_that_does_not_run_is_not_applied() -> None:
    state = allocator()
    before = state.table
    job = gpujob("a", RECOMMENDATION, annotations={MEASURED_THROUGHPUT_ANNOTATION: "2"})
    result = state.cycle([job], [], CAPACITY, NODE_MODELS, 0.0)
    assert state.table == before
    assert result.warnings == []


@pytest.mark.parametrize("value", ["fast", "-1", "nan", "inf", ""])
def test_a_malformed_report_is_warned_about_once_and_ignored(value: str) -> None:
    state = allocator()
    before = state.table
    job = gpujob("a", RECOMMENDATION, annotations={MEASURED_THROUGHPUT_ANNOTATION: value})
    pods = [worker("a", "k80-node")]
    first = state.cycle([job], pods, CAPACITY, NODE_MODELS, 0.0)
    second = state.cycle([job], pods, CAPACITY, NODE_MODELS, 1.0)
    assert [w.reason for w in first.warnings] == ["MalformedAnnotation"]
    assert MEASURED_THROUGHPUT_ANNOTATION in first.warnings[0].message
    assert repr(value) in first.warnings[0].message
    assert first.warnings[0].job["kind"] == "GPUJob"
    assert second.warnings == []
    assert state.table == before
    assert "d/a" in first.choices  # the job still takes part


def test_an_unknown_job_type_is_warned_about_and_left_out() -> None:
    result = allocator().cycle([gpujob("a", "Quantum GAN")], [], CAPACITY, NODE_MODELS, 0.0)
    assert result.choices == {}
    assert [w.reason for w in result.warnings] == ["UnknownJobType"]
    assert "'Quantum GAN'" in result.warnings[0].message


def test_a_throughput_file_that_cannot_be_read_names_the_field(tmp_path: Path) -> None:
    spec = AllocationSpec(policy="fifo_perf", throughputs=str(tmp_path / "none.json"))
    with pytest.raises(PolicyError, match=r"field spec\.allocation\.throughputs: .*none\.json"):
        HeteroAllocator(spec)


def started_worker(job: str, node: str, start: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    pod = worker(job, node)
    pod["status"]["startTime"] = start
    return pod


def test_at_a_round_boundary_a_preemptible_job_past_its_runtime_moves() -> None:
    spec = AllocationSpec(policy="max_min_fairness_perf", round_s=100.0, min_runtime_s=600.0)
    state = HeteroAllocator(spec)
    jobs = [
        gpujob("mover", RECOMMENDATION, preemptible=True),
        gpujob("pinned", RECOMMENDATION),
        gpujob("young", RECOMMENDATION, preemptible=True),
    ]
    pods = [
        started_worker("mover", "v100-node"),
        started_worker("pinned", "v100-node"),
        started_worker("young", "v100-node", "2026-01-01T00:55:00Z"),
    ]
    now = 1767225600.0 + 3600  # 2026-01-01T01:00:00Z: mover ran 1 h, young 5 min
    first = state.cycle(jobs, pods, CAPACITY, NODE_MODELS, now)
    assert [(p.move.job, p.move.to_model) for p in first.moves] == [("d/mover", "K80")]
    assert first.moves[0].move.reason.startswith("round 1: job d/mover moves from V100M16 to K80")
    assert [p["metadata"]["name"] for p in first.moves[0].workers.pods] == ["mover-worker-0"]
    # within the round nothing moves again, and the mover, now pending, tries the K80 first
    between = state.cycle(jobs, pods[1:], CAPACITY, NODE_MODELS, now + 10)
    assert between.moves == []
    assert between.choices["d/mover"].models[0] == "K80"


def test_gpus_of_other_pods_leave_no_room_for_a_move() -> None:
    spec = AllocationSpec(policy="max_min_fairness_perf", round_s=100.0, min_runtime_s=0.0)
    state = HeteroAllocator(spec)
    jobs = [gpujob("mover", RECOMMENDATION, preemptible=True)]
    other = worker("other", "k80-node")  # a pod of no training job holding all 4 K80s
    other["metadata"]["labels"] = {}
    other["spec"]["containers"] = [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]
    pods = [started_worker("mover", "v100-node"), other]
    now = 1767225600.0 + 3600
    assert state.cycle(jobs, pods, CAPACITY, NODE_MODELS, now).moves == []
    alone = HeteroAllocator(spec).cycle(jobs, pods[:1], CAPACITY, NODE_MODELS, now)
    assert [p.move.to_model for p in alone.moves] == ["K80"]


def test_the_shipped_table_is_found_through_the_data_dir_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOLTPACK_DATA_DIR", str(tmp_path))
    (tmp_path / "gavel").mkdir()
    (tmp_path / "gavel" / "simulation_throughputs.json").write_text(
        '{"k80": {"(\'A3C\', 1)": {"null": 2.0}}}', encoding="utf-8"
    )
    state = HeteroAllocator(AllocationSpec(policy="fifo_perf"))
    assert state.table.job_types == ("A3C",)
