"""Reads the routes share: a source or the database out of reach answers 503, a bad page
token 400, each as a problem document; and keyset pages of in-memory lists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

from fastapi import Query, Response

from voltpack.api.dependencies import ApiDependencies
from voltpack.api.paging import (
    AFTER_TEXT,
    CONTINUE_TEXT,
    LIMIT_TEXT,
    MAX_LIMIT,
    MAX_TOKEN_CHARS,
    NEXT_AFTER_HEADER,
    Continuation,
    ContinueTokenError,
)
from voltpack.api.paging import start_of as _start_of
from voltpack.api.problems import ApiProblemError
from voltpack.api.sources import History, SourceUnavailableError

MAX_PAGE = 1000
PAGE_LIMIT = "at most this many items, sorted by key (default: all)"

# the query parameters of a paged list (`limit`, `continue`, `after`; see api/paging.py)
PageLimit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=LIMIT_TEXT)]
ContinueToken = Annotated[
    str | None, Query(alias="continue", max_length=MAX_TOKEN_CHARS, description=CONTINUE_TEXT)
]
AfterKey = Annotated[str | None, Query(max_length=512, description=AFTER_TEXT)]

Value = TypeVar("Value")
Item = TypeVar("Item")


def read(call: Callable[[], Value]) -> Value:
    """`call()`, its source out of reach answered as 503 cluster-unavailable."""
    try:
        return call()
    except SourceUnavailableError as exc:
        raise ApiProblemError(503, "cluster-unavailable", "Cluster unavailable", str(exc)) from None


def history_of(deps: ApiDependencies) -> History:
    """The stored history; 503 history-unavailable when no database is configured."""
    if deps.history is None:
        raise ApiProblemError(
            503,
            "history-unavailable",
            "History unavailable",
            "no database is configured (voltpack api --database-url)",
        )
    return deps.history


def read_history(deps: ApiDependencies, call: Callable[[History], Value]) -> Value:
    """`call(history)`, no database or one out of reach answered as 503 history-unavailable."""
    store = history_of(deps)
    try:
        return call(store)
    except SourceUnavailableError as exc:
        raise ApiProblemError(503, "history-unavailable", "History unavailable", str(exc)) from None


def start_of(resource: str, token: str | None, after: str | None) -> Continuation:
    """Where the asked page of `resource` starts; 400 invalid-continue for a bad token."""
    try:
        return _start_of(resource, token, after)
    except ContinueTokenError as exc:
        raise ApiProblemError(400, "invalid-continue", "Invalid continue", str(exc)) from None


def page_by_key(
    items: list[Item],
    key: Callable[[Item], str],
    limit: int | None,
    after: str | None,
    response: Response,
) -> list[Item]:
    """Keyset pagination of an in-memory list: items sorted by key, those after `after`, at
    most `limit`; when more remain, the last key returned goes into `X-Next-After`."""
    ordered = sorted(items, key=key)
    if after is not None:
        ordered = [item for item in ordered if key(item) > after]
    if limit is None or len(ordered) <= limit:
        return ordered
    page = ordered[:limit]
    response.headers[NEXT_AFTER_HEADER] = key(page[-1])
    return page
