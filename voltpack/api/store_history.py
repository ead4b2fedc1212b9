"""The API's `History` over voltpack's store: decisions, audit and simulation runs.

Reads go through `BufferedStore.read` (an unreachable database becomes
`SourceUnavailableError`, the API's 503); audit entries are buffered like every other write,
so an administrative action is never refused because the database is down.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from voltpack.api.sources import SimulationRun, SourceUnavailableError
from voltpack.store import (
    AuditEntry,
    BufferedStore,
    DecisionPage,
    PowerHistoryVersion,
    PowerRollup,
    RecordNotFoundError,
    Store,
    StoreUnavailableError,
)
from voltpack.store import SimulationRun as StoredRun

SIMULATION_KIND = "training"


T = TypeVar("T")


class StoreHistory:
    """History backed by a BufferedStore."""

    def __init__(self, store: BufferedStore) -> None:
        self._store = store

    def _read(self, query: Callable[[Store], T]) -> T:
        """`query` on the store; SourceUnavailableError while the database is unreachable."""
        try:
            return self._store.read(query)
        except StoreUnavailableError as exc:
            raise SourceUnavailableError(str(exc)) from None

    def query_decisions(
        self,
        job: str | None,
        node: str | None,
        since_s: float | None,
        until_s: float | None,
        limit: int,
        cursor: str | None,
    ) -> DecisionPage:
        """A page of the decision log (ValueError for a cursor that does not decode)."""
        try:
            page: DecisionPage = self._store.read(
                lambda s: s.query_decisions(
                    job=job, node=node, since_s=since_s, until_s=until_s, limit=limit,
                    cursor=cursor,
                )
            )  # fmt: skip
        except StoreUnavailableError as exc:
            raise SourceUnavailableError(str(exc)) from None
        return page

    def record_audit(self, entry: AuditEntry) -> None:
        """Buffered: written now, or when the database is back."""
        self._store.audit(
            entry.user, entry.action, entry.target, entry.detail, entry.outcome, at_s=entry.at_s
        )

    def power_rollups(self, domain: str, since_s: float | None) -> list[PowerRollup]:
        """What a forecast reads of a domain's roll-ups since `since_s`, oldest first."""
        return self._read(lambda s: s.power_rollups(domain, since_s=since_s))

    def power_history_version(self, domain: str, since_s: float | None) -> PowerHistoryVersion:
        """What changes when a domain's roll-ups since `since_s` change (cheap to read)."""
        version: PowerHistoryVersion = self._read(
            lambda s: s.power_history_version(domain, since_s=since_s)
        )
        return version

    def list_audit(self, limit: int) -> list[AuditEntry]:
        """The newest `limit` administrative actions."""
        return self._read(lambda s: s.list_audit(limit=limit))

    def create_simulation(self, run: SimulationRun) -> str:
        """Store a new run; its id from now on."""
        try:
            stored = self._store.read(
                lambda s: s.create_simulation(
                    SIMULATION_KIND, {**run.request, "user": run.user},
                    created_at_s=run.created_at_s,
                )
            )  # fmt: skip
        except StoreUnavailableError as exc:
            raise SourceUnavailableError(str(exc)) from None
        return str(stored.id)

    def save_simulation(self, run: SimulationRun) -> None:
        """Write a run's status, progress, report and error."""
        if not run.id.isdigit():
            return  # created while the database was down: kept in memory only
        try:
            self._store.read(
                lambda s: s.update_simulation(
                    int(run.id), status=run.status, progress=run.progress, report=run.report,
                    error=run.error,
                )
            )  # fmt: skip
        except StoreUnavailableError as exc:
            raise SourceUnavailableError(str(exc)) from None

    def load_simulation(self, run_id: str) -> SimulationRun | None:
        """A stored run, or None."""
        if not run_id.isdigit():
            return None
        try:
            stored: StoredRun = self._store.read(lambda s: s.get_simulation(int(run_id)))
        except RecordNotFoundError:
            return None
        except StoreUnavailableError as exc:
            raise SourceUnavailableError(str(exc)) from None
        request = dict(stored.request)
        user = str(request.pop("user", ""))
        return SimulationRun(
            id=str(stored.id),
            created_at_s=stored.created_at_s,
            request=request,
            status=stored.status,
            progress=stored.progress,
            report=stored.report,
            error=stored.error,
            user=user,
        )
