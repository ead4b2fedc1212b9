"""Round-based heterogeneous simulation: completion, lower bounds, determinism, Gavel fidelity."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.model.errors import InvalidRequestError
from voltpack.perf.throughput_table import ThroughputTable, load_gavel_throughputs
from voltpack.policies.hetero.registry import allocation_policy_names, make_allocation_policy
from voltpack.sim.datasets import data_dir
from voltpack.sim.hetero import RoundConfig, RoundSimulator, SimulationResult, summarize
from voltpack.sim.traces.gavel import GavelJob, load_gavel_trace

GAVEL = data_dir() / "gavel"
ANCHOR_CLUSTER = {"v100": 8, "p100": 8, "k80": 8}
GAVEL_AVG_JCT_S = {"max_min_fairness": 13_535.0, "max_min_fairness_perf": 10_471.0}
GAVEL_P99_JCT_S = {"max_min_fairness_perf": 28_200.0}
GAVEL_ROUNDS = RoundConfig(round_s=360, gavel_compatible=True)
VOLTPACK_ROUNDS = RoundConfig(round_s=360, gavel_compatible=False)
WALL_CLOCK_KEYS = {"solve_median_s"}
"""summarize() keys that time the solver; everything else is simulated and deterministic."""

# Job types with a positive throughput on every model and worker count used below.
SMALL_TYPES = (
    "ResNet-18 (batch size 32)",
    "LM (batch size 20)",
    "A3C",
    "CycleGAN",
    "Transformer (batch size 64)",
)


@pytest.fixture(scope="module")
def table() -> ThroughputTable:
    return load_gavel_throughputs(GAVEL / "simulation_throughputs.json")


@pytest.fixture(scope="module")
def anchor() -> list[GavelJob]:
    return load_gavel_trace(GAVEL / "generated" / "gavel_gen_120jobs_lam1200_seed0.trace")


_RUNS: dict[tuple[str, RoundConfig], SimulationResult] = {}


def run(
    table: ThroughputTable,
    trace: Sequence[GavelJob],
    policy: str,
    config: RoundConfig,
    cluster: dict[str, int] | None = None,
) -> SimulationResult:
    sim = RoundSimulator(make_allocation_policy(policy), table, cluster or ANCHOR_CLUSTER, config)
    return sim.run(trace)


def anchor_run(
    table: ThroughputTable, anchor: list[GavelJob], policy: str, config: RoundConfig
) -> SimulationResult:
    """One run of the anchor trace on 8:8:8, shared by the tests of this module (per process)."""
    key = (policy, config)
    if key not in _RUNS:
        _RUNS[key] = run(table, anchor, policy, config)
    return _RUNS[key]


def best_duration_s(table: ThroughputTable, job: GavelJob, cluster: dict[str, int]) -> float:
    best = max(table.rate(job.job_type, model, job.scale_factor) for model in cluster)
    return job.total_steps / best


def assert_complete_and_bounded(
    table: ThroughputTable,
    trace: Sequence[GavelJob],
    result: SimulationResult,
    cluster: dict[str, int],
) -> None:
    assert [r.index for r in result.jobs] == list(range(len(trace)))
    for r, job in zip(result.jobs, trace, strict=True):
        assert r.job_type == job.job_type
        assert r.scale_factor == job.scale_factor
        assert r.arrival_s == job.arrival_s
        assert r.finish_s <= result.makespan_s
        assert r.jct_s >= best_duration_s(table, job, cluster) * (1 - 1e-9), r
    assert 0 < result.utilization <= 1 + 1e-9


def small_trace(
    table: ThroughputTable, spec: Sequence[tuple[str, int, float, float]]
) -> list[GavelJob]:
    """(job type, scale factor, arrival s, hours on a V100) -> jobs."""
    return [
        GavelJob(
            job_type=job_type,
            total_steps=max(1, int(table.rate(job_type, "v100", sf) * hours * 3600)),
            scale_factor=sf,
            arrival_s=arrival,
        )
        for job_type, sf, arrival, hours in spec
    ]


# --- the anchor trace -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "config"),
    [
        ("max_min_fairness", GAVEL_ROUNDS),
        ("max_min_fairness_perf", GAVEL_ROUNDS),
        ("shortest_remaining_perf", VOLTPACK_ROUNDS),
        ("fifo", GAVEL_ROUNDS),
        ("fifo_perf", VOLTPACK_ROUNDS),
    ],
)
def test_every_anchor_job_completes_once_no_faster_than_its_best_model(
    table: ThroughputTable, anchor: list[GavelJob], policy: str, config: RoundConfig
) -> None:
    result = anchor_run(table, anchor, policy, config)
    assert len(result.jobs) == 120
    assert_complete_and_bounded(table, anchor, result, ANCHOR_CLUSTER)
    assert result.policy == policy
    assert result.gpu_count == 24
    assert result.first_arrival_s == anchor[0].arrival_s


@pytest.mark.parametrize("policy", ["max_min_fairness", "max_min_fairness_perf"])
def test_gavel_compatible_avg_jct_within_5_percent_of_gavel(
    table: ThroughputTable, anchor: list[GavelJob], policy: str
) -> None:
    summary = summarize(anchor_run(table, anchor, policy, GAVEL_ROUNDS))
    published = GAVEL_AVG_JCT_S[policy]
    assert summary["jobs"] == 120
    assert abs(summary["avg_jct_s"] / published - 1) <= 0.05, summary["avg_jct_s"]


def test_voltpack_mechanism_beats_gavels_heterogeneity_aware_las(
    table: ThroughputTable, anchor: list[GavelJob]
) -> None:
    summary = summarize(anchor_run(table, anchor, "shortest_remaining_perf", VOLTPACK_ROUNDS))
    assert summary["avg_jct_s"] <= 0.9 * GAVEL_AVG_JCT_S["max_min_fairness_perf"]
    assert summary["p99_jct_s"] <= GAVEL_P99_JCT_S["max_min_fairness_perf"]


@pytest.mark.parametrize("policy", ["shortest_remaining_perf", "max_sum_throughput_perf"])
def test_restart_cost_never_lowers_average_jct(
    table: ThroughputTable, anchor: list[GavelJob], policy: str
) -> None:
    free = anchor_run(table, anchor, policy, VOLTPACK_ROUNDS)
    costly = run(
        table, anchor, policy, RoundConfig(round_s=360, gavel_compatible=False, restart_cost_s=60)
    )
    assert_complete_and_bounded(table, anchor, costly, ANCHOR_CLUSTER)
    assert summarize(costly)["avg_jct_s"] >= summarize(free)["avg_jct_s"]
    assert summarize(costly)["restarts"] > 0


def test_summary_fields(table: ThroughputTable, anchor: list[GavelJob]) -> None:
    result = anchor_run(table, anchor, "max_min_fairness_perf", GAVEL_ROUNDS)
    summary = summarize(result)
    jcts = sorted(r.jct_s for r in result.jobs)
    assert summary["avg_jct_s"] == pytest.approx(sum(jcts) / len(jcts))
    assert jcts[0] <= summary["p99_jct_s"] <= jcts[-1]
    assert summary["makespan_s"] == result.makespan_s == max(r.finish_s for r in result.jobs)
    assert summary["preemptions"] == sum(r.preemptions for r in result.jobs)
    assert summary["solves"] == len(result.solve_times_s) > 0
    assert 0 < summary["utilization"] <= 1
    assert summary["ftf_rho_median"] <= summary["ftf_rho_p90"] <= summary["ftf_rho_max"]


# --- small traces ---------------------------------------------------------------------------

CONTENDED = (
    ("ResNet-18 (batch size 32)", 1, 0.0, 1.0),
    ("LM (batch size 20)", 1, 0.0, 1.5),
    ("A3C", 2, 100.0, 0.5),
    ("CycleGAN", 1, 400.0, 1.0),
    ("Transformer (batch size 64)", 1, 800.0, 0.75),
    ("ResNet-18 (batch size 32)", 2, 1200.0, 0.5),
)
SMALL_CLUSTER = {"v100": 2, "p100": 1, "k80": 2}


@pytest.mark.parametrize("gavel_compatible", [True, False])
@pytest.mark.parametrize(
    "policy",
    [
        "fifo",
        "max_min_fairness",
        "max_min_fairness_perf",
        "max_sum_throughput",
        "shortest_remaining_perf",
    ],
)
def test_same_config_twice_gives_the_same_results(
    table: ThroughputTable, policy: str, gavel_compatible: bool
) -> None:
    trace = small_trace(table, CONTENDED)
    config = RoundConfig(round_s=360, gavel_compatible=gavel_compatible, restart_cost_s=10, seed=3)
    first = run(table, trace, policy, config, SMALL_CLUSTER)
    second = run(table, trace, policy, config, SMALL_CLUSTER)
    assert first.jobs == second.jobs
    assert first.makespan_s == second.makespan_s
    one, two = summarize(first), summarize(second)
    for key in set(one) - WALL_CLOCK_KEYS:
        assert one[key] == two[key] or (math.isnan(one[key]) and math.isnan(two[key])), key


@pytest.mark.parametrize("policy", ["fifo", "max_sum_throughput"])
def test_the_same_simulator_run_twice_gives_the_same_results(
    table: ThroughputTable, anchor: list[GavelJob], policy: str
) -> None:
    trace = anchor[:40]
    sim = RoundSimulator(
        make_allocation_policy(policy), table, {"v100": 4, "p100": 4, "k80": 4}, GAVEL_ROUNDS
    )
    assert sim.run(trace).jobs == sim.run(trace).jobs


@pytest.mark.parametrize("gavel_compatible", [True, False])
@pytest.mark.parametrize(
    "policy", ["max_min_fairness", "max_min_fairness_perf", "shortest_remaining_perf"]
)
def test_non_preemptible_job_is_never_preempted_once_started(
    table: ThroughputTable, policy: str, gavel_compatible: bool
) -> None:
    # Four long one-GPU jobs share one V100: a fair policy rotates them every round.
    trace = small_trace(table, [("ResNet-18 (batch size 32)", 1, 0.0, 1.0)] * 4)
    cluster = {"v100": 1}
    base = RoundConfig(round_s=360, gavel_compatible=gavel_compatible)
    preempted = run(table, trace, policy, base, cluster)
    pinned = RoundConfig(
        round_s=360, gavel_compatible=gavel_compatible, non_preemptible=frozenset({0, 2})
    )
    result = run(table, trace, policy, pinned, cluster)
    assert_complete_and_bounded(table, trace, result, cluster)
    if policy.startswith("max_min"):
        assert preempted.jobs[0].preemptions > 0  # the pinning is what keeps job 0 running
    assert result.jobs[0].preemptions == 0
    assert result.jobs[2].preemptions == 0


@settings(max_examples=20, deadline=None)
@given(
    spec=st.lists(
        st.tuples(
            st.sampled_from(SMALL_TYPES),
            st.sampled_from([1, 1, 1, 2, 4]),
            st.floats(0, 7200, allow_nan=False),
            st.floats(0.05, 1.5, allow_nan=False),
        ),
        min_size=1,
        max_size=8,
    ).map(lambda jobs: sorted(jobs, key=lambda j: j[2])),
    cluster=st.fixed_dictionaries(
        {"v100": st.integers(0, 4), "p100": st.integers(0, 4), "k80": st.integers(4, 6)}
    ),
    policy=st.sampled_from(allocation_policy_names()),
    restart_cost_s=st.sampled_from([0.0, 30.0]),
    pinned=st.frozensets(st.integers(0, 7), max_size=3),
    gavel_compatible=st.booleans(),
)
def test_random_small_traces_complete_with_bounded_jcts(
    table: ThroughputTable,
    spec: list[tuple[str, int, float, float]],
    cluster: dict[str, int],
    policy: str,
    restart_cost_s: float,
    pinned: frozenset[int],
    gavel_compatible: bool,
) -> None:
    trace = small_trace(table, spec)
    config = RoundConfig(
        round_s=360,
        gavel_compatible=gavel_compatible,
        restart_cost_s=restart_cost_s,
        non_preemptible=pinned,
    )
    result = run(table, trace, policy, config, cluster)
    assert_complete_and_bounded(table, trace, result, cluster)
    for job in result.jobs:
        if job.index in pinned:
            # Once started it keeps its GPUs: never preempted, never moved.
            assert job.preemptions == 0, job
            assert job.restarts == 0, job


@pytest.mark.parametrize("policy", ["fifo", "max_min_fairness", "max_min_fairness_perf"])
def test_gavel_compatible_run_survives_an_idle_cluster_before_reallocation(
    table: ThroughputTable, policy: str
) -> None:
    # Two 300 s jobs on one V100, arriving at 100 s and 200 s (the default RoundConfig).
    trace = small_trace(table, [("A3C", 1, 100.0, 300 / 3600), ("A3C", 1, 200.0, 300 / 3600)])
    result = run(table, trace, policy, RoundConfig(round_s=360), {"v100": 1})
    assert_complete_and_bounded(table, trace, result, {"v100": 1})


# --- invalid requests -----------------------------------------------------------------------


def test_job_larger_than_every_model_pool_is_an_invalid_request(table: ThroughputTable) -> None:
    trace = small_trace(table, [("A3C", 1, 0.0, 0.1), ("LM (batch size 20)", 8, 10.0, 0.1)])
    sim = RoundSimulator(make_allocation_policy("max_min_fairness"), table, {"v100": 4, "k80": 6})
    with pytest.raises(InvalidRequestError, match=r"job 1 \(LM \(batch size 20\)\) needs 8 GPUs"):
        sim.run(trace)


@pytest.mark.parametrize(
    "cluster", [{}, {"v100": 0}, {"v100": 0, "k80": 0}, {"v100": 4, "k80": -1}]
)
def test_empty_or_negative_cluster_is_an_invalid_request(
    table: ThroughputTable, cluster: dict[str, int]
) -> None:
    with pytest.raises(InvalidRequestError, match="at least one GPU"):
        RoundSimulator(make_allocation_policy("fifo"), table, cluster)


def test_job_that_cannot_run_on_any_model_is_an_invalid_request(table: ThroughputTable) -> None:
    # Gavel measured ResNet-50 (batch size 128) on 2 K80s at 0 steps/s.
    trace = [GavelJob("ResNet-50 (batch size 128)", 100, 2, 0.0)]
    sim = RoundSimulator(make_allocation_policy("max_min_fairness"), table, {"k80": 4})
    with pytest.raises(InvalidRequestError):
        sim.run(trace)
