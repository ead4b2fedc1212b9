"""The admin API's routes, one `fastapi.APIRouter` per resource, each module's `router`.

A resource's router (`resource_router`) serves under `API_PREFIX` and declares the problem
responses every route may give. A route gets the caller, authorized for one verb, and the
app's `ApiDependencies` in one FastAPI dependency (`access.CanGet`, `access.CanCap`, ...);
`reading` turns unreachable sources and bad page tokens into problem documents.
"""

from typing import Any

from fastapi import APIRouter

from voltpack.api.problems import Problem

API_PREFIX = "/api/v1"

PROBLEMS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "description": text}
    for code, text in (
        (401, "no or unknown bearer token"),
        (403, "the caller's role does not allow this"),
        (413, "the request body is larger than the API accepts (--max-body-bytes)"),
        (503, "the cluster, the database or the auth back end is unreachable"),
    )
}
"""The problems any route under `API_PREFIX` may answer with (in the OpenAPI document)."""


def resource_router(tag: str) -> APIRouter:
    """A resource's router: routes under `API_PREFIX`, tagged `tag`, with `PROBLEMS`."""
    return APIRouter(prefix=API_PREFIX, tags=[tag], responses=PROBLEMS)
