"""What every route takes from the app: the caller, authorized for one verb, and the app's
`ApiDependencies`, both in one FastAPI dependency (`CanGet`, `CanCap`, ...).

`create_app` keeps the dependencies in the app's state (`keep_dependencies`); the check answers
403 when the caller's role does not allow the verb, 503 when the auth back end cannot answer.
`record_audit` writes what a caller did into the audit log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Request

from voltpack.api.auth import AuthUnavailableError, Principal, Verb
from voltpack.api.bearer import authenticate_bearer
from voltpack.api.dependencies import ApiDependencies
from voltpack.api.limits import principal_of
from voltpack.api.problems import ApiProblemError
from voltpack.api.sources import SourceUnavailableError
from voltpack.store import AuditEntry

_STATE_KEY = "voltpack_dependencies"


def keep_dependencies(app: FastAPI, deps: ApiDependencies) -> None:
    """Keep `deps` in the app's state, where the routes' `Caller` finds them."""
    setattr(app.state, _STATE_KEY, deps)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who called (allowed the route's verb) and the API's dependencies, as a route gets them."""

    principal: Principal
    deps: ApiDependencies


def require(verb: Verb) -> Callable[..., Caller]:
    """A dependency that answers with the `Caller`, if its role allows `verb`."""

    def check(
        request: Request,
        authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> Caller:
        deps: ApiDependencies = getattr(request.app.state, _STATE_KEY)
        principal = principal_of(request) or authenticate_bearer(deps.authenticator, authorization)
        try:
            verdict = deps.authorizer.authorize(principal, verb)
        except AuthUnavailableError as exc:
            raise ApiProblemError(
                503, "auth-unavailable", "Cannot check the token", str(exc)
            ) from None
        if not verdict.allowed:
            raise ApiProblemError(
                403, "forbidden", "Not allowed", f"{verb} on voltpack.io/adminapi: {verdict.reason}"
            )
        return Caller(principal, deps)

    return check


CanGet = Annotated[Caller, Depends(require("get"))]
CanDryRun = Annotated[Caller, Depends(require("dryrun"))]
CanSimulate = Annotated[Caller, Depends(require("simulate"))]
CanApply = Annotated[Caller, Depends(require("apply"))]
CanCap = Annotated[Caller, Depends(require("cap"))]


def record_audit(caller: Caller, action: str, target: str, outcome: str, **detail: Any) -> None:
    """Write the caller's action into the audit log (nothing without a database)."""
    history = caller.deps.history
    if history is None:
        return
    # the store buffers or counts what it cannot write
    with contextlib.suppress(SourceUnavailableError):
        history.record_audit(
            AuditEntry(
                at_s=caller.deps.clock(),
                user=caller.principal.user,
                action=action,
                target=target,
                outcome=outcome,
                detail=dict(detail),
            )
        )
