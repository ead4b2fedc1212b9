"""The scheduling session: one statement, Reserve inside it, preemption by checkpoints."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from tests.unit.builders import (
    assert_empty,
    assert_state_equal,
    gpu_node,
    scheduler_for,
    snapshot_of,
    state_of,
    whole_pod,
)
from voltpack.model import PodGroup
from voltpack.model.decision import Placement
from voltpack.model.resources import QueueSpec
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.work import PendingWork, RunningGang
from voltpack.scheduler.fault_recovery import (
    FaultedGang,
    FaultScope,
    GangShape,
    RecoveryKind,
    RecoveryPolicy,
)
from voltpack.scheduler.preemption import PreemptionRules
from voltpack.scheduler.queues import QueueTree
from voltpack.scheduler.session import SessionQueues, decide
from voltpack.scheduler.statement import Statement


def gang(name: str, workers: int, gpus: int = 1) -> PodGroup:
    pods = tuple(whole_pod(f"{name}-{i}", gpus) for i in range(workers))
    return PodGroup(name=name, pods=pods, min_member=workers)


class RefuseOn:
    """A Reserve step that cannot have devices for `refused` gangs (e.g. a claim's constraint
    no device on the chosen node meets); it records what it was asked."""

    def __init__(self, *refused: str) -> None:
        self.refused = set(refused)
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    def reserve(self, gang: str, placements: Sequence[Placement]) -> str | None:
        self.asked.append((gang, tuple(p.node for p in placements)))
        return "no device meets the claim's constraint" if gang in self.refused else None


def test_a_gang_whose_devices_cannot_be_reserved_rolls_back_and_frees_its_gpus() -> None:
    snapshot = snapshot_of(gpu_node("n1", 4))
    scheduler = scheduler_for("best-fit", snapshot)
    work = PendingWork(groups=[gang("first", 4), gang("second", 4)])
    reserver = RefuseOn("first")

    plan = decide(scheduler, snapshot, work, np.random.default_rng(0), reserver=reserver)

    placed = {d.subject: d.placed for d in plan.decisions}
    assert placed == {"first": False, "second": True}
    assert plan.unplaced["first-0"].startswith("no device meets the claim's constraint")
    # the refused gang's GPUs went to the next gang in the same session (before the Reserve
    # step was inside the session, they stayed taken until the next cycle)
    assert [a[0] for a in reserver.asked] == ["first", "second"]
    assert [p.pod for p in plan.gangs[0]] == [f"second-{i}" for i in range(4)]
    assert snapshot.journal is None  # the session's statement has ended


def test_every_gang_passes_the_reserve_step_before_it_is_planned() -> None:
    snapshot = snapshot_of(gpu_node("n1", 8))
    reserver = RefuseOn()
    plan = decide(
        scheduler_for("best-fit", snapshot),
        snapshot,
        PendingWork(groups=[gang("a", 2), gang("b", 2)]),
        np.random.default_rng(0),
        reserver=reserver,
    )
    assert [g for g, _ in reserver.asked] == ["a", "b"]
    assert len(plan.gangs) == 2


def queue(guaranteed: float) -> QueueSpec:
    return QueueSpec.model_validate({"quotas": [{"gpuModel": "*", "guaranteed": guaranteed}]})


def running(
    snapshot: ClusterSnapshot, name: str, queue_name: str, node: str, started_s: float = 0.0
) -> RunningGang:
    row = snapshot.node_index(node)
    pods = []
    for index in range(4):
        pod = whole_pod(f"{name}-{index}", 1)
        snapshot.allocate(row, pod, (index,))
        pods.append((pod, row, (index,)))
    return RunningGang(name, queue_name, 0, False, started_s, tuple(pods))


def test_reclaim_evicts_and_places_through_the_statement_and_a_refused_reserve_undoes_both() -> (
    None
):
    snapshot = snapshot_of(gpu_node("n1", 4))
    borrower = running(snapshot, "borrower", "b", "n1")
    queues = SessionQueues(
        tree=QueueTree.build({"a": queue(4), "b": queue(0)}),
        rules=PreemptionRules(min_runtime_s=0.0),
        running=[borrower],
        gangs={"owner": ("a", False)},
        now_s=100.0,
    )
    before = state_of(snapshot)
    work = PendingWork(groups=[gang("owner", 4)])

    refused = decide(
        scheduler_for("best-fit", snapshot), snapshot, work, np.random.default_rng(0),
        queues=queues, reserver=RefuseOn("owner"),
    )  # fmt: skip
    assert not refused.evictions and not refused.gangs
    assert "after preemption: no device meets" in refused.unplaced["owner-0"]
    assert_state_equal(snapshot, before)  # the victim holds its GPUs again

    plan = decide(
        scheduler_for("best-fit", snapshot), snapshot, work, np.random.default_rng(0),
        queues=queues, reserver=RefuseOn(),
    )  # fmt: skip
    assert [(e.gang.name, e.kind) for e in plan.evictions] == [("borrower", "reclaim")]
    assert [p.pod for p in plan.gangs[0]] == [f"owner-{i}" for i in range(4)]
    assert "after preempting borrower" in plan.decisions[0].reason


def test_preemption_trials_leave_the_snapshot_as_they_found_it() -> None:
    """Victim sets that do not make room are tried inside the statement and rolled back to a
    checkpoint: nothing of a failed attempt stays."""
    snapshot = snapshot_of(gpu_node("n1", 4), gpu_node("n2", 4))
    one = running(snapshot, "one", "b", "n1")
    two = running(snapshot, "two", "b", "n2")
    before = state_of(snapshot)
    queues = SessionQueues(
        tree=QueueTree.build({"a": queue(16), "b": queue(0)}),
        rules=PreemptionRules(min_runtime_s=0.0),
        running=[one, two],
        gangs={"huge": ("a", False)},
        now_s=100.0,
    )
    plan = decide(
        scheduler_for("best-fit", snapshot), snapshot, PendingWork(groups=[gang("huge", 3, 4)]),
        np.random.default_rng(0), queues=queues,
    )  # fmt: skip
    assert not plan.gangs and not plan.evictions
    assert "would not make room" in plan.unplaced["huge-0"]
    assert_state_equal(snapshot, before)
    assert snapshot.journal is None


def test_statements_nest_and_roll_back_to_checkpoints() -> None:
    snapshot = snapshot_of(gpu_node("n1", 4))
    outer = Statement(snapshot)
    outer.allocate(0, whole_pod("a", 1), (0,))
    mark = outer.checkpoint()
    inner = Statement(snapshot)
    inner.allocate(0, whole_pod("b", 1), (1,))
    inner.commit()  # kept, but the outer statement can still undo it
    assert snapshot.journal is not None and len(snapshot.journal) == 2
    outer.release(0, whole_pod("a", 1), (0,))
    outer.rollback(to=mark)  # undoes the release and b's allocation, newest first
    assert snapshot.gpu_free_milli[0].tolist() == [0, 1000, 1000, 1000]
    outer.rollback()
    assert_empty(snapshot)
    assert snapshot.journal is None
    with pytest.raises(RuntimeError, match="ended"):
        outer.checkpoint()


def faulted_gang(
    gang: RunningGang, *, elastic: bool = False, deferred: float | None = None
) -> FaultedGang:
    return FaultedGang(
        name=gang.name,
        scope=FaultScope.GPU,
        shape=GangShape(workers=4, full_workers=4, min_workers=2 if elastic else 4),
        hit_workers=1,
        elastic=elastic,
        restart_deferred_until_s=deferred,
        pods=frozenset(pod.name for pod, _, _ in gang.pods),
    )


def test_recovery_comes_first_and_a_recovering_gang_is_no_preemption_victim() -> None:
    snapshot = snapshot_of(gpu_node("n1", 4), gpu_node("n2", 4))
    hit = running(snapshot, "hit", "b", "n1", started_s=50.0)  # the first choice otherwise
    healthy = running(snapshot, "healthy", "b", "n2")
    queues = SessionQueues(
        tree=QueueTree.build({"a": queue(4), "b": queue(0)}),
        rules=PreemptionRules(min_runtime_s=0.0),
        running=[hit, healthy],
        gangs={"owner": ("a", False)},
        now_s=100.0,
    )
    plan = decide(
        scheduler_for("best-fit", snapshot), snapshot, PendingWork(groups=[gang("owner", 4)]),
        np.random.default_rng(0), queues=queues, faulted=[faulted_gang(hit)],
    )  # fmt: skip
    assert plan.recoveries["hit"].kind is RecoveryKind.RESTART
    # the reclaim takes the healthy borrower, not the gang already restarting
    assert [e.gang.name for e in plan.evictions] == ["healthy"]


def test_recovery_shrinks_an_elastic_gang_and_defers_a_restart_over_its_budget() -> None:
    snapshot = snapshot_of(gpu_node("n1", 4), gpu_node("n2", 4))
    elastic = running(snapshot, "elastic", "b", "n1")
    capped = running(snapshot, "capped", "b", "n2")
    plan = decide(
        scheduler_for("best-fit", snapshot), snapshot, PendingWork(), np.random.default_rng(0),
        faulted=[faulted_gang(elastic, elastic=True), faulted_gang(capped, deferred=160.0)],
    )  # fmt: skip
    assert plan.recoveries["elastic"].kind is RecoveryKind.SHRINK
    assert plan.recoveries["capped"].kind is None
    assert plan.recoveries["capped"].deferred_until_s == 160.0
    policy_off = RecoveryPolicy(shrink=False)
    plan = decide(
        scheduler_for("best-fit", snapshot), snapshot, PendingWork(), np.random.default_rng(0),
        faulted=[faulted_gang(elastic, elastic=True)], recovery=policy_off,
    )  # fmt: skip
    assert plan.recoveries["elastic"].kind is RecoveryKind.RESTART
