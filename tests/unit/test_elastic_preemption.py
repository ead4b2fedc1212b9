"""Preemption shrinks an elastic running gang to its minimum rather than evicting it whole."""

from __future__ import annotations

from dataclasses import replace

from tests.unit.builders import gpu_node, snapshot_of
from tests.unit.test_queues import cycle, gang, outcome, queue, run
from voltpack.scheduler.queue_cycle import PendingGang


def test_an_elastic_gang_is_shrunk_to_its_minimum_when_that_makes_room() -> None:
    snapshot = snapshot_of(gpu_node("n", 8, "A100"))
    elastic = replace(run(snapshot, "el", "q", 8, preemptible=True), min_pods=6)
    plan = cycle(
        snapshot, {"q": queue()}, [PendingGang(gang("vip", 2), "q", priority=5)], [elastic]
    )
    assert outcome(plan) == {"vip": True}
    [eviction] = plan.evictions
    assert eviction.shrink and eviction.gang.name == "el"
    assert [pod.name for pod, _, _ in eviction.gang.pods] == ["el-6", "el-7"]  # the last ones
    assert "gang el (queue q, priority 0) shrunk from 8 to 6 pods (elastic) for gang vip" in (
        eviction.reason
    )
    assert int((snapshot.gpu_free_milli == 0).sum()) == 8  # 6 of el + 2 of vip


def test_an_elastic_gang_is_evicted_whole_when_shrinking_is_not_enough() -> None:
    snapshot = snapshot_of(gpu_node("n", 8, "A100"))
    elastic = replace(run(snapshot, "el", "q", 8, preemptible=True), min_pods=6)
    plan = cycle(
        snapshot, {"q": queue()}, [PendingGang(gang("vip", 4), "q", priority=5)], [elastic]
    )
    assert outcome(plan) == {"vip": True}
    [eviction] = plan.evictions
    assert not eviction.shrink and len(eviction.gang.pods) == 8
    assert "gang el (queue q, priority 0) preempted for gang vip" in eviction.reason


def test_shrinking_an_elastic_gang_is_preferred_to_evicting_another_whole() -> None:
    snapshot = snapshot_of(gpu_node("n", 8, "A100"))
    other = run(snapshot, "other", "q", 2, preemptible=True, started_s=0.0)
    elastic = replace(run(snapshot, "el", "q", 6, preemptible=True, started_s=500.0), min_pods=4)
    running = [other, elastic]
    plan = cycle(snapshot, {"q": queue()}, [PendingGang(gang("vip", 2), "q", priority=5)], running)
    assert outcome(plan) == {"vip": True}
    # without the elastic shrink the most recently started gang (el) would go whole
    assert [(e.gang.name, e.shrink, len(e.gang.pods)) for e in plan.evictions] == [("el", True, 2)]


def test_a_gang_without_a_minimum_is_still_evicted_whole() -> None:
    snapshot = snapshot_of(gpu_node("n", 8, "A100"))
    rigid = run(snapshot, "rigid", "q", 8, preemptible=True)
    plan = cycle(snapshot, {"q": queue()}, [PendingGang(gang("vip", 2), "q", priority=5)], [rigid])
    assert [(e.gang.name, e.shrink, len(e.gang.pods)) for e in plan.evictions] == [
        ("rigid", False, 8)
    ]
