"""The stored history: the decision log and the audit log (`/decisions`, `/audit`); both
need a database (503 without one)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from voltpack.api.problems import ApiProblemError
from voltpack.api.routers import resource_router
from voltpack.api.routers.access import CanGet
from voltpack.api.routers.reading import MAX_PAGE, read_history
from voltpack.store import AuditEntry, DecisionPage

router = resource_router("history")


@router.get("/decisions", response_model=DecisionPage)
def decisions(
    caller: CanGet,
    job: Annotated[str | None, Query(max_length=253)] = None,
    node: Annotated[str | None, Query(max_length=253)] = None,
    since_s: Annotated[float | None, Query(ge=0, le=1e11)] = None,
    until_s: Annotated[float | None, Query(ge=0, le=1e11)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> DecisionPage:
    """The decision log, newest first, filtered by job, node and time; paginated."""
    try:
        return read_history(
            caller.deps,
            lambda store: store.query_decisions(job, node, since_s, until_s, limit, cursor),
        )
    except ValueError as exc:
        raise ApiProblemError(400, "invalid-cursor", "Invalid cursor", str(exc)) from None


@router.get("/audit", response_model=list[AuditEntry])
def audit_log(
    caller: CanGet, limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100
) -> list[AuditEntry]:
    """Administrative actions, newest first: who, what, when, and the outcome."""
    return read_history(caller.deps, lambda store: store.list_audit(limit))
