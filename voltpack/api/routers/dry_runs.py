"""Dry runs of a policy file on the cluster as it is (`/policy/dry-runs`): queued, polled."""

from __future__ import annotations

from fastapi import Response

from voltpack.api.background import RunQueueFullError
from voltpack.api.dry_runs import DryRun
from voltpack.api.problems import ApiProblemError
from voltpack.api.routers import API_PREFIX, resource_router
from voltpack.api.routers.access import CanDryRun, CanGet, record_audit
from voltpack.api.routers.policy import PolicyText
from voltpack.model.admin import DryRunView
from voltpack.model.errors import PolicyError
from voltpack.policies.schema import PolicyFile, parse_policy

router = resource_router("policy")


def _parse(text: str) -> PolicyFile:
    try:
        return parse_policy(text, "request body")
    except PolicyError as exc:
        raise ApiProblemError(422, "invalid-policy", "Invalid policy file", str(exc)) from None


@router.post("/policy/dry-runs", response_model=DryRunView, status_code=202)
def submit_dry_run(body: PolicyText, response: Response, caller: CanDryRun) -> DryRunView:
    """Queue a dry run: one scheduling cycle and one power tick with the policy on the
    cluster as it is when it runs; poll it by id. At most a few wait at once: beyond, 429
    with Retry-After."""
    policy = _parse(body.text)

    def finished(run: DryRun) -> None:
        binds = run.result.binds if run.result is not None else None
        record_audit(caller, "policy.dry-run", policy.metadata.name, run.status, id=run.id,
                     binds=binds, error=run.error)  # fmt: skip

    try:
        run = caller.deps.dry_runs.submit(
            caller.deps.cluster, policy, caller.principal.user, finished
        )
    except RunQueueFullError as exc:
        raise ApiProblemError(
            429, "too-many-dry-runs", "Too many dry runs", str(exc),
            headers={"Retry-After": str(exc.retry_after_s)},
        ) from None  # fmt: skip
    response.headers["Location"] = f"{API_PREFIX}/policy/dry-runs/{run.id}"
    return run.view()


@router.get("/policy/dry-runs/{run_id}", response_model=DryRunView)
def dry_run(run_id: str, caller: CanGet) -> DryRunView:
    """A dry run's state and, once done, what the policy would bind, leave pending (why),
    preempt and cap."""
    run = caller.deps.dry_runs.get(run_id)
    if run is None:
        raise ApiProblemError(
            404, "not-found", "No such dry run", f"dry run {run_id!r} is unknown or forgotten"
        )
    return run.view()
