"""Errors as RFC 7807 problem documents (`application/problem+json`)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from voltpack.model.echo import shorten

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_BASE = "https://voltpack.io/problems/"
MAX_DETAIL_CHARS = 2000
"""A problem's detail is cut here; a field error's message at `MAX_MESSAGE_CHARS`."""
MAX_MESSAGE_CHARS = 300
MAX_FIELD_ERRORS = 20


class Problem(BaseModel):
    """An RFC 7807 problem document; `errors` lists field errors of a bad request."""

    type: str = Field(description="a URI naming the kind of problem")
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[dict[str, Any]] | None = None


class ApiProblemError(Exception):
    """Raise to answer with a problem document."""

    def __init__(
        self,
        status: int,
        kind: str,
        title: str,
        detail: str,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.title = title
        self.detail = detail
        self.errors = errors
        self.headers = headers or {}


def problem_response(
    request: Request,
    status: int,
    kind: str,
    title: str,
    detail: str,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """A JSON response carrying a problem document; the detail (which may echo a user's input)
    is cut to `MAX_DETAIL_CHARS`."""
    body = Problem(
        type=PROBLEM_BASE + kind,
        title=title,
        status=status,
        detail=shorten(detail, MAX_DETAIL_CHARS),
        instance=str(request.url.path),
        errors=errors,
    )
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )


def _field_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """The first `MAX_FIELD_ERRORS` errors, field and message cut short (a custom validator's
    message may quote the input)."""
    errors = []
    found = exc.errors()
    for error in found[:MAX_FIELD_ERRORS]:
        where = shorten(".".join(str(part) for part in error.get("loc", ())))
        message = shorten(str(error.get("msg", "")), MAX_MESSAGE_CHARS)
        errors.append({"field": where, "message": message})
    if len(found) > MAX_FIELD_ERRORS:
        errors.append({"field": "(more)", "message": f"and {len(found) - MAX_FIELD_ERRORS} more"})
    return errors


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every error, expected or not, with a problem document."""

    async def on_problem(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiProblemError)
        return problem_response(
            request, exc.status, exc.kind, exc.title, exc.detail, exc.errors, exc.headers
        )

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = _field_errors(exc)
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors) or "invalid request"
        return problem_response(request, 422, "invalid-request", "Invalid request", detail, errors)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        titles = {404: "Not found", 405: "Method not allowed"}
        kind = {404: "not-found", 405: "method-not-allowed"}.get(exc.status_code, "http-error")
        return problem_response(
            request,
            exc.status_code,
            kind,
            titles.get(exc.status_code, "HTTP error"),
            str(exc.detail),
            headers=dict(exc.headers or {}),
        )

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return problem_response(
            request,
            500,
            "internal-error",
            "Internal error",
            f"{type(exc).__name__}: the server logged the details",
        )

    app.add_exception_handler(ApiProblemError, on_problem)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)
