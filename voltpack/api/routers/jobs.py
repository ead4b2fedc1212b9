"""Jobs and pod groups, with their placement or why they wait (`/jobs`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response

from voltpack.api.paging import DEFAULT_LIMIT, send_page
from voltpack.api.problems import ApiProblemError
from voltpack.api.routers import resource_router
from voltpack.api.routers.access import CanGet
from voltpack.api.routers.reading import AfterKey, ContinueToken, PageLimit, read, start_of
from voltpack.model.admin import JobView

router = resource_router("workloads")


@router.get("/jobs", response_model=list[JobView])
def jobs(
    caller: CanGet,
    response: Response,
    pending: Annotated[bool | None, Query(description="only pending (true) or not")] = None,
    queue: Annotated[str | None, Query(max_length=253)] = None,
    limit: PageLimit = DEFAULT_LIMIT,
    continue_: ContinueToken = None,
    after: AfterKey = None,
) -> list[JobView]:
    """Jobs and pod groups by namespace/name with their placement, or why they are pending,
    a page at a time (`X-Continue`); with a filter a page may hold fewer than `limit` jobs
    while more follow: read on while `X-Continue` is there."""
    start = start_of("jobs", continue_, after)
    page = read(lambda: caller.deps.cluster.job_page(start.after, limit, pending, queue))
    send_page(response, "jobs", page, start)
    return page.items


@router.get("/jobs/{namespace}/{name}", response_model=JobView)
def job(namespace: str, name: str, caller: CanGet) -> JobView:
    """One job."""
    found = read(lambda: caller.deps.cluster.job(namespace, name))
    if found is None:
        raise ApiProblemError(404, "not-found", "No such job", f"job {namespace}/{name} is unknown")
    return found
