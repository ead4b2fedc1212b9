"""Gavel trace generator: reproduces Gavel's own trace, distributions, errors."""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from pathlib import Path

import pytest

from voltpack.model.errors import InvalidRequestError, TraceFormatError
from voltpack.perf.throughput_table import ThroughputTable, load_gavel_throughputs
from voltpack.sim.traces.gavel import load_gavel_trace, write_gavel_trace
from voltpack.sim.traces.gavel_generator import (
    GAVEL_JOB_TABLE,
    GeneratorConfig,
    PhillyDistribution,
    generate_trace,
    load_philly_distribution,
    main,
)

GAVEL_DATA = Path(__file__).resolve().parents[2] / "data" / "gavel"
SHIPPED = GAVEL_DATA / "generated" / "gavel_gen_120jobs_lam1200_seed0.trace"
PHILLY_CSV = GAVEL_DATA / "philly_job_distribution.csv"
DISTRIBUTED = {t.job_type for t in GAVEL_JOB_TABLE if t.distributed}


@pytest.fixture(scope="module")
def table() -> ThroughputTable:
    return load_gavel_throughputs(GAVEL_DATA / "simulation_throughputs.json")


@pytest.fixture(scope="module")
def philly() -> PhillyDistribution:
    return load_philly_distribution(PHILLY_CSV)


def test_reproduces_gavels_own_trace_job_for_job(table: ThroughputTable) -> None:
    config = GeneratorConfig(num_jobs=120, mean_interarrival_s=1200, seed=0, multi_gpu=True)
    generated = generate_trace(config, table)
    shipped = load_gavel_trace(SHIPPED)
    assert len(generated) == len(shipped) == 120
    for number, (ours, theirs) in enumerate(zip(generated, shipped, strict=True), start=1):
        assert ours.job_type == theirs.job_type, number
        assert ours.scale_factor == theirs.scale_factor, number
        assert abs(ours.total_steps - theirs.total_steps) <= 1, number
        assert abs(ours.arrival_s - theirs.arrival_s) < 1, number


def test_written_trace_equals_gavels_file_byte_for_byte(
    table: ThroughputTable, tmp_path: Path
) -> None:
    config = GeneratorConfig(num_jobs=120, mean_interarrival_s=1200, seed=0, multi_gpu=True)
    out = tmp_path / "gen.trace"
    write_gavel_trace(out, generate_trace(config, table))
    assert out.read_bytes() == SHIPPED.read_bytes()


@pytest.mark.parametrize("durations", ["gavel", "loguniform", "philly"])
def test_same_seed_same_trace_other_seed_other_trace(
    table: ThroughputTable, philly: PhillyDistribution, durations: str
) -> None:
    def make(seed: int) -> list[object]:
        config = GeneratorConfig(
            num_jobs=50,
            mean_interarrival_s=600,
            seed=seed,
            multi_gpu=True,
            multi_priority=True,
            durations=durations,  # type: ignore[arg-type]
        )
        return list(generate_trace(config, table, philly))

    assert make(7) == make(7)
    assert make(7) != make(8)


def test_scale_factor_shares_follow_gavels_rule(table: ThroughputTable) -> None:
    jobs = generate_trace(
        GeneratorConfig(num_jobs=20_000, mean_interarrival_s=60, seed=3, multi_gpu=True), table
    )
    distributed = [j for j in jobs if j.job_type in DISTRIBUTED]
    assert all(j.scale_factor == 1 for j in jobs if j.job_type not in DISTRIBUTED)
    shares = Counter(j.scale_factor for j in distributed)
    n = len(distributed)
    assert set(shares) == {1, 2, 4}
    # Gavel: U in [0.7, 0.8] -> 2, U >= 0.8 -> 4; a 4-sigma band around the expected share
    for factor, expected in ((1, 0.7), (2, 0.1), (4, 0.2)):
        sigma = math.sqrt(expected * (1 - expected) / n)
        assert abs(shares[factor] / n - expected) < 4 * sigma, factor
    # the job type is uniform over Gavel's 26-entry table: 19 of them are distributed
    expected_distributed = len(DISTRIBUTED) / len(GAVEL_JOB_TABLE)
    sigma = math.sqrt(expected_distributed * (1 - expected_distributed) / len(jobs))
    assert abs(n / len(jobs) - expected_distributed) < 4 * sigma


def test_without_multi_gpu_every_job_is_single_gpu(
    table: ThroughputTable, philly: PhillyDistribution
) -> None:
    for durations in ("gavel", "philly"):
        config = GeneratorConfig(
            num_jobs=500,
            mean_interarrival_s=60,
            durations=durations,
        )
        assert {j.scale_factor for j in generate_trace(config, table, philly)} == {1}


