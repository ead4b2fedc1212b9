"""The cluster at a glance and its nodes (`/cluster`, `/nodes`)."""

from __future__ import annotations

from fastapi import Response

from voltpack.api.paging import DEFAULT_LIMIT, send_page
from voltpack.api.problems import ApiProblemError
from voltpack.api.routers import resource_router
from voltpack.api.routers.access import CanGet
from voltpack.api.routers.reading import AfterKey, ContinueToken, PageLimit, read, start_of
from voltpack.model.admin import ClusterSummary, NodeView

router = resource_router("cluster")


@router.get("/cluster", response_model=ClusterSummary)
def cluster(caller: CanGet) -> ClusterSummary:
    """The cluster at a glance: nodes, GPUs per model, jobs, queues and power."""
    return read(caller.deps.cluster.summary)


@router.get("/nodes", response_model=list[NodeView])
def nodes(
    caller: CanGet,
    response: Response,
    limit: PageLimit = DEFAULT_LIMIT,
    continue_: ContinueToken = None,
    after: AfterKey = None,
) -> list[NodeView]:
    """Nodes by name with their GPUs' health, allocation and power, a page at a time: while
    more follow, `X-Continue` holds the token for the next page (see the API docs)."""
    start = start_of("nodes", continue_, after)
    page = read(lambda: caller.deps.cluster.node_page(start.after, limit))
    send_page(response, "nodes", page, start)
    return page.items


@router.get("/nodes/{name}", response_model=NodeView)
def node(name: str, caller: CanGet) -> NodeView:
    """One node."""
    found = read(lambda: caller.deps.cluster.node(name))
    if found is None:
        raise ApiProblemError(
            404, "not-found", "No such node", f"node {name!r} is not in the cluster"
        )
    return found
