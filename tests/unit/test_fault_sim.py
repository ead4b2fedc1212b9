"""The fault simulator: Llama 3's catalog, invariants of every run, and the policies' effect."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.model.errors import TraceFormatError
from voltpack.scheduler.fault_recovery import RESTART_ALL, FaultScope, RecoveryPolicy
from voltpack.sim.fault_jobs import FaultWorkload, fault_jobs
from voltpack.sim.faults import (
    Fault,
    FaultJob,
    FaultSimConfig,
    FaultSimResult,
    FaultSimulation,
    draw_faults,
    simulate_faults,
)
from voltpack.sim.traces.failures import (
    LLAMA3_FAILURES_PER_GPU_DAY,
    load_failure_catalog,
)
from voltpack.sim.traces.gavel_generator import PhillyDistribution

PHILLY = PhillyDistribution(durations_s=(3600.0, 7200.0, 20_000.0), num_gpus=(1, 4, 8))


def test_llama3_catalog_counts_and_rate() -> None:
    catalog = load_failure_catalog()
    assert catalog.total == 419
    assert catalog.share(FaultScope.GPU) == pytest.approx(268 / 419)
    assert catalog.share(FaultScope.JOB) == pytest.approx(63 / 419)
    assert pytest.approx(4.736e-4, rel=1e-3) == LLAMA3_FAILURES_PER_GPU_DAY


def test_a_bad_catalog_row_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("component,category,interruptions,scope\nGPU,GPU,3,rack\n")
    with pytest.raises(TraceFormatError, match=r"bad.csv:2: scope 'rack'"):
        load_failure_catalog(path)


def test_faults_follow_the_rate_and_the_same_seed_gives_the_same_faults() -> None:
    config = FaultSimConfig(nodes=128, days=300)
    catalog = load_failure_catalog()
    faults = draw_faults(config, catalog, np.random.default_rng(1))
    expected = LLAMA3_FAILURES_PER_GPU_DAY * 1024 * 300
    assert abs(len(faults) - expected) < 4 * expected**0.5
    assert faults == draw_faults(config, catalog, np.random.default_rng(1))


def one_gang_run(
    policy: RecoveryPolicy, scope: FaultScope
) -> tuple[FaultSimulation, FaultSimResult]:
    """One 4-worker gang (elastic to 3) on 4 nodes, one fault on node 0 after 90 minutes."""
    config = FaultSimConfig(nodes=4, days=1, checkpoint_interval_s=3600)
    job = FaultJob("gang", 0.0, 4, 8, 10 * 86_400, 3, large=True)
    fault = Fault(5400.0, 0, 2, "test", scope)
    simulation = FaultSimulation(config, [job], [fault], policy, "test")
    return simulation, simulation.run()


def test_restart_all_rolls_back_to_the_checkpoint_and_waits_for_a_full_size() -> None:
    simulation, result = one_gang_run(RESTART_ALL, FaultScope.GPU)
    assert result.restarts == 1
    # it starts running at 600 s (the start-up cost), checkpoints at 4,200 s, and the fault at
    # 5,400 s loses the 20 minutes since, x 32 GPUs
    assert result.rollback_gpu_h == pytest.approx(20 / 60 * 32)
    # node 0 is cordoned for a day: the gang cannot come back at full size within the run
    assert [r.kind for r in simulation.log] == ["place", "cordon"]


def test_voltpack_shrinks_in_place_without_rollback() -> None:
    simulation, result = one_gang_run(RecoveryPolicy(), FaultScope.GPU)
    assert result.restarts == 0 and result.shrinks == 1
    assert result.rollback_gpu_h == 0
    cordon = next(r for r in simulation.log if r.kind == "cordon")
    assert cordon.workers == ((0, (2,)),)
    assert simulation.jobs[0].workers and len(simulation.jobs[0].workers) == 3


def test_a_software_fault_restarts_the_gang_where_it_is() -> None:
    simulation, result = one_gang_run(RecoveryPolicy(), FaultScope.JOB)
    assert result.restarts == 1 and result.shrinks == 0
    assert [r.kind for r in simulation.log] == ["place", "restart"]
    assert simulation.log[1].total_workers == 4


def check_invariants(simulation: FaultSimulation) -> None:
    cordons = [r for r in simulation.log if r.kind == "cordon"]
    minimum = {j.spec.name: j.spec.min_workers for j in simulation.jobs}
    restarts: dict[str, list[float]] = defaultdict(list)
    policy = simulation.policy
    for record in simulation.log:
        if record.kind == "cordon":
            continue
        for node, gpus in record.workers:  # a cordoned GPU never receives a worker
            for cordon in cordons:
                if cordon.time_s <= record.time_s < cordon.until_s:
                    for c_node, c_gpus in cordon.workers:
                        assert not (c_node == node and set(c_gpus) & set(gpus)), (record, cordon)
        # a gang is never left below its minimum by a (re-)placement
        assert record.total_workers >= minimum[record.job], record
        if record.kind in ("restart", "grow"):
            restarts[record.job].append(record.time_s)
    for times in restarts.values():  # the churn budget is never exceeded
        for t in times:
            in_window = [u for u in times if t - policy.budget_window_s < u <= t]
            assert len(in_window) <= policy.max_restarts


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rate_scale=st.sampled_from([20.0, 100.0]),
    isolation=st.sampled_from(["gpu", "node"]),
    shrink=st.booleans(),
)
def test_runs_keep_their_invariants(
    seed: int, rate_scale: float, isolation: str, shrink: bool
) -> None:
    config = FaultSimConfig(
        nodes=12, days=3, failures_per_gpu_day=LLAMA3_FAILURES_PER_GPU_DAY * rate_scale
    )
    policy = RecoveryPolicy(isolation=isolation, shrink=shrink)  # type: ignore[arg-type]
    jobs = fault_jobs(config, FaultWorkload(large_gpus=(48, 16)), PHILLY, seed)
    faults = draw_faults(config, load_failure_catalog(), np.random.default_rng(seed))
    simulation = FaultSimulation(config, jobs, faults, policy, "p")
    result = simulation.run()
    check_invariants(simulation)
    assert 0 < result.useful_gpu_h <= result.allocated_gpu_h + 1e-6


def test_voltpack_loses_less_than_restart_all_at_a_high_failure_rate() -> None:
    config = FaultSimConfig(nodes=32, days=10, failures_per_gpu_day=LLAMA3_FAILURES_PER_GPU_DAY * 5)
    lost = {"restart-all": 0.0, "voltpack": 0.0}
    for seed in range(3):
        jobs = fault_jobs(config, FaultWorkload(large_gpus=(128, 64)), PHILLY, seed)
        for name, policy in (("restart-all", RESTART_ALL), ("voltpack", RecoveryPolicy())):
            lost[name] += simulate_faults(config, jobs, policy, name, seed).lost_gpu_h
    assert lost["voltpack"] < lost["restart-all"]
