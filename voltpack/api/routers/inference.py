"""InferenceServices and their plans (`/inferenceservices`); `create_app` includes this
router only when the API has an inference source."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response

from voltpack.api.problems import ApiProblemError
from voltpack.api.routers import resource_router
from voltpack.api.routers.access import Caller, CanGet
from voltpack.api.routers.reading import MAX_PAGE, PAGE_LIMIT, AfterKey, page_by_key, read
from voltpack.api.sources import InferenceSource
from voltpack.model.inference_views import InferencePlanView, InferenceServiceView

router = resource_router("workloads")


def _source(caller: Caller) -> InferenceSource:
    source = caller.deps.inference
    assert source is not None, "create_app includes this router only with an inference source"
    return source


@router.get("/inferenceservices", response_model=list[InferenceServiceView])
def inference_services(
    caller: CanGet,
    response: Response,
    namespace: Annotated[str | None, Query(max_length=253)] = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_PAGE, description=PAGE_LIMIT)] = None,
    after: AfterKey = None,
) -> list[InferenceServiceView]:
    """InferenceServices (by namespace/name) with their phase, replicas, predicted cost
    and planning rate; all of them unless `limit` is given."""
    found = read(_source(caller).inference_services)
    if namespace is not None:
        found = [s for s in found if s.namespace == namespace]
    return page_by_key(found, lambda s: f"{s.namespace}/{s.name}", limit, after, response)


@router.get("/inferenceservices/{namespace}/{name}/plan", response_model=InferencePlanView)
def inference_plan(namespace: str, name: str, caller: CanGet) -> InferencePlanView:
    """One service's plan in effect: replica groups per GPU type and role, the buckets
    each serves, predicted cost, the planning rate and its source, and why."""
    plan = read(lambda: _source(caller).inference_plan(namespace, name))
    if plan is None:
        raise ApiProblemError(
            404, "not-found", "No such InferenceService",
            f"InferenceService {namespace}/{name} is unknown",
        )  # fmt: skip
    return plan