def test_poisson_interarrival_mean_and_spread(table: ThroughputTable) -> None:
    config = GeneratorConfig(
        num_jobs=20_001, mean_interarrival_s=1200, seed=5, whole_second_arrivals=False
    )
    arrivals = [j.arrival_s for j in generate_trace(config, table)]
    assert arrivals[0] == 0
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(gaps) >= 0
    # exponential gaps: mean = sd = lam; the mean's standard error is lam / sqrt(n)
    assert abs(statistics.fmean(gaps) - 1200) < 4 * 1200 / math.sqrt(len(gaps))
    assert statistics.stdev(gaps) == pytest.approx(1200, rel=0.05)


def test_whole_second_arrivals_truncate_like_gavel(table: ThroughputTable) -> None:
    exact = generate_trace(
        GeneratorConfig(num_jobs=200, mean_interarrival_s=77.7, whole_second_arrivals=False), table
    )
    whole = generate_trace(GeneratorConfig(num_jobs=200, mean_interarrival_s=77.7), table)
    assert [j.arrival_s for j in whole] == [float(math.floor(j.arrival_s)) for j in exact]


def test_gavel_durations_are_whole_hours_on_the_reference_gpu(table: ThroughputTable) -> None:
    jobs = generate_trace(
        GeneratorConfig(num_jobs=2_000, mean_interarrival_s=60, multi_gpu=True), table
    )
    hours: Counter[int] = Counter()
    for job in jobs:
        rate = table.rate(job.job_type, "v100", job.scale_factor)
        duration_h = job.total_steps / rate / 3600
        nearest = round(duration_h)
        assert nearest in (1, 2, 3, 4)
        # int() truncation loses less than one step
        assert 0 <= nearest * 3600 * rate - job.total_steps < 1 + 1e-6 * job.total_steps
        hours[nearest] += 1
    assert all(count > 2_000 / 4 * 0.8 for count in hours.values())


def test_loguniform_durations_span_gavels_ranges(table: ThroughputTable) -> None:
    jobs = generate_trace(
        GeneratorConfig(num_jobs=5_000, mean_interarrival_s=60, durations="loguniform"), table
    )
    minutes = [j.total_steps / table.rate(j.job_type, "v100", 1) / 60 for j in jobs]
    assert min(minutes) >= 10**1.5 * 0.99
    assert max(minutes) <= 10**4 * 1.01
    long_share = sum(m > 10**3 * 1.001 for m in minutes) / len(minutes)
    assert long_share == pytest.approx(0.2, abs=0.03)


def test_philly_pairs_keep_duration_and_gpu_count(
    table: ThroughputTable, philly: PhillyDistribution
) -> None:
    config = GeneratorConfig(
        num_jobs=5_000, mean_interarrival_s=60, multi_gpu=True, durations="philly"
    )
    jobs = generate_trace(config, table, philly)
    pairs = set(zip(philly.durations_s, philly.num_gpus, strict=True))
    for job in jobs[:300]:
        rate = table.rate(job.job_type, "v100", job.scale_factor)
        matches = [
            d
            for d, g in pairs
            if g == job.scale_factor and abs(int(rate * d) - job.total_steps) <= 1
        ]
        assert matches, job
    # Philly GPU counts are drawn first; the job type is then one that can run at that scale
    assert all(j.job_type in DISTRIBUTED for j in jobs if j.scale_factor > 1)
    share = Counter(j.scale_factor for j in jobs)
    counts = Counter(philly.num_gpus)
    for gpus, count in counts.items():
        assert share[gpus] / len(jobs) == pytest.approx(count / len(philly.num_gpus), abs=0.02)


def test_philly_gpu_counts_map_to_nearest_measured(table: ThroughputTable) -> None:
    odd = PhillyDistribution(durations_s=(3600.0,), num_gpus=(3,))
    base = {"num_jobs": 200, "mean_interarrival_s": 60, "multi_gpu": True}
    nearest = generate_trace(GeneratorConfig(**base, durations="philly"), table, odd)  # type: ignore[arg-type]
    assert {j.scale_factor for j in nearest} == {2}  # 3 is as near 2 as 4; ties go down
    kept = generate_trace(
        GeneratorConfig(**base, durations="philly", philly_gpus="keep"),  # type: ignore[arg-type]
        table,
        odd,
    )
    assert {j.scale_factor for j in kept} == {3}


def test_multi_priority_gives_a_fifth_weight_5_and_changes_nothing_else(
    table: ThroughputTable,
) -> None:
    plain = generate_trace(GeneratorConfig(num_jobs=10_000, mean_interarrival_s=60), table)
    mixed = generate_trace(
        GeneratorConfig(num_jobs=10_000, mean_interarrival_s=60, multi_priority=True), table
    )
    assert {j.priority_weight for j in plain} == {1.0}
    assert {j.priority_weight for j in mixed} == {1.0, 5.0}
    high = sum(j.priority_weight == 5.0 for j in mixed) / len(mixed)
    assert high == pytest.approx(0.2, abs=4 * math.sqrt(0.2 * 0.8 / len(mixed)))
    assert [(j.job_type, j.total_steps, j.arrival_s) for j in plain] == [
        (j.job_type, j.total_steps, j.arrival_s) for j in mixed
    ]


