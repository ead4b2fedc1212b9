"""The queue simulator: rounds of the core's scheduling session over arriving and leaving jobs."""

from __future__ import annotations

import pytest

from voltpack.model import Node
from voltpack.model.resources.queue import QueueSpec
from voltpack.policies.schema import PolicyFile, parse_policy
from voltpack.sim.queues import QueueJob, QueueSimulator

A100 = ("A100",)


def policy(reclaim: bool = True, priority_preemption: bool = True) -> PolicyFile:
    return parse_policy(
        "apiVersion: voltpack.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: q}\n"
        "spec:\n  scoring: {strategy: best-fit}\n  queueing: {ordering: fair-share, "
        f"min_runtime_s: 0, reclaim: {str(reclaim).lower()}, "
        f"priority_preemption: {str(priority_preemption).lower()}}}\n"
    )


def nodes(count: int) -> list[Node]:
    return [
        Node.empty(f"n{i}", cpu_milli=64000, memory_mib=512000, gpu_count=8, gpu_model="A100")
        for i in range(count)
    ]


def two_queues() -> dict[str, QueueSpec]:
    guarantee = {"quotas": [{"gpuModel": "A100", "guaranteed": 8}]}
    return {name: QueueSpec.model_validate(guarantee) for name in ("research", "production")}


def borrow_then_claim() -> list[QueueJob]:
    """Research fills both nodes (borrowing 8 GPUs); production's 8-GPU gang comes at 100 s."""
    return [
        QueueJob.gang("r0", "research", 1, 8, 1000, A100, arrival_s=0),
        QueueJob.gang("r1", "research", 1, 8, 1000, A100, arrival_s=0, priority=-1),
        QueueJob.gang("p0", "production", 1, 8, 500, A100, arrival_s=100),
    ]


def test_a_queue_under_its_guarantee_with_work_waiting_reclaims_borrowed_gpus() -> None:
    result = QueueSimulator(nodes(2), two_queues(), policy(), round_s=10).run(borrow_then_claim())

    assert [(e.time_s, e.job, e.queue, e.by, e.kind) for e in result.evictions] == [
        (100.0, "r1", "research", "p0", "reclaim")
    ]
    evicted = result.evictions[0]
    assert evicted.lost_gpu_hours == pytest.approx(8 * 100 / 3600)
    research, production = result.queues["research"], result.queues["production"]
    assert research.reclaimed_from == 1 and production.reclaims_made == 1
    assert research.lost_gpu_hours == pytest.approx(8 * 100 / 3600)
    # p0 starts in the round at its arrival, on r1's GPUs; r1 restarts from scratch when p0
    # leaves (600 s) and runs its whole 1,000 s again
    p0 = [p for p in result.placements if p.job == "p0"]
    r1 = [p for p in result.placements if p.job == "r1"]
    assert [(p.time_s, p.node) for p in p0] == [(100.0, r1[0].node)]
    assert [p.time_s for p in r1] == [0.0, 600.0]
    assert result.makespan_s == 1600.0 and result.unfinished == []
    assert production.below_guarantee_waiting_s == 0.0
    assert production.jct_p50_s == 500.0
    assert research.jct_p95_s == pytest.approx(1000 + 0.95 * 600)  # JCTs 1,000 and 1,600 s
    # GPU-hours: research 8 GPUs for 1,000 s (r0) + 100 s (r1 before eviction) + 1,000 s
    assert research.gpu_hours == pytest.approx(8 * 2100 / 3600)
    assert research.mean_share == pytest.approx(8 * 2100 / (1600 * 16))


def test_without_reclaim_the_queue_under_its_guarantee_waits_for_a_departure() -> None:
    rules = policy(reclaim=False, priority_preemption=False)
    result = QueueSimulator(nodes(2), two_queues(), rules, round_s=10).run(borrow_then_claim())

    assert result.evictions == []
    assert result.queues["research"].reclaimed_from == 0
    p0 = [p for p in result.placements if p.job == "p0"]
    assert [p.time_s for p in p0] == [1000.0]  # the first research departure
    production = result.queues["production"]
    assert production.below_guarantee_waiting_s == 900.0
    assert production.jct_p50_s == 1400.0


def test_departures_free_gpus_for_the_next_gang_at_the_following_round() -> None:
    jobs = [
        QueueJob.gang("a", "research", 1, 8, 95, A100, arrival_s=0),
        QueueJob.gang("b", "research", 1, 8, 50, A100, arrival_s=1),
    ]
    result = QueueSimulator(nodes(1), two_queues(), policy(), round_s=10).run(jobs)

    assert [(p.job, p.time_s) for p in result.placements] == [("a", 0.0), ("b", 100.0)]
    assert result.makespan_s == 150.0
    assert result.queues["research"].completed == 2
    assert result.queues["research"].gpu_hours == pytest.approx(8 * 145 / 3600)


def test_an_elastic_gang_is_shrunk_and_its_pods_rejoin_it_later() -> None:
    jobs = [
        QueueJob.gang("e", "research", 2, 8, 1000, A100, arrival_s=0, min_pods=1),
        QueueJob.gang("p", "production", 1, 8, 100, A100, arrival_s=10),
    ]
    result = QueueSimulator(nodes(2), two_queues(), policy(), round_s=10).run(jobs)

    assert [(e.job, e.pods, e.shrink) for e in result.evictions] == [("e", ("e-1",), True)]
    assert [(p.pod, p.time_s) for p in result.placements] == [
        ("e-0", 0.0), ("e-1", 0.0), ("p-0", 10.0), ("e-1", 110.0)
    ]  # fmt: skip
    assert result.makespan_s == 1000.0  # the elastic job keeps its departure


def test_jobs_must_have_their_own_names_and_rounds_a_positive_period() -> None:
    job = QueueJob.gang("a", "research", 1, 8, 10, A100)
    with pytest.raises(ValueError, match="two jobs share a name"):
        QueueSimulator(nodes(1), two_queues(), policy()).run([job, job])
    with pytest.raises(ValueError, match="round_s=0"):
        QueueSimulator(nodes(1), two_queues(), policy(), round_s=0)
