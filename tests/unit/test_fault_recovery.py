"""Fault isolation and recovery decisions (pure core)."""

from __future__ import annotations

import pytest

from voltpack.scheduler.fault_recovery import (
    RESTART_ALL,
    FaultScope,
    GangShape,
    RecoveryKind,
    RecoveryPolicy,
    RestartBudget,
    isolation_for,
    recovery_for,
    restart_workers,
)


def test_a_gpu_fault_cordons_the_gpu_or_the_node_by_policy() -> None:
    gpu_only = isolation_for(FaultScope.GPU, 3, 5, RecoveryPolicy())
    assert gpu_only.gpus == {(3, 5)} and not gpu_only.nodes
    assert gpu_only.covers(3, 5) and not gpu_only.covers(3, 4)
    whole = isolation_for(FaultScope.GPU, 3, 5, RESTART_ALL)
    assert whole.nodes == {3} and whole.covers(3, 0)


def test_a_host_fault_cordons_the_node_and_a_software_fault_nothing() -> None:
    assert isolation_for(FaultScope.NODE, 1, 2, RecoveryPolicy()).nodes == {1}
    software = isolation_for(FaultScope.JOB, 1, 2, RecoveryPolicy())
    assert not software.nodes and not software.gpus


def test_an_elastic_gang_shrinks_only_while_it_keeps_its_minimum() -> None:
    gang = GangShape(workers=8, full_workers=8, min_workers=6)
    policy = RecoveryPolicy()
    assert recovery_for(FaultScope.GPU, gang, 1, policy) is RecoveryKind.SHRINK
    assert recovery_for(FaultScope.NODE, gang, 2, policy) is RecoveryKind.SHRINK
    assert recovery_for(FaultScope.GPU, gang, 3, policy) is RecoveryKind.RESTART
    assert recovery_for(FaultScope.JOB, gang, 1, policy) is RecoveryKind.RESTART
    assert recovery_for(FaultScope.GPU, gang, 1, RESTART_ALL) is RecoveryKind.RESTART
    rigid = GangShape(workers=8, full_workers=8, min_workers=8)
    assert recovery_for(FaultScope.GPU, rigid, 1, policy) is RecoveryKind.RESTART


def test_restart_size_is_full_or_the_most_that_fit_above_the_minimum() -> None:
    gang = GangShape(workers=0, full_workers=8, min_workers=6)
    assert restart_workers(gang, 10, RecoveryPolicy()) == 8
    assert restart_workers(gang, 7, RecoveryPolicy()) == 7
    assert restart_workers(gang, 5, RecoveryPolicy()) is None
    assert restart_workers(gang, 7, RESTART_ALL) is None


def test_restart_budget_backs_off_and_caps_restarts_in_the_window() -> None:
    budget = RestartBudget(RecoveryPolicy(max_restarts=3, budget_window_s=3600, backoff_s=60))
    assert budget.next_allowed_s("g", 0.0) == 0.0
    budget.record("g", 0.0)
    assert budget.next_allowed_s("g", 10.0) == 60.0
    budget.record("g", 60.0)
    assert budget.next_allowed_s("g", 60.0) == 180.0  # backoff doubles
    budget.record("g", 180.0)
    assert budget.next_allowed_s("g", 200.0) == 3600.0  # three in the window: wait it out
    with pytest.raises(ValueError, match="over its budget"):
        budget.record("g", 200.0)
    assert budget.count("g", 3600.5) == 2
    assert budget.next_allowed_s("other", 5.0) == 5.0


def test_bad_policy_and_gang_values_are_refused() -> None:
    with pytest.raises(ValueError, match="max_restarts"):
        RecoveryPolicy(max_restarts=0)
    with pytest.raises(ValueError, match="min_workers"):
        GangShape(workers=4, full_workers=4, min_workers=5)
