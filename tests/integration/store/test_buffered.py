"""`BufferedStore` through real outages: PostgreSQL stopped and restarted (pg_ctl), SQLite's
folder moved away or deleted. Writes never raise; records wait in a bounded buffer and are
written when the database is back; readers get `StoreUnavailableError` meanwhile."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from tests.integration.store.conftest import Outage
from voltpack.store import (
    BufferedStore,
    DecisionRecord,
    JobRecord,
    PowerSample,
    Store,
    StoreUnavailableError,
    TemporaryPostgres,
)


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def buffered(store: Store, registry: CollectorRegistry, clock: Clock) -> BufferedStore:
    return BufferedStore(store, capacity=50, retry_interval_s=5.0, registry=registry, clock=clock)


def decision(i: int) -> DecisionRecord:
    return DecisionRecord(
        at_s=float(i), subject=f"pod-{i}", placed=True, reason="fits", policy="fgd", cycle_id=i
    )


def metric(registry: CollectorRegistry, name: str, table: str | None = None) -> float:
    value = registry.get_sample_value(name, {"table": table} if table else {})
    return 0.0 if value is None else value


def test_writes_go_straight_through_while_the_database_answers(
    buffered: BufferedStore, store: Store, registry: CollectorRegistry
) -> None:
    buffered.add_decisions([decision(1), decision(2)])
    buffered.audit("alice", "policy.apply", "policy/fgd", at_s=3.0)
    assert buffered.buffered == 0
    assert buffered.available
    assert store.count_decisions() == 2
    assert [e.user for e in store.list_audit()] == ["alice"]
    assert metric(registry, "voltpack_store_available") == 1


def test_an_outage_buffers_records_and_they_are_written_when_it_ends(
    buffered: BufferedStore,
    store: Store,
    outage: Outage,
    registry: CollectorRegistry,
    clock: Clock,
) -> None:
    buffered.add_decisions([decision(0)])
    outage.cut()
    buffered.add_decisions([decision(1), decision(2)])
    buffered.record_job(
        JobRecord(
            job="train", namespace="ns", queue="q", gpu_model="A100", gpus=8, priority=1,
            submitted_at_s=1.0, state="Pending",
        )
    )  # fmt: skip
    buffered.add_power_samples("row-1", [PowerSample(at_s=5.0, power_w=900.0, budget_w=1000.0)])
    buffered.audit("alice", "queue.update", "queue/q", {"weight": 2}, at_s=6.0)
    assert not buffered.available
    assert buffered.buffered == 5
    assert buffered.last_error is not None
    assert metric(registry, "voltpack_store_available") == 0
    assert metric(registry, "voltpack_store_records_buffered", "decisions") == 2
    assert metric(registry, "voltpack_store_records_buffered", "audit") == 1

    # readers are told, at once and clearly, that history is unavailable
    with pytest.raises(StoreUnavailableError, match=r"history is unavailable.*5 records"):
        buffered.read(lambda s: s.query_decisions())
    # still down after the retry interval: another write is buffered, not raised
    clock.now_s += 10.0
    buffered.add_decisions([decision(3)])
    assert buffered.buffered == 6
    assert not buffered.flush()

    outage.restore()
    assert buffered.flush()
    assert buffered.available
    assert buffered.buffered == 0
    assert metric(registry, "voltpack_store_records_buffered", "decisions") == 0
    assert metric(registry, "voltpack_store_available") == 1
    assert [d.subject for d in store.query_decisions().items] == [f"pod-{i}" for i in (3, 2, 1, 0)]
    assert [j.state for j in store.job_history()] == ["Pending"]
    assert store.power_history("row-1")[0].max_w == 900.0
    assert store.list_audit()[0].detail == {"weight": 2}
    assert buffered.read(lambda s: s.count_decisions()) == 4
    assert metric(registry, "voltpack_store_records_dropped_total", "decisions") == 0


def test_after_an_outage_writes_wait_for_the_retry_interval(
    buffered: BufferedStore, store: Store, outage: Outage, clock: Clock
) -> None:
    outage.cut()
    buffered.add_decisions([decision(1)])
    outage.restore()
    buffered.add_decisions([decision(2)])  # within the retry interval: no new attempt yet
    assert buffered.buffered == 2
    clock.now_s += 5.0
    buffered.add_decisions([decision(3)])
    assert buffered.buffered == 0
    assert store.count_decisions() == 3


def test_a_full_buffer_drops_the_oldest_and_counts_them(
    store: Store, outage: Outage, registry: CollectorRegistry, clock: Clock
) -> None:
    buffered = BufferedStore(store, capacity=5, registry=registry, clock=clock)
    outage.cut()
    buffered.add_decisions(decision(i) for i in range(8))
    buffered.audit("bob", "login", "api", at_s=9.0)
    assert buffered.buffered == 5
    assert metric(registry, "voltpack_store_records_dropped_total", "decisions") == 4
    assert metric(registry, "voltpack_store_records_dropped_total", "audit") == 0
    outage.restore()
    assert buffered.flush()
    assert sorted(d.subject for d in store.query_decisions().items) == [
        f"pod-{i}" for i in range(4, 8)
    ]
    assert len(store.list_audit()) == 1


def test_a_record_the_database_refuses_is_dropped_alone(
    buffered: BufferedStore, store: Store, registry: CollectorRegistry
) -> None:
    buffered.audit("alice", "a", "t", at_s=1.0)
    buffered.audit("mallory", "b", "t", {"not json": float("nan")}, at_s=2.0)
    buffered.audit("carol", "c", "t", at_s=3.0)
    assert buffered.available
    assert [e.user for e in store.list_audit()] == ["carol", "alice"]
    assert metric(registry, "voltpack_store_records_dropped_total", "audit") == 1


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_deleted_sqlite_folder_is_recreated_with_its_tables(
    store: Store, registry: CollectorRegistry
) -> None:
    assert store.engine.url.database is not None
    folder = Path(store.engine.url.database).parent
    buffered = BufferedStore(store, registry=registry, retry_interval_s=0.0)
    buffered.add_decisions([decision(1)])
    shutil.rmtree(folder)
    buffered.add_decisions([decision(2)])
    assert not buffered.available
    with pytest.raises(StoreUnavailableError):
        buffered.read(lambda s: s.count_decisions())
    folder.mkdir()  # an empty volume comes back: the schema is migrated, then the records
    assert buffered.flush()
    assert [d.subject for d in store.query_decisions().items] == ["pod-2"]
    assert store.schema_revision() == "0006"


@pytest.mark.parametrize("backend", ["postgresql"])
def test_the_operator_starts_while_the_database_is_down(
    store_url: str, postgres_server: TemporaryPostgres, registry: CollectorRegistry
) -> None:
    postgres_server.stop()
    try:
        buffered = BufferedStore.open(store_url, registry=registry, retry_interval_s=0.0)
        assert not buffered.available
        buffered.add_decisions([decision(1)])
        assert buffered.buffered == 1
    finally:
        postgres_server.start()
    assert buffered.flush()  # migrates the empty database, then writes
    assert buffered.store.schema_revision() == "0006"
    assert buffered.read(lambda s: s.count_decisions()) == 1
    buffered.close()


def test_opening_a_reachable_database_migrates_it(
    store_url: str, registry: CollectorRegistry
) -> None:
    buffered = BufferedStore.open(store_url, registry=registry)
    assert buffered.available
    assert buffered.store.schema_revision() == "0006"
    buffered.add_decisions([decision(1)])
    assert buffered.read(lambda s: s.count_decisions()) == 1
    buffered.close()


def test_a_background_writer_keeps_the_caller_off_the_database(
    store: Store, outage: Outage, registry: CollectorRegistry
) -> None:
    buffered = BufferedStore(store, registry=registry, retry_interval_s=0.0)
    buffered.start(interval_s=0.01)
    try:
        buffered.add_decisions([decision(1)])
        outage.cut()
        buffered.add_decisions(decision(i) for i in range(2, 50))
        buffered.audit("alice", "policy.apply", "policy/fgd", at_s=60.0)
        outage.restore()
    finally:
        buffered.stop()  # the writer has stopped; a last flush writes what is left
    assert buffered.buffered == 0
    assert buffered.available
    assert store.count_decisions() == 49
    assert [e.user for e in store.list_audit()] == ["alice"]
    buffered.close()
