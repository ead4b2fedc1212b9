"""The admin REST API (FastAPI), versioned under /api/v1; OpenAPI at /openapi.json."""

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol, TypeVar, runtime_checkable

from fastapi import Depends, FastAPI, Header, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from voltpack import __version__
from voltpack.api.auth import Authenticator, Authorizer, AuthUnavailableError, Principal, Verb
from voltpack.api.background import RunQueueFullError
from voltpack.api.bearer import authenticate_bearer
from voltpack.api.caps import ManualCap, check_cap
from voltpack.api.docs_page import install_docs_page
from voltpack.api.dry_runs import DryRun, DryRunRunner
from voltpack.api.forecast_memo import ForecastMemo, domain_forecast
from voltpack.api.forecasts import PowerForecastView
from voltpack.api.limits import DEFAULT_MAX_BODY_BYTES, install_limits, principal_of
from voltpack.api.paging import (
    AFTER_TEXT,
    CONTINUE_TEXT,
    DEFAULT_LIMIT,
    LIMIT_TEXT,
    MAX_LIMIT,
    MAX_TOKEN_CHARS,
    NEXT_AFTER_HEADER,
    Continuation,
    ContinueTokenError,
    ListPage,
    send_page,
    start_of,
)
from voltpack.api.problems import ApiProblemError, Problem, install_problem_handlers
from voltpack.api.simulations import (
    SimulationRequest,
    SimulationRunner,
)
from voltpack.api.sources import (
    ClusterSource,
    History,
    InferenceSource,
    PolicyHolder,
    SimulationRun,
    SourceUnavailableError,
)
from voltpack.forecast.default_model import DEFAULT_MODEL
from voltpack.forecast.registry import forecaster_names
from voltpack.model.admin import (
    ClusterSummary,
    DryRunView,
    JobView,
    NodeView,
    PowerDomainView,
    QueueView,
)
from voltpack.model.errors import ForecastError, PolicyError
from voltpack.model.inference_views import InferencePlanView, InferenceServiceView
from voltpack.policies.schema import PolicyFile, parse_policy
from voltpack.store import AuditEntry, DecisionPage

API_PREFIX = "/api/v1"
MAX_PAGE = 1000
PAGE_LIMIT = "at most this many items, sorted by key (default: all)"
PAGE_AFTER = AFTER_TEXT

Item = TypeVar("Item")


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


@dataclass
class ApiDependencies:
    """Everything the routes use; the `voltpack api` command builds it."""

    cluster: ClusterSource
    policies: PolicyHolder
    authenticator: Authenticator
    authorizer: Authorizer
    history: History | None = None
    simulations: SimulationRunner = field(default_factory=SimulationRunner)
    dry_runs: DryRunRunner = field(default_factory=DryRunRunner)
    clock: Callable[[], float] = time.time
    inference: InferenceSource | None = None
    """InferenceServices and their plans; None: those routes are not served."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Larger request bodies get 413 before they are read."""
    forecast_memo: ForecastMemo = field(default_factory=ForecastMemo)
    """Power forecasts kept until the domain's stored history changes."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PolicyText(_Body):
    """A policy file's YAML text."""

    text: str = Field(min_length=1, max_length=1_000_000)


class PolicyValidation(BaseModel):
    """Whether a policy file is valid, and if not, what is wrong (naming the field)."""

    valid: bool
    name: str | None = None
    errors: list[str] = Field(default_factory=list)


class ActivePolicy(BaseModel):
    """The policy the scheduler runs."""

    name: str
    text: str
    policy: dict[str, Any]


class SimulationView(BaseModel):
    """A what-if simulation run."""

    id: str
    status: str
    progress: float
    created_at_s: float
    request: dict[str, Any]
    error: str | None = None


PROBLEMS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "description": text}
    for code, text in (
        (401, "no or unknown bearer token"),
        (403, "the caller's role does not allow this"),
        (413, "the request body is larger than the API accepts (--max-body-bytes)"),
        (503, "the cluster, the database or the auth back end is unreachable"),
    )
}


@runtime_checkable
class _Closeable(Protocol):
    def close(self) -> None: ...


