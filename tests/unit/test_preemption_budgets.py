"""Preemption prefers victims whose eviction PodDisruptionBudgets allow, as kube-scheduler does,
and a gang that waits for its earlier victims to terminate preempts no one else."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.unit.builders import gpu_node, snapshot_of
from tests.unit.test_queues import cycle, gang, outcome, queue, run
from voltpack.operator.scheduling.disruption_budgets import budget_violations
from voltpack.operator.scheduling.nominations import awaiting_victims
from voltpack.scheduler.queue_cycle import PendingGang


def test_a_victim_a_budget_protects_is_spared_when_another_makes_room() -> None:
    snapshot = snapshot_of(gpu_node("a", 4, "A100"), gpu_node("b", 4, "A100"))
    # the protected gang started later: without budgets it would be the one evicted
    protected = replace(
        run(snapshot, "protected", "q", 4, node="a", preemptible=True, started_s=500.0),
        budget_violations=4,
    )
    free = run(snapshot, "free", "q", 4, node="b", preemptible=True, started_s=0.0)
    plan = cycle(
        snapshot, {"q": queue()}, [PendingGang(gang("vip", 4), "q", priority=5)], [protected, free]
    )
    assert outcome(plan) == {"vip": True}
    assert [e.gang.name for e in plan.evictions] == ["free"]
    unprotected = replace(protected, budget_violations=0)
    snapshot = snapshot_of(gpu_node("a", 4, "A100"), gpu_node("b", 4, "A100"))
    run(snapshot, "protected", "q", 4, node="a", preemptible=True, started_s=500.0)
    run(snapshot, "free", "q", 4, node="b", preemptible=True, started_s=0.0)
    plan = cycle(
        snapshot,
        {"q": queue()},
        [PendingGang(gang("vip", 4), "q", priority=5)],
        [unprotected, free],
    )
    assert [e.gang.name for e in plan.evictions] == ["protected"]


def test_a_budget_is_violated_only_when_nothing_else_makes_room() -> None:
    snapshot = snapshot_of(gpu_node("a", 4, "A100"))
    protected = replace(run(snapshot, "protected", "q", 4, preemptible=True), budget_violations=4)
    plan = cycle(
        snapshot, {"q": queue()}, [PendingGang(gang("vip", 4), "q", priority=5)], [protected]
    )
    assert [e.gang.name for e in plan.evictions] == ["protected"]


def test_a_gang_awaiting_its_victims_does_not_preempt_again() -> None:
    snapshot = snapshot_of(gpu_node("a", 4, "A100"))
    low = run(snapshot, "low", "q", 4, preemptible=True)
    waiting = PendingGang(gang("vip", 4), "q", priority=5, awaiting_victims="waiting for x")
    plan = cycle(snapshot, {"q": queue()}, [waiting], [low])
    assert outcome(plan) == {"vip": False}
    assert plan.evictions == []
    assert "no preemption: waiting for x" in plan.decisions[0].reason


def pod(name: str, labels: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml", "labels": labels, **extra.pop("meta", {})},
        "spec": extra.pop("spec", {}),
        "status": extra.pop("status", {}),
    }


def budget(selector: dict[str, Any] | None, allowed: int, namespace: str = "ml") -> dict[str, Any]:
    return {
        "metadata": {"name": "pdb", "namespace": namespace},
        "spec": {"selector": selector},
        "status": {"disruptionsAllowed": allowed},
    }


def test_budget_violations_count_pods_beyond_what_each_budget_allows() -> None:
    workers = [pod(f"w{i}", {"app": "train"}) for i in range(3)]
    assert budget_violations(workers, [budget({"matchLabels": {"app": "train"}}, 1)]) == 2
    assert budget_violations(workers, [budget({"matchLabels": {"app": "train"}}, 5)]) == 0
    assert budget_violations(workers, [budget({"matchLabels": {"app": "web"}}, 0)]) == 0
    assert budget_violations(workers, [budget({"matchLabels": {"app": "train"}}, 0, "x")]) == 0
    # an empty or missing selector selects nothing, as kube-scheduler reads it
    assert budget_violations(workers, [budget({}, 0), budget(None, 0)]) == 0
    assert budget_violations(workers, [budget({"matchExpressions": [{"key": "app"}]}, 0)]) == 0


def test_a_nominated_pod_waits_for_lower_priority_pods_terminating_on_its_node() -> None:
    leaving = pod(
        "victim",
        {},
        meta={"deletionTimestamp": "2026-12-01T00:00:00Z"},
        spec={"nodeName": "n1", "priority": 0},
    )
    nominee = pod("vip", {}, spec={"priority": 10}, status={"nominatedNodeName": "n1"})
    assert awaiting_victims([leaving, nominee]) == {
        "ml/vip": "waiting for the pods it preempted to terminate on its nominated node n1 "
        "(ml/victim)"
    }
    assert awaiting_victims([nominee]) == {}
    higher = pod(
        "other",
        {},
        meta={"deletionTimestamp": "2026-12-01T00:00:00Z"},
        spec={"nodeName": "n1", "priority": 20},
    )
    assert awaiting_victims([higher, nominee]) == {}
