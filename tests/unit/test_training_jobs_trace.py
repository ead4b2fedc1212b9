"""Training-job traces: the CSV format's errors, the writer, and the Philly-style generator."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from voltpack.model.errors import InvalidRequestError, TraceFormatError
from voltpack.perf.training_models import TrainingModel, default_training_models
from voltpack.sim.traces.gavel_generator import PhillyDistribution
from voltpack.sim.traces.training_jobs import (
    PhillyJobsConfig,
    TrainingJob,
    generate_philly_jobs,
    load_training_jobs,
    model_for_gpus,
    offered_load,
    write_training_jobs,
)

HEADER = "job_id,arrival_s,num_gpus,model,steps\n"


def write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "jobs.csv"
    path.write_text(header + body)
    return path


def test_loads_jobs_in_arrival_order(tmp_path: Path) -> None:
    path = write(tmp_path, "b,20,16,megatron-18.4b,100\na,5.5,8,GPT-13B,7\n")
    jobs = load_training_jobs(path)
    assert jobs == [
        TrainingJob("a", 5.5, 8, "gpt-13b", 7),
        TrainingJob("b", 20.0, 16, "megatron-18.4b", 100),
    ]


def test_writer_round_trips(tmp_path: Path) -> None:
    jobs = [TrainingJob("x", 0.125, 64, "llama-2-70b", 3), TrainingJob("y", 9.0, 1, "gpt-1.3b", 1)]
    path = tmp_path / "out" / "trace.csv"
    write_training_jobs(path, jobs)
    assert load_training_jobs(path) == jobs


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("a,-1,8,gpt-13b,5\n", ["jobs.csv:2", "arrival_s"]),
        ("a,soon,8,gpt-13b,5\n", ["jobs.csv:2", "arrival_s", "not a number"]),
        ("a,0,8,gpt-13b,0\n", ["jobs.csv:2", "steps", "integer >= 1"]),
        ("a,0,2.5,gpt-13b,5\n", ["jobs.csv:2", "num_gpus"]),
        ("a,0,8,gpt-13b,5\na,1,8,gpt-13b,5\n", ["jobs.csv:3", "job_id", "line 2"]),
        (",0,8,gpt-13b,5\n", ["jobs.csv:2", "job_id", "empty"]),
        ("a,0,8,gpt-13b\n", ["jobs.csv:2", "field steps is missing"]),
        ("a,0,12,megatron-18.4b,5\n", ["jobs.csv:2", "num_gpus", "tensor x pipeline"]),
    ],
)
def test_malformed_rows_name_file_line_and_field(
    tmp_path: Path, body: str, words: list[str]
) -> None:
    with pytest.raises(TraceFormatError) as caught:
        load_training_jobs(write(tmp_path, body))
    for word in words:
        assert word in str(caught.value)


def test_unknown_model_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError) as caught:
        load_training_jobs(write(tmp_path, "a,0,8,resnet-50,5\n"))
    message = str(caught.value)
    assert "jobs.csv:2" in message and "model" in message and "resnet-50" in message
    assert "gpt-175b" in message and "megatron-18.4b" in message


def test_missing_column_and_empty_file_are_named(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="steps"):
        load_training_jobs(
            write(tmp_path, "a,0,8,gpt-13b\n", header="job_id,arrival_s,num_gpus,model\n")
        )
    with pytest.raises(TraceFormatError, match="no jobs"):
        load_training_jobs(write(tmp_path, ""))


def test_model_rule_picks_the_largest_threshold_whose_parallelism_divides() -> None:
    assert model_for_gpus(1).name == "gpt-1.3b"
    assert model_for_gpus(8).name == "gpt-13b"
    assert model_for_gpus(16).name == "megatron-18.4b"
    assert model_for_gpus(48).name == "megatron-39.1b"  # llama-2-70b needs 32 | n
    assert model_for_gpus(64).name == "llama-2-70b"
    assert model_for_gpus(512).name == "gpt-175b"
    with pytest.raises(InvalidRequestError):
        model_for_gpus(3, rule=((2, "megatron-18.4b"),))


PHILLY = PhillyDistribution(
    durations_s=(600.0, 3600.0, 7200.0, 36_000.0, 200_000.0),
    num_gpus=(1, 2, 4, 8, 1),
)


def ideal_step(model: TrainingModel, gpus: int) -> float:
    """A stand-in ideal step time: parameters over GPUs."""
    return model.parameters_billion / gpus


def test_generator_is_seeded_and_follows_its_rules() -> None:
    config = PhillyJobsConfig(num_jobs=300, seed=3, gpu_scale=8, max_duration_s=100_000.0)
    jobs = generate_philly_jobs(PHILLY, config, 1024, ideal_step)
    assert jobs == generate_philly_jobs(PHILLY, config, 1024, ideal_step)
    assert jobs != generate_philly_jobs(
        PHILLY, PhillyJobsConfig(num_jobs=300, seed=4), 1024, ideal_step
    )
    assert jobs[0].arrival_s == 0.0
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(jobs))
    assert {job.num_gpus for job in jobs} <= {8, 16, 32, 64}
    catalog = default_training_models()
    durations = set()
    for job in jobs:
        model = catalog.get(job.model)
        assert model == model_for_gpus(job.num_gpus)
        durations.add(round(job.steps * ideal_step(model, job.num_gpus), -1))
    # steps x ideal step time gives back Philly's durations (the long one truncated)
    assert durations <= {600.0, 3600.0, 7200.0, 36_000.0, 100_000.0}
    assert 100_000.0 in durations


@pytest.mark.parametrize("target", [0.5, 0.9])
def test_generator_offers_its_target_load(target: float) -> None:
    config = PhillyJobsConfig(num_jobs=3000, seed=1, target_load=target, max_duration_s=None)
    jobs = generate_philly_jobs(PHILLY, config, 2048, ideal_step)
    assert offered_load(jobs, 2048, ideal_step) == pytest.approx(target, rel=0.06)


def test_generator_refuses_jobs_bigger_than_the_cluster() -> None:
    with pytest.raises(InvalidRequestError, match="gpu_scale"):
        generate_philly_jobs(PHILLY, PhillyJobsConfig(num_jobs=50, gpu_scale=8), 32, ideal_step)
    with pytest.raises(InvalidRequestError, match="target_load"):
        PhillyJobsConfig(target_load=0)