def test_round_trip_through_the_trace_file(
    table: ThroughputTable, philly: PhillyDistribution, tmp_path: Path
) -> None:
    config = GeneratorConfig(
        num_jobs=300,
        mean_interarrival_s=321.5,
        seed=11,
        multi_gpu=True,
        multi_priority=True,
        durations="philly",
        whole_second_arrivals=False,
    )
    jobs = generate_trace(config, table, philly)
    path = tmp_path / "philly.trace"
    write_gavel_trace(path, jobs)
    assert load_gavel_trace(path) == jobs


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"num_jobs": 0}, "num_jobs"),
        ({"num_jobs": 2.5}, "num_jobs"),
        ({"mean_interarrival_s": 0}, "mean_interarrival_s"),
        ({"mean_interarrival_s": -5}, "mean_interarrival_s"),
        ({"mean_interarrival_s": math.nan}, "mean_interarrival_s"),
        ({"durations": "weibull"}, "durations"),
        ({"philly_gpus": "round"}, "philly_gpus"),
        ({"min_duration_h": 0}, "min_duration_h"),
        ({"max_duration_h": 0.5}, "max_duration_h"),
        ({"num_durations": 0}, "num_durations"),
    ],
)
def test_bad_config_names_the_field(kwargs: dict[str, object], field: str) -> None:
    values: dict[str, object] = {"num_jobs": 10, "mean_interarrival_s": 60.0, **kwargs}
    with pytest.raises(InvalidRequestError, match=field):
        GeneratorConfig(**values)  # type: ignore[arg-type]


def test_philly_source_without_distribution_and_unknown_gpu(table: ThroughputTable) -> None:
    with pytest.raises(InvalidRequestError, match="PhillyDistribution"):
        generate_trace(
            GeneratorConfig(num_jobs=1, mean_interarrival_s=1, durations="philly"), table
        )
    with pytest.raises(InvalidRequestError, match="reference_gpu='a100'"):
        generate_trace(
            GeneratorConfig(num_jobs=1, mean_interarrival_s=1, reference_gpu="a100"), table
        )


def test_table_without_gavel_job_types_is_refused() -> None:
    small = ThroughputTable({("A3C", 1): {"v100": 10.0}}, source="small.json")
    with pytest.raises(InvalidRequestError, match=r"small\.json lacks Gavel job type"):
        generate_trace(GeneratorConfig(num_jobs=1, mean_interarrival_s=1), small)


def test_loads_the_shipped_philly_distribution(philly: PhillyDistribution) -> None:
    assert len(philly.durations_s) == 33_192
    assert set(philly.num_gpus) <= {1, 2, 4, 8}
    assert min(philly.durations_s) > 0


@pytest.mark.parametrize(
    ("rows", "line", "field"),
    [
        (["duration_s,num_gpus", "100,1", "abc,1"], 3, "field duration_s='abc' is not a number"),
        (["duration_s,num_gpus", "-5,1"], 2, "field duration_s='-5' must be"),
        (["duration_s,num_gpus", "inf,1"], 2, "field duration_s='inf' must be"),
        (["duration_s,num_gpus", "100,0"], 2, "field num_gpus='0' must be an integer >= 1"),
        (["duration_s,num_gpus", "100,1.5"], 2, "field num_gpus='1.5' must be an integer"),
        (["duration_s,num_gpus", "100,x"], 2, "field num_gpus='x' is not a number"),
        (["duration_s,num_gpus", "100"], 2, "field num_gpus is missing"),
        (["duration,num_gpus", "100,1"], 1, "header lacks column(s) duration_s"),
    ],
)
def test_bad_philly_rows_name_file_line_and_field(
    tmp_path: Path, rows: list[str], line: int, field: str
) -> None:
    path = tmp_path / "philly.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(TraceFormatError) as error:
        load_philly_distribution(path)
    message = str(error.value)
    assert message.startswith(f"{path}:{line}:"), message
    assert field in message


def test_empty_or_missing_philly_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("duration_s,num_gpus\n", encoding="utf-8")
    with pytest.raises(TraceFormatError, match="no rows"):
        load_philly_distribution(empty)
    with pytest.raises(TraceFormatError, match="cannot open"):
        load_philly_distribution(tmp_path / "absent.csv")


def test_command_line_writes_the_same_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli.trace"
    argv = ["--num-jobs", "120", "--lam", "1200", "--seed", "0", "--multi-gpu", "--out", str(out)]
    assert main([*argv, "--throughputs", str(GAVEL_DATA / "simulation_throughputs.json")]) == 0
    assert out.read_bytes() == SHIPPED.read_bytes()
    assert main(["--num-jobs", "0", "--lam", "1", "--out", str(out)]) == 2
    assert "num_jobs=0" in capsys.readouterr().err
