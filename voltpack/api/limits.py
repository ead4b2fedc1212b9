"""Bounds on what a request may cost before the API looks at it (ASGI middlewares).

- `BodyLimit`: a body over `max_body_bytes` gets 413 — at once when `Content-Length` says
  so, else as soon as the streamed (chunked) body passes the limit; the rest is never read.
- `AuthenticateFirst`: every request under `/api/` is authenticated from its headers before the
  route reads its body, so an unauthenticated request costs a header check, never a body
  (401, and the body stays unread). The principal is kept in the request's state for the
  route's authorization (`principal_of`).

`install_limits` adds both, the body limit outermost.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voltpack.api.auth import Authenticator, Principal
from voltpack.api.bearer import authenticate_bearer
from voltpack.api.problems import ApiProblemError, problem_response

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body accepted: a 1,000,000-character policy file, JSON-escaped, fits."""
API_PATHS = "/api/"
_PRINCIPAL = "voltpack_principal"


def principal_of(request: Request) -> Principal | None:
    """The principal `AuthenticateFirst` found for this request, if it ran."""
    found = getattr(request.state, _PRINCIPAL, None)
    return found if isinstance(found, Principal) else None


async def _answer(scope: Scope, receive: Receive, send: Send, problem: ApiProblemError) -> None:
    response = problem_response(
        Request(scope),
        problem.status,
        problem.kind,
        problem.title,
        problem.detail,
        headers={"Connection": "close", "Cache-Control": "no-store", **problem.headers},
    )
    await response(scope, receive, send)


def _too_large(limit: int, what: str) -> ApiProblemError:
    return ApiProblemError(
        413,
        "body-too-large",
        "Request body too large",
        f"{what}; this API accepts at most {limit} bytes (voltpack api --max-body-bytes)",
    )


class BodyLimit:
    """Refuses request bodies over `max_body_bytes` with 413, declared or streamed."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        declared = Headers(scope=scope).get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                bad = ApiProblemError(
                    400, "bad-content-length", "Bad Content-Length", "not a byte count"
                )
                await _answer(scope, receive, send, bad)
                return
            if int(declared) > limit:
                problem = _too_large(limit, f"Content-Length is {int(declared)} bytes")
                await _answer(scope, receive, send, problem)
                return
        state: MutableMapping[str, Any] = {"received": 0, "started": False, "refused": False}

        async def counted_receive() -> Message:
            if state["refused"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:
                    state["refused"] = True
                    if not state["started"]:
                        problem = _too_large(limit, f"the body passed {limit} bytes")
                        await _answer(scope, receive, send, problem)
                    # the route sees a client that went away, and stops reading
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if state["refused"]:
                return  # the 413 went out instead of whatever the route answers now
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        await self.app(scope, counted_receive, guarded_send)


class AuthenticateFirst:
    """Authenticates requests under `/api/` from their headers before any body is read."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and str(scope.get("path", "")).startswith(API_PATHS):
            header = Headers(scope=scope).get("authorization")
            try:
                # a TokenReview is a blocking call: off the event loop
                principal = await run_in_threadpool(authenticate_bearer, self.authenticator, header)
            except ApiProblemError as problem:
                await _answer(scope, receive, send, problem)
                return
            scope.setdefault("state", {})[_PRINCIPAL] = principal
        await self.app(scope, receive, send)


def install_limits(app: FastAPI, authenticator: Authenticator, max_body_bytes: int) -> None:
    """Add the body limit (outermost) and authentication before the body."""
    app.add_middleware(AuthenticateFirst, authenticator=authenticator)
    app.add_middleware(BodyLimit, max_body_bytes=max_body_bytes)
