"""The store's behaviour, the same on SQLite and on PostgreSQL."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from voltpack.model.decision import Decision, Placement
from voltpack.store import (
    MAX_PAGE,
    DecisionRecord,
    InvalidCursorError,
    InvalidRecordError,
    JobRecord,
    PowerSample,
    RecordNotFoundError,
    RetentionSettings,
    Store,
)

DAY_S = 86400.0


def decision(at_s: float, subject: str = "pod-a", **fields: object) -> DecisionRecord:
    values: dict[str, object] = {
        "at_s": at_s,
        "subject": subject,
        "placed": True,
        "reason": f"{subject} fits",
        "policy": "fgd",
        "cycle_id": int(at_s),
    }
    values.update(fields)
    return DecisionRecord.model_validate(values)


def all_pages(store: Store, **filters: object) -> list[DecisionRecord]:
    items: list[DecisionRecord] = []
    cursor = None
    while True:
        page = store.query_decisions(**filters, limit=7, cursor=cursor)  # type: ignore[arg-type]
        items += page.items
        if page.next_cursor is None:
            return items
        cursor = page.next_cursor


def test_decisions_come_back_newest_first_with_their_fields(store: Store) -> None:
    written = [
        decision(100.0, "pod-a", job="train", node="n1"),
        decision(300.0, "pod-b", job=None, node=None, placed=False, reason="no node has 8 GPUs"),
        decision(200.0, "pod-c", job="train", node="n2"),
    ]
    assert store.add_decisions(written) == 3
    page = store.query_decisions()
    assert [d.subject for d in page.items] == ["pod-b", "pod-c", "pod-a"]
    assert page.next_cursor is None
    assert all(d.id is not None for d in page.items)
    unplaced = page.items[0]
    assert unplaced.model_dump(exclude={"id"}) == written[1].model_dump(exclude={"id"})


def test_pages_cover_every_decision_once_in_order_even_with_equal_times(store: Store) -> None:
    # 40 decisions at only 10 distinct times: the cursor must break ties by id
    store.add_decisions(decision(float(i % 10), f"pod-{i}") for i in range(40))
    items = all_pages(store)
    assert len(items) == 40
    assert len({d.id for d in items}) == 40
    keys = [(d.at_s, d.id) for d in items]
    assert keys == sorted(keys, reverse=True)


def test_pages_are_stable_while_new_decisions_arrive(store: Store) -> None:
    store.add_decisions(decision(float(t), f"old-{t}") for t in range(20))
    first = store.query_decisions(limit=5)
    # decisions taken meanwhile, newer than everything (and one as old as the page's end)
    store.add_decisions(decision(100.0 + t, f"new-{t}") for t in range(10))
    rest: list[DecisionRecord] = []
    cursor = first.next_cursor
    while cursor is not None:
        page = store.query_decisions(limit=5, cursor=cursor)
        rest += page.items
        cursor = page.next_cursor
    subjects = [d.subject for d in [*first.items, *rest]]
    assert subjects == [f"old-{t}" for t in range(19, -1, -1)]


def test_filters_by_job_node_time_and_outcome(store: Store) -> None:
    records = [
        decision(float(t), f"pod-{t}", job=f"job-{t % 3}", node=f"n{t % 4}", placed=t % 5 != 0)
        for t in range(60)
    ]
    store.add_decisions(records)

    def expected(keep: object) -> list[str]:
        kept = [r for r in records if keep(r)]  # type: ignore[operator]
        return [r.subject for r in sorted(kept, key=lambda r: -r.at_s)]

    assert [d.subject for d in all_pages(store, job="job-1")] == expected(
        lambda r: r.job == "job-1"
    )
    assert [d.subject for d in all_pages(store, node="n2")] == expected(lambda r: r.node == "n2")
    window = [d.subject for d in all_pages(store, since_s=10.0, until_s=20.0)]
    assert window == expected(lambda r: 10 <= r.at_s < 20)
    both = [d.subject for d in all_pages(store, job="job-0", node="n0", since_s=12.0)]
    assert both == expected(lambda r: r.job == "job-0" and r.node == "n0" and r.at_s >= 12)
    unplaced = [d.subject for d in all_pages(store, placed=False)]
    assert unplaced == expected(lambda r: not r.placed)
    assert store.count_decisions() == 60
    assert store.count_decisions(job="job-1") == 20
    assert store.count_decisions(node="n3", since_s=30.0) == len(expected(
        lambda r: r.node == "n3" and r.at_s >= 30
    ))  # fmt: skip
    summary = store.summarize_decisions(since_s=0.0, until_s=30.0)
    assert (summary.decisions, summary.placed, summary.unplaced) == (30, 24, 6)


def test_counts_over_any_window_match_the_rows(store: Store) -> None:
    hour = 3600.0
    rng = random.Random(5)
    times = [rng.uniform(0, 30 * hour) for _ in range(300)]
    times += [k * hour for k in range(0, 30, 3)] + [k * hour - 1e-6 for k in range(1, 30, 4)]
    records = [decision(t, f"pod-{i}", placed=i % 3 != 0) for i, t in enumerate(times)]
    # written in several batches, in no particular order
    rng.shuffle(records)
    for start in range(0, len(records), 70):
        store.add_decisions(records[start : start + 70])
    bounds = [None, 0.0, 2 * hour, 5 * hour + 0.5, 5.75 * hour, 6 * hour, 29.99 * hour, 40 * hour]
    for since_s in bounds:
        for until_s in bounds:
            kept = [
                r
                for r in records
                if (since_s is None or r.at_s >= since_s) and (until_s is None or r.at_s < until_s)
            ]
            placed = sum(r.placed for r in kept)
            summary = store.summarize_decisions(since_s=since_s, until_s=until_s)
            assert (summary.decisions, summary.placed) == (len(kept), placed), (since_s, until_s)
            assert store.count_decisions(since_s=since_s, until_s=until_s) == len(kept)
            assert store.count_decisions(since_s=since_s, until_s=until_s, placed=False) == (
                len(kept) - placed
            )
    # retention keeps the counts exact
    store.apply_retention(10 * hour + 1.0, RetentionSettings(decisions_days=5 * hour / DAY_S))
    remaining = [r for r in records if r.at_s >= 5 * hour]
    assert store.count_decisions() == len(remaining) == len(all_pages(store))
    assert store.summarize_decisions().placed == sum(r.placed for r in remaining)


def test_empty_store_answers_empty(store: Store) -> None:
    assert store.query_decisions().items == ()
    assert store.count_decisions() == 0
    assert store.summarize_decisions().decisions == 0


@pytest.mark.parametrize("cursor", ["garbage!", "bm90LWEtY3Vyc29y", "", "MS4wOi0x", "aW5mOjE"])
def test_a_cursor_that_does_not_decode_is_a_clear_error(store: Store, cursor: str) -> None:
    with pytest.raises(InvalidCursorError, match="cursor") as raised:
        store.query_decisions(cursor=cursor)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize("limit", [0, MAX_PAGE + 1])
def test_page_size_is_bounded(store: Store, limit: int) -> None:
    with pytest.raises(InvalidRecordError, match="limit"):
        store.query_decisions(limit=limit)


def test_a_core_decision_becomes_a_record() -> None:
    core = Decision(
        subject="gang-7",
        placed=True,
        placements=(Placement(pod="gang-7-0", node="n12", gpu_indices=(0, 1), gpu_milli=1000),),
        reason="node n12: 8 of 8 GPUs free, needs 2",
    )
    record = DecisionRecord.from_decision(core, at_s=5.0, policy="fgd", cycle_id=3, job="gang-7")
    assert (record.node, record.job, record.placed, record.cycle_id) == ("n12", "gang-7", True, 3)
    pending = Decision(subject="p", placed=False, reason="no GPU node fits")
    assert DecisionRecord.from_decision(pending, at_s=1.0, policy="fgd", cycle_id=1).node is None


def job(state: str, **fields: object) -> JobRecord:
    values: dict[str, object] = {
        "job": "train-a",
        "namespace": "team-1",
        "queue": "research",
        "gpu_model": "A100",
        "gpus": 8.0,
        "priority": 10,
        "submitted_at_s": 1000.0,
        "state": state,
    }
    values.update(fields)
    return JobRecord.model_validate(values)


def test_a_job_is_recorded_once_and_updated_through_its_life(store: Store) -> None:
    store.record_job(job("Pending"))
    store.record_job(job("Running", started_at_s=1010.0))
    store.record_job(job("Succeeded", started_at_s=1010.0, finished_at_s=4610.0))
    # the same name submitted again later is another job
    store.record_job(job("Pending", submitted_at_s=5000.0, queue="prod"))
    history = store.job_history()
    assert [(j.state, j.submitted_at_s) for j in history] == [
        ("Pending", 5000.0),
        ("Succeeded", 1000.0),
    ]
    assert history[1].finished_at_s == 4610.0
    assert [j.queue for j in store.job_history(queue="prod")] == ["prod"]
    assert [j.state for j in store.job_history(until_s=2000.0)] == ["Succeeded"]
    assert store.job_history(namespace="other") == []


def test_power_samples_roll_up_per_bucket_however_they_arrive(store: Store) -> None:
    samples = [
        PowerSample(at_s=600.0 + i * 10, power_w=1000.0 + i * 100, budget_w=2000.0, actions=i % 2)
        for i in range(12)
    ]  # two 60 s buckets: 600..659 and 660..719
    store.add_power_samples("row-1", samples[:4])
    store.add_power_samples("row-1", samples[4:9])
    store.add_power_samples("row-1", samples[9:])
    store.add_power_samples("row-2", [PowerSample(at_s=610.0, power_w=50.0)])
    buckets = store.power_history("row-1")
    assert [(b.bucket_start_s, b.bucket_s, b.samples) for b in buckets] == [
        (600.0, 60.0, 6),
        (660.0, 60.0, 6),
    ]
    first = buckets[0]
    assert first.mean_w == pytest.approx(1250.0)
    assert first.max_w == 1500.0
    assert first.actions == 3
    assert first.budget_w == 2000.0
    assert buckets[1].mean_w == pytest.approx(1850.0)
    assert [b.bucket_start_s for b in store.power_history("row-1", since_s=665.0)] == [660.0]
    assert [b.bucket_start_s for b in store.power_history("row-1", until_s=660.0)] == [600.0]
    assert store.power_history("row-2")[0].budget_w is None
    assert store.power_domains() == ["row-1", "row-2"]


def test_records_refuse_values_that_are_not_numbers() -> None:
    with pytest.raises(ValidationError, match="power_w"):
        PowerSample(at_s=1.0, power_w=float("nan"))
    with pytest.raises(ValidationError, match="at_s"):
        decision(0.0).model_validate({**decision(0.0).model_dump(), "at_s": float("inf")})


def test_simulation_runs_go_from_queued_to_done(store: Store) -> None:
    run = store.create_simulation("packing", {"trace": "openb", "seeds": [1, 2]}, created_at_s=5.0)
    assert (run.status, run.progress, run.report) == ("queued", 0.0, None)
    store.update_simulation(run.id, status="running", progress=0.5)
    done = store.update_simulation(run.id, status="done", progress=1.0, report={"ratio": 0.95})
    assert done == store.get_simulation(run.id)
    assert (done.status, done.report, done.request["seeds"]) == ("done", {"ratio": 0.95}, [1, 2])
    failed = store.create_simulation("power", {}, created_at_s=6.0)
    store.update_simulation(failed.id, status="failed", error="trace not found")
    assert [r.id for r in store.list_simulations()] == [failed.id, run.id]
    assert [r.error for r in store.list_simulations(status="failed")] == ["trace not found"]
    assert [r.id for r in store.list_simulations(kind="packing")] == [run.id]


def test_simulation_updates_are_checked(store: Store) -> None:
    run = store.create_simulation("packing", {})
    with pytest.raises(InvalidRecordError, match="progress"):
        store.update_simulation(run.id, progress=1.5)
    with pytest.raises(InvalidRecordError, match="status"):
        store.update_simulation(run.id, status="paused")  # type: ignore[arg-type]
    with pytest.raises(RecordNotFoundError, match="12345"):
        store.get_simulation(12345)
    with pytest.raises(RecordNotFoundError):
        store.update_simulation(12345, progress=0.1)
    with pytest.raises(InvalidRecordError, match="request"):
        store.create_simulation("packing", {"when": object()})


def test_audit_keeps_who_did_what_when(store: Store) -> None:
    first = store.audit("alice", "policy.apply", "policy/fgd", {"version": 3}, at_s=10.0)
    store.audit("bob", "queue.update", "queue/research", outcome="denied", at_s=20.0)
    store.audit("alice", "simulation.create", "simulation/1", at_s=30.0)
    assert first.id is not None
    entries = store.list_audit()
    assert [(e.user, e.action) for e in entries] == [
        ("alice", "simulation.create"),
        ("bob", "queue.update"),
        ("alice", "policy.apply"),
    ]
    assert entries[-1].detail == {"version": 3}
    assert entries[1].outcome == "denied"
    assert [e.at_s for e in store.list_audit(user="alice", since_s=15.0)] == [30.0]
    assert [e.target for e in store.list_audit(action="queue.update")] == ["queue/research"]
    with pytest.raises(InvalidRecordError, match="detail"):
        store.audit("eve", "x", "y", {"bad": float("nan")})


def test_audit_without_a_time_uses_the_store_clock(store_url: str) -> None:
    with Store.open(store_url, clock=lambda: 1234.5) as store:
        assert store.audit("alice", "login", "api").at_s == 1234.5
        assert store.create_simulation("packing", {}).created_at_s == 1234.5


def test_retention_deletes_only_what_is_older_than_each_table_keeps(store: Store) -> None:
    now_s = 100 * DAY_S
    store.add_decisions([decision(now_s - 40 * DAY_S), decision(now_s - 1.0)])
    store.record_job(job("Succeeded", submitted_at_s=now_s - 50 * DAY_S, finished_at_s=now_s - 5))
    store.record_job(job("Failed", job="old", submitted_at_s=1.0, finished_at_s=2.0))
    store.add_power_samples("row-1", [PowerSample(at_s=now_s - 10 * DAY_S, power_w=1.0)])
    store.add_power_samples("row-1", [PowerSample(at_s=now_s - 60.0, power_w=1.0)])
    store.create_simulation("packing", {}, created_at_s=now_s - 91 * DAY_S)
    store.audit("alice", "x", "y", at_s=now_s - 2.0)
    settings = RetentionSettings(
        decisions_days=30, job_history_days=30, power_samples_days=7, audit_days=None
    )
    deleted = store.apply_retention(now_s, settings)
    assert deleted == {
        "decisions": 1,
        "job_history": 1,
        "power_samples": 1,
        "simulation_runs": 1,
        "audit": 0,
    }
    assert store.count_decisions() == 1
    assert [j.job for j in store.job_history()] == ["train-a"]
    assert len(store.power_history("row-1")) == 1
    assert store.list_simulations() == []
    assert len(store.list_audit()) == 1
    assert set(store.apply_retention(now_s, settings).values()) == {0}
