"""The soak's invariant checkers (tests/soak/invariants.py) on hand-made snapshots: each fires
on what it must catch, and a fault window excuses a partial gang until its grace is over."""

from __future__ import annotations

from typing import Any

from tests.soak.invariants import Checker, FaultLog, Limits
from tests.soak.world import Snapshot


def pod(name: str, group: str, members: int, node: str | None, gpus: str = "") -> dict[str, Any]:
    annotations = {"voltpack.io/pod-group": group, "voltpack.io/min-members": str(members)}
    if gpus:
        annotations["voltpack.io/gpu-indices"] = gpus
    return {
        "metadata": {"name": name, "namespace": "soak", "uid": f"uid-{name}",
                     "annotations": annotations},
        "spec": {"nodeName": node,
                 "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running" if node else "Pending"},
    }  # fmt: skip


def checker(faults: FaultLog | None = None) -> Checker:
    found = Checker(faults or FaultLog(), Limits(grace_s=6.0), set)
    found.capacity = {"n1": 8, "n2": 8}
    return found


def snapshot(t: float, pods: list[dict[str, Any]], jobs: list[Any] | None = None) -> Snapshot:
    return Snapshot(t, pods, jobs or [], [], [])


def test_a_gang_partly_bound_past_the_grace_is_a_violation_and_a_whole_one_is_not() -> None:
    check = checker()
    half = [pod("a-0", "a", 2, "n1", "0"), pod("a-1", "a", 2, None)]
    whole = [pod("b-0", "b", 2, "n1", "1"), pod("b-1", "b", 2, "n2", "0")]
    check.on_snapshot(snapshot(1.0, half + whole))
    check.on_snapshot(snapshot(6.5, half + whole))
    assert check.violations == []  # within the grace: binding a gang takes a few requests
    check.on_snapshot(snapshot(7.5, half + whole))
    assert [(v.invariant, v.subject) for v in check.violations] == [("partial-gang", "soak/a")]


def test_a_fault_excuses_a_partial_gang_until_its_grace_after_the_fault_is_over() -> None:
    faults = FaultLog()
    fault = faults.begin("binding-5xx", 0.0)
    check = checker(faults)
    half = [pod("a-0", "a", 2, "n1", "0"), pod("a-1", "a", 2, None)]
    check.on_snapshot(snapshot(1.0, half))
    check.on_snapshot(snapshot(30.0, half))
    assert check.violations == []
    fault.ended_s = 30.0
    check.on_snapshot(snapshot(35.0, half))
    assert check.violations == []
    check.on_snapshot(snapshot(36.5, half))
    assert [v.invariant for v in check.violations] == ["partial-gang"]


def test_a_gpu_given_twice_a_moved_pod_and_a_double_binding_are_violations() -> None:
    check = checker()
    check.on_snapshot(snapshot(1.0, [pod("x", "x", 1, "n1", "3"), pod("y", "y", 1, "n1", "3")]))
    check.on_snapshot(snapshot(2.0, [pod("x", "x", 1, "n2", "3")]))
    check.check_proxy(3.0, {"uid-z": 2, "uid-w": 1})
    assert sorted((v.invariant, v.subject) for v in check.violations) == [
        ("bound-twice", "soak/x"),
        ("bound-twice", "uid-z"),
        ("gpu-given-twice", "n1/gpu3"),
    ]


def test_power_over_budget_past_the_bound_and_a_silent_gpujob_are_violations() -> None:
    check = checker()
    for t in (0.0, 2.0, 4.0, 6.0):
        check.on_power(t, {"r0": 1100.0}, {"r0": 1000.0})
    assert check.violations == []
    check.on_power(8.0, {"r0": 1100.0}, {"r0": 1000.0})
    job = {
        "metadata": {"name": "j", "namespace": "soak"},
        "spec": {},
        "status": {"phase": "Pending"},
    }
    reasoned = {
        "metadata": {"name": "k", "namespace": "soak"}, "spec": {},
        "status": {"phase": "Pending", "conditions": [
            {"type": "Scheduled", "status": "False", "reason": "Unschedulable",
             "message": "no node has 8 free GPUs"}]},
    }  # fmt: skip
    check.on_snapshot(snapshot(0.0, [], [job, reasoned]))
    check.on_snapshot(snapshot(31.0, [], [job, reasoned]))
    assert sorted((v.invariant, v.subject) for v in check.violations) == [
        ("gpujob-no-progress", "soak/j"),
        ("power-over-budget", "r0"),
    ]