def _closing_sources(deps: ApiDependencies) -> Callable[[FastAPI], Any]:
    """The app's lifespan: at shutdown, sources that hold watches or connections
    (e.g. `KubeAdminSource`) are closed."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        for part in {id(p): p for p in (deps.cluster, deps.policies, deps.inference)}.values():
            if isinstance(part, _Closeable):
                part.close()

    return lifespan


def create_app(deps: ApiDependencies) -> FastAPI:
    """The FastAPI application over `deps`; its sources are closed when it shuts down."""
    app = FastAPI(
        lifespan=_closing_sources(deps),
        title="voltpack admin API",
        version=__version__,
        description="Cluster state, scheduling decisions, power, policies and what-if runs.",
        responses=PROBLEMS,
        docs_url=None,  # served below, without a CDN
        redoc_url=None,
    )
    install_problem_handlers(app)
    install_docs_page(app)
    install_limits(app, deps.authenticator, deps.max_body_bytes)

    def require(verb: Verb) -> Callable[..., Principal]:
        def check(
            request: Request,
            authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
        ) -> Principal:
            principal = principal_of(request) or authenticate_bearer(
                deps.authenticator, authorization
            )
            try:
                verdict = deps.authorizer.authorize(principal, verb)
            except AuthUnavailableError as exc:
                raise ApiProblemError(
                    503, "auth-unavailable", "Cannot check the token", str(exc)
                ) from None
            if not verdict.allowed:
                raise ApiProblemError(
                    403,
                    "forbidden",
                    "Not allowed",
                    f"{verb} on voltpack.io/adminapi: {verdict.reason}",
                )
            return principal

        return check

    def read(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except SourceUnavailableError as exc:
            raise ApiProblemError(
                503, "cluster-unavailable", "Cluster unavailable", str(exc)
            ) from None

    def history() -> History:
        if deps.history is None:
            raise ApiProblemError(
                503,
                "history-unavailable",
                "History unavailable",
                "no database is configured (voltpack api --database-url)",
            )
        return deps.history

    def audit(user: Principal, action: str, target: str, outcome: str, **detail: Any) -> None:
        if deps.history is None:
            return
        # the store buffers or counts what it cannot write
        with contextlib.suppress(SourceUnavailableError):
            deps.history.record_audit(
                AuditEntry(
                    at_s=deps.clock(),
                    user=user.user,
                    action=action,
                    target=target,
                    outcome=outcome,
                    detail=dict(detail),
                )
            )

    def parse(text: str) -> PolicyFile:
        try:
            return parse_policy(text, "request body")
        except PolicyError as exc:
            raise ApiProblemError(422, "invalid-policy", "Invalid policy file", str(exc)) from None

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(f"{API_PREFIX}/cluster", response_model=ClusterSummary, tags=["cluster"])
    def cluster(_: Annotated[Principal, Depends(require("get"))]) -> ClusterSummary:
        """The cluster at a glance: nodes, GPUs per model, jobs, queues and power."""
        summary: ClusterSummary = read(deps.cluster.summary)
        return summary

    def start_of_page(resource: str, token: str | None, after: str | None) -> Continuation:
        try:
            return start_of(resource, token, after)
        except ContinueTokenError as exc:
            raise ApiProblemError(400, "invalid-continue", "Invalid continue", str(exc)) from None

    @app.get(f"{API_PREFIX}/nodes", response_model=list[NodeView], tags=["cluster"])
    def nodes(
        _: Annotated[Principal, Depends(require("get"))],
        response: Response,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description=LIMIT_TEXT)] = DEFAULT_LIMIT,
        continue_: Annotated[
            str | None,
            Query(alias="continue", max_length=MAX_TOKEN_CHARS, description=CONTINUE_TEXT),
        ] = None,
        after: Annotated[str | None, Query(max_length=512, description=AFTER_TEXT)] = None,
    ) -> list[NodeView]:
        """Nodes by name with their GPUs' health, allocation and power, a page at a time: while
        more follow, `X-Continue` holds the token for the next page (see the API docs)."""
        start = start_of_page("nodes", continue_, after)
        page: ListPage[NodeView] = read(lambda: deps.cluster.node_page(start.after, limit))
        send_page(response, "nodes", page, start)
        return page.items

    @app.get(f"{API_PREFIX}/nodes/{{name}}", response_model=NodeView, tags=["cluster"])
    def node(name: str, _: Annotated[Principal, Depends(require("get"))]) -> NodeView:
        """One node."""
        found: NodeView | None = read(lambda: deps.cluster.node(name))
        if found is None:
            raise ApiProblemError(
                404, "not-found", "No such node", f"node {name!r} is not in the cluster"
            )
        return found

    @app.get(f"{API_PREFIX}/jobs", response_model=list[JobView], tags=["workloads"])
    def jobs(
        _: Annotated[Principal, Depends(require("get"))],
        response: Response,
        pending: Annotated[bool | None, Query(description="only pending (true) or not")] = None,
        queue: Annotated[str | None, Query(max_length=253)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description=LIMIT_TEXT)] = DEFAULT_LIMIT,
        continue_: Annotated[
            str | None,
            Query(alias="continue", max_length=MAX_TOKEN_CHARS, description=CONTINUE_TEXT),
        ] = None,
        after: Annotated[str | None, Query(max_length=512, description=AFTER_TEXT)] = None,
    ) -> list[JobView]:
        """Jobs and pod groups by namespace/name with their placement, or why they are pending,
        a page at a time (`X-Continue`); with a filter a page may hold fewer than `limit` jobs
        while more follow: read on while `X-Continue` is there."""
        start = start_of_page("jobs", continue_, after)
        page: ListPage[JobView] = read(
            lambda: deps.cluster.job_page(start.after, limit, pending, queue)
        )
        send_page(response, "jobs", page, start)
        return page.items

    @app.get(
        f"{API_PREFIX}/jobs/{{namespace}}/{{name}}", response_model=JobView, tags=["workloads"]
    )
    def job(namespace: str, name: str, _: Annotated[Principal, Depends(require("get"))]) -> JobView:
        """One job."""
        found: JobView | None = read(lambda: deps.cluster.job(namespace, name))
        if found is None:
            raise ApiProblemError(
                404, "not-found", "No such job", f"job {namespace}/{name} is unknown"
            )
        return found

    @app.get(f"{API_PREFIX}/queues", response_model=list[QueueView], tags=["workloads"])
    def queues(_: Annotated[Principal, Depends(require("get"))]) -> list[QueueView]:
        """Queues with usage against quota."""
        found: list[QueueView] = read(deps.cluster.queues)
        return found

    if deps.inference is not None:
        inference = deps.inference

        @app.get(
            f"{API_PREFIX}/inferenceservices",
            response_model=list[InferenceServiceView],
            tags=["workloads"],
        )
        def inference_services(
            _: Annotated[Principal, Depends(require("get"))],
            response: Response,
            namespace: Annotated[str | None, Query(max_length=253)] = None,
            limit: Annotated[int | None, Query(ge=1, le=MAX_PAGE, description=PAGE_LIMIT)] = None,
            after: Annotated[str | None, Query(max_length=512, description=PAGE_AFTER)] = None,
        ) -> list[InferenceServiceView]:
            """InferenceServices (by namespace/name) with their phase, replicas, predicted cost
            and planning rate; all of them unless `limit` is given."""
            found: list[InferenceServiceView] = read(inference.inference_services)
            if namespace is not None:
                found = [s for s in found if s.namespace == namespace]
            return page_by_key(found, lambda s: f"{s.namespace}/{s.name}", limit, after, response)

        @app.get(
            f"{API_PREFIX}/inferenceservices/{{namespace}}/{{name}}/plan",
            response_model=InferencePlanView,
            tags=["workloads"],
        )
        def inference_plan(
            namespace: str, name: str, _: Annotated[Principal, Depends(require("get"))]
        ) -> InferencePlanView:
            """One service's plan in effect: replica groups per GPU type and role, the buckets
            each serves, predicted cost, the planning rate and its source, and why."""
            plan: InferencePlanView | None = read(lambda: inference.inference_plan(namespace, name))
            if plan is None:
                raise ApiProblemError(
                    404, "not-found", "No such InferenceService",
                    f"InferenceService {namespace}/{name} is unknown",
                )  # fmt: skip
            return plan

    @app.get(f"{API_PREFIX}/power/domains", response_model=list[PowerDomainView], tags=["power"])
    def power_domains(_: Annotated[Principal, Depends(require("get"))]) -> list[PowerDomainView]:
        """Power domains with budget, power, headroom and the actions in effect."""
        found: list[PowerDomainView] = read(deps.cluster.power_domains)
        return found

    @app.get(
        f"{API_PREFIX}/power/domains/{{name}}/forecast",
        response_model=PowerForecastView,
        tags=["power"],
    )
    def power_forecast(
        name: str,
        _: Annotated[Principal, Depends(require("get"))],
        horizon_s: Annotated[float, Query(gt=0, le=7 * 86_400)] = 3600.0,
        level: Annotated[float, Query(gt=0.5, lt=1.0)] = 0.99,
        history_days: Annotated[float, Query(gt=0, le=60)] = 14.0,
        model: Annotated[str, Query(max_length=64)] = DEFAULT_MODEL,
        budget_w: Annotated[float | None, Query(gt=0)] = None,
    ) -> PowerForecastView:
        """The domain's peak power over the next `horizon_s` (quantiles, from its stored
        history) and the headroom the `level` quantile leaves under its budget."""
        if model not in forecaster_names():
            raise ApiProblemError(
                422, "invalid-model", "Unknown forecaster",
                f"model {model!r} is not one of {sorted(forecaster_names())}",
            )  # fmt: skip
        since_s = time.time() - history_days * 86_400
        try:
            answer: PowerForecastView = read(
                lambda: domain_forecast(
                    history(), deps.forecast_memo, name, since_s=since_s,
                    history_days=history_days, horizon_s=horizon_s, level=level,
                    budget_w=budget_w, model=model,
                )
            )  # fmt: skip
            return answer
        except ForecastError as exc:
            raise ApiProblemError(
                422, "cannot-forecast", "Cannot forecast this domain", str(exc)
            ) from None

    @app.post(
        f"{API_PREFIX}/power/domains/{{name}}/cap",
        response_model=PowerDomainView,
        tags=["power"],
    )
    def cap_domain(
        name: str, body: ManualCap, user: Annotated[Principal, Depends(require("cap"))]
    ) -> PowerDomainView:
        """Cap a domain by hand below its budget (cap_w null removes the manual cap); the cap
        must lie between the sum of its GPUs' minimum power limits and its budget."""
        if body.cap_w is not None:
            cap_w = body.cap_w
            read(
                lambda: check_cap(
                    cap_w, deps.cluster.power_domains(), deps.cluster.domain_gpu_models, name
                )
            )
        try:
            view: PowerDomainView = read(lambda: deps.cluster.set_manual_cap(name, body.cap_w))
        except KeyError:
            audit(user, "power.cap", name, "not-found", cap_w=body.cap_w)
            raise ApiProblemError(
                404, "not-found", "No such power domain", f"power domain {name!r} is unknown"
            ) from None
        audit(user, "power.cap", name, "applied", cap_w=body.cap_w)
        return view

    @app.get(f"{API_PREFIX}/decisions", response_model=DecisionPage, tags=["history"])
    def decisions(
        _: Annotated[Principal, Depends(require("get"))],
        job: Annotated[str | None, Query(max_length=253)] = None,
        node: Annotated[str | None, Query(max_length=253)] = None,
        since_s: Annotated[float | None, Query(ge=0, le=1e11)] = None,
        until_s: Annotated[float | None, Query(ge=0, le=1e11)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        cursor: Annotated[str | None, Query(max_length=512)] = None,
    ) -> DecisionPage:
        """The decision log, newest first, filtered by job, node and time; paginated."""
        store = history()
        try:
            page = store.query_decisions(job, node, since_s, until_s, limit, cursor)
        except SourceUnavailableError as exc:
            raise ApiProblemError(
                503, "history-unavailable", "History unavailable", str(exc)
            ) from None
        except ValueError as exc:
            raise ApiProblemError(400, "invalid-cursor", "Invalid cursor", str(exc)) from None
        return page

    @app.get(f"{API_PREFIX}/audit", response_model=list[AuditEntry], tags=["history"])
    def audit_log(
        _: Annotated[Principal, Depends(require("get"))],
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    ) -> list[AuditEntry]:
        """Administrative actions, newest first: who, what, when, and the outcome."""
        try:
            entries = history().list_audit(limit)
        except SourceUnavailableError as exc:
            raise ApiProblemError(
                503, "history-unavailable", "History unavailable", str(exc)
            ) from None
        return entries

    @app.get(f"{API_PREFIX}/policy", response_model=ActivePolicy, tags=["policy"])
    def active_policy(_: Annotated[Principal, Depends(require("get"))]) -> ActivePolicy:
        """The active policy file."""
        policy, text = read(deps.policies.active)
        return ActivePolicy(name=policy.metadata.name, text=text, policy=policy.model_dump())

    @app.post(f"{API_PREFIX}/policy/validate", response_model=PolicyValidation, tags=["policy"])
    def validate_policy(
        body: PolicyText, _: Annotated[Principal, Depends(require("dryrun"))]
    ) -> PolicyValidation:
        """Validate a policy file; errors name the field and the allowed values."""
        try:
            policy = parse_policy(body.text, "request body")
        except PolicyError as exc:
            return PolicyValidation(valid=False, errors=[str(exc)])
        return PolicyValidation(valid=True, name=policy.metadata.name)

    @app.post(
        f"{API_PREFIX}/policy/dry-runs",
        response_model=DryRunView,
        status_code=202,
        tags=["policy"],
    )
    def submit_dry_run(
        body: PolicyText,
        response: Response,
        user: Annotated[Principal, Depends(require("dryrun"))],
    ) -> DryRunView:
        """Queue a dry run: one scheduling cycle and one power tick with the policy on the
        cluster as it is when it runs; poll it by id. At most a few wait at once: beyond, 429
        with Retry-After."""
        policy = parse(body.text)

        def finished(run: DryRun) -> None:
            binds = run.result.binds if run.result is not None else None
            audit(user, "policy.dry-run", policy.metadata.name, run.status, id=run.id,
                  binds=binds, error=run.error)  # fmt: skip

        try:
            run = deps.dry_runs.submit(deps.cluster, policy, user.user, finished)
        except RunQueueFullError as exc:
            raise ApiProblemError(
                429, "too-many-dry-runs", "Too many dry runs", str(exc),
                headers={"Retry-After": str(exc.retry_after_s)},
            ) from None  # fmt: skip
        response.headers["Location"] = f"{API_PREFIX}/policy/dry-runs/{run.id}"
        return run.view()

    @app.get(f"{API_PREFIX}/policy/dry-runs/{{run_id}}", response_model=DryRunView, tags=["policy"])
    def dry_run(run_id: str, _: Annotated[Principal, Depends(require("get"))]) -> DryRunView:
        """A dry run's state and, once done, what the policy would bind, leave pending (why),
        preempt and cap."""
        run = deps.dry_runs.get(run_id)
        if run is None:
            raise ApiProblemError(
                404, "not-found", "No such dry run", f"dry run {run_id!r} is unknown or forgotten"
            )
        return run.view()

    @app.put(f"{API_PREFIX}/policy", response_model=ActivePolicy, tags=["policy"])
    def apply_policy(
        body: PolicyText, user: Annotated[Principal, Depends(require("apply"))]
    ) -> ActivePolicy:
        """Validate and apply a policy file; the scheduler picks it up on its next cycle."""
        try:
            policy = parse_policy(body.text, "request body")
        except PolicyError as exc:
            audit(user, "policy.apply", "?", "invalid", error=str(exc))
            raise ApiProblemError(422, "invalid-policy", "Invalid policy file", str(exc)) from None
        read(lambda: deps.policies.apply(policy, body.text))
        audit(user, "policy.apply", policy.metadata.name, "applied")
        return ActivePolicy(name=policy.metadata.name, text=body.text, policy=policy.model_dump())

    @app.post(
        f"{API_PREFIX}/simulations",
        response_model=SimulationView,
        status_code=202,
        tags=["simulations"],
    )
    def submit_simulation(
        body: SimulationRequest, user: Annotated[Principal, Depends(require("simulate"))]
    ) -> SimulationView:
        """Start a what-if simulation (a training trace, policies, seeds); poll it by id. At
        most a few run or wait at once: beyond, 429 with Retry-After."""
        try:
            run = deps.simulations.submit(body, user.user, deps.history)
        except ValueError as exc:
            raise ApiProblemError(
                422, "invalid-simulation", "Invalid simulation", str(exc)
            ) from None
        except RunQueueFullError as exc:
            raise ApiProblemError(
                429, "too-many-simulations", "Too many simulations", str(exc),
                headers={"Retry-After": str(exc.retry_after_s)},
            ) from None  # fmt: skip
        audit(user, "simulation.submit", run.id, "queued", trace=body.trace)
        return _simulation_view(run)

    def find_run(run_id: str) -> SimulationRun:
        run = deps.simulations.get(run_id, deps.history)
        if run is None:
            raise ApiProblemError(
                404, "not-found", "No such simulation", f"run {run_id!r} is unknown"
            )
        return run

    @app.get(
        f"{API_PREFIX}/simulations/{{run_id}}", response_model=SimulationView, tags=["simulations"]
    )
    def simulation(run_id: str, _: Annotated[Principal, Depends(require("get"))]) -> SimulationView:
        """A simulation's status and progress."""
        return _simulation_view(find_run(run_id))

    @app.get(f"{API_PREFIX}/simulations/{{run_id}}/report", tags=["simulations"])
    def simulation_report(
        run_id: str, _: Annotated[Principal, Depends(require("get"))]
    ) -> dict[str, Any]:
        """A finished simulation's report (409 while it runs)."""
        run = find_run(run_id)
        if run.status != "done" or run.report is None:
            raise ApiProblemError(
                409,
                "not-finished",
                "Not finished",
                f"run {run_id} is {run.status}" + (f": {run.error}" if run.error else ""),
            )
        return run.report

    @app.middleware("http")
    async def no_store(request: Request, call_next: Any) -> Any:
        response = await call_next(request)
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    return app


def _simulation_view(run: SimulationRun) -> SimulationView:
    return SimulationView(
        id=run.id,
        status=run.status,
        progress=run.progress,
        created_at_s=run.created_at_s,
        request=run.request,
        error=run.error,
    )
