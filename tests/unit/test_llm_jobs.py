"""The Acme-style LLM job generator (issue 32, item 2)."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from voltpack.model.errors import InvalidRequestError
from voltpack.model.gpu_sku import default_catalog
from voltpack.perf.step_time import ideal_links, predict_step_time
from voltpack.perf.training_models import (
    TrainingModel,
    default_parallelism,
    default_training_models,
    model_parallel_gpus,
)
from voltpack.sim.traces.acme_stats import (
    ACME_STATS,
    PUBLISHED_KALOS_256_PLUS_GPU_TIME_SHARE,
    PUBLISHED_PRETRAIN_COUNT_SHARE,
    PUBLISHED_PRETRAIN_GPU_TIME_SHARE,
)
from voltpack.sim.traces.llm_jobs import (
    LlmJobsConfig,
    expected_shares,
    generate_llm_jobs,
    job_type_of,
    solve_pretrain_median_s,
)
from voltpack.sim.traces.training_jobs import (
    TrainingJob,
    load_training_jobs,
    offered_load,
    write_training_jobs,
)

A100 = default_catalog().get("A100-80GB")
CATALOG = default_training_models()


@cache
def ideal_step(model: TrainingModel, gpus: int) -> float:
    """The step model on 8-GPU A100 hosts with 8 x 200 Gb/s InfiniBand, placed ideally."""
    par = default_parallelism(model, gpus)
    return predict_step_time(
        model, par, A100, ideal_links(A100, par, 8, "infiniband", 200.0, 8)
    ).total_s


def duration_s(job: TrainingJob) -> float:
    return job.steps * ideal_step(CATALOG.get(job.model), job.num_gpus)


@pytest.mark.parametrize("cluster", ["kalos", "seren"])
def test_solved_medians_reproduce_the_published_pretraining_shares(cluster: str) -> None:
    tables = ACME_STATS[cluster]  # type: ignore[index]
    count, gpu_time = expected_shares(tables)["pretrain"]
    assert count == pytest.approx(PUBLISHED_PRETRAIN_COUNT_SHARE[cluster], abs=1e-9)  # type: ignore[index]
    assert gpu_time == pytest.approx(PUBLISHED_PRETRAIN_GPU_TIME_SHARE[cluster], abs=0.001)  # type: ignore[index]
    published = PUBLISHED_PRETRAIN_GPU_TIME_SHARE[cluster]  # type: ignore[index]
    assert solve_pretrain_median_s(tables, published) == pytest.approx(
        tables["pretrain"].duration_median_s, rel=0.001
    )


def test_generator_is_seeded() -> None:
    config = LlmJobsConfig(num_jobs=500, seed=3)
    jobs = generate_llm_jobs(config, 2048, ideal_step)
    assert jobs == generate_llm_jobs(config, 2048, ideal_step)
    assert jobs != generate_llm_jobs(LlmJobsConfig(num_jobs=500, seed=4), 2048, ideal_step)
    assert jobs[0].arrival_s == 0.0
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(jobs))


SAMPLE = 40_000


@cache
def sample(cluster: str) -> tuple[TrainingJob, ...]:
    # the default 2-day cap (as `expected_shares` assumes) and a cluster large enough for
    # every job, so that no job is cut and the expectation of `expected_shares` applies
    config = LlmJobsConfig(num_jobs=SAMPLE, seed=11, cluster=cluster)  # type: ignore[arg-type]
    return tuple(generate_llm_jobs(config, 4096, ideal_step))


@pytest.mark.parametrize("cluster", ["kalos", "seren"])
def test_job_type_and_gpu_time_shares_match_the_published_ones(cluster: str) -> None:
    jobs = sample(cluster)
    counts = Counter(job_type_of(job) for job in jobs)
    expected = expected_shares(ACME_STATS[cluster])  # type: ignore[index]
    for kind, (share, _) in expected.items():
        # 4 binomial standard errors of a share from SAMPLE draws
        tolerance = 4 * math.sqrt(share * (1 - share) / SAMPLE)
        assert counts[kind] / SAMPLE == pytest.approx(share, abs=tolerance), kind
    work = [job.num_gpus * duration_s(job) for job in jobs]
    pretrain = [
        w if job_type_of(job) == "pretrain" else 0.0 for job, w in zip(jobs, work, strict=True)
    ]
    total = sum(work)
    share = sum(pretrain) / total
    # standard error of a ratio estimator (delta method), from the sample itself
    error = (
        math.sqrt(sum((p - share * w) ** 2 for p, w in zip(pretrain, work, strict=True))) / total
    )
    published = PUBLISHED_PRETRAIN_GPU_TIME_SHARE[cluster]  # type: ignore[index]
    # steps are rounded to whole ideal steps, a few % of a short job, not of the pretraining
    # jobs that hold the GPU time
    assert abs(share - published) <= 4 * error + 0.01, (share, error)
    if cluster == "kalos":
        big = sum(w for job, w in zip(jobs, work, strict=True) if job.num_gpus >= 256) / total
        assert big > PUBLISHED_KALOS_256_PLUS_GPU_TIME_SHARE - 4 * error


@pytest.mark.parametrize("cluster", ["kalos", "seren"])
def test_every_job_fits_its_cluster_and_its_model(cluster: str) -> None:
    jobs = generate_llm_jobs(
        LlmJobsConfig(num_jobs=3000, seed=5, cluster=cluster, max_gpus=512),  # type: ignore[arg-type]
        2048,
        ideal_step,
    )
    assert max(job.num_gpus for job in jobs) <= 512
    for job in jobs:
        model = CATALOG.get(job.model)
        assert job.steps >= 1
        assert job.num_gpus % model_parallel_gpus(model) == 0
        assert job.num_gpus <= 8 or job.num_gpus % 8 == 0
        default_parallelism(model, job.num_gpus)  # raises if the layout cannot hold it
    kinds = {job_type_of(job) for job in jobs if job.num_gpus == 512}
    assert "pretrain" in kinds  # the 1,024-GPU pretraining jobs were cut to 512
    evals = [job for job in jobs if job_type_of(job) == "eval"]
    assert max(job.num_gpus for job in evals) <= 8
    assert Counter(job.num_gpus for job in evals).most_common(1)[0][0] == 1


def test_a_cut_job_keeps_its_gpu_seconds() -> None:
    big = generate_llm_jobs(LlmJobsConfig(num_jobs=3000, seed=2), 4096, ideal_step)
    cut = generate_llm_jobs(LlmJobsConfig(num_jobs=3000, seed=2, max_gpus=256), 4096, ideal_step)
    pairs = [
        (a, b)
        for a, b in zip(big, cut, strict=True)
        if a.num_gpus == 1024 and duration_s(a) < 86_400 / 4  # no truncation on either side
    ]
    assert pairs
    for a, b in pairs:
        assert b.num_gpus == 256
        assert b.num_gpus * duration_s(b) == pytest.approx(a.num_gpus * duration_s(a), rel=0.1)


def test_generator_offers_its_target_load() -> None:
    jobs = generate_llm_jobs(
        LlmJobsConfig(num_jobs=20_000, seed=1, target_load=0.7), 4096, ideal_step
    )
    # Poisson noise of the arrival span is about 1/sqrt(jobs); step rounding a little more
    assert offered_load(jobs, 4096, ideal_step) == pytest.approx(0.7, rel=0.08)


def test_a_generated_trace_round_trips_through_the_reader(tmp_path: Path) -> None:
    jobs = generate_llm_jobs(LlmJobsConfig(num_jobs=60, seed=9, cluster="seren"), 1024, ideal_step)
    path = tmp_path / "llm.csv"
    write_training_jobs(path, jobs)
    assert load_training_jobs(path) == jobs


def test_bad_settings_are_refused() -> None:
    with pytest.raises(InvalidRequestError, match="cluster"):
        LlmJobsConfig(cluster="philly")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="max_gpus"):
        LlmJobsConfig(max_gpus=0)
    with pytest.raises(InvalidRequestError, match="cluster_gpus"):
        generate_llm_jobs(LlmJobsConfig(num_jobs=5), 0, ideal_step)
