"""API errors as the Kubernetes API server reports them: a `v1 Status` with reason and code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from voltpack.emulator.objects import JsonObj
from voltpack.model.errors import VoltpackError


class EmulatorError(VoltpackError):
    """The emulator was set up wrongly (a bad setting, a port in use); the message says how."""


@dataclass(frozen=True)
class Cause:
    """One `details.causes[]` entry: which field is wrong and why."""

    field: str
    reason: str
    message: str

    def to_json(self) -> JsonObj:
        return {"reason": self.reason, "message": self.message, "field": self.field}

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


@dataclass
class ApiError(Exception):
    """An error the emulator answers with a `Status` object instead of the requested object."""

    code: int
    reason: str
    message: str
    details: JsonObj | None = None
    headers: dict[str, str] = field(default_factory=dict)
    plain_text: bool = False
    """Answer `message` as text/plain instead of a Status (kube-apiserver's catch-all 404)."""

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> JsonObj:
        """The `v1 Status` body of this error."""
        body: JsonObj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def qualified(resource: str, group: str) -> str:
    """`pods` or `leases.coordination.k8s.io`, as resources are named in messages."""
    return f"{resource}.{group}" if group else resource


def _details(name: str, group: str, kind: str, **extra: Any) -> JsonObj:
    details: JsonObj = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    details.update(extra)
    return details


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(resource, group)} "{name}" not found',
        _details(name, group, resource),
    )


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def page_not_found() -> ApiError:
    """What kube-apiserver answers for a path no API group serves (unknown groups, unknown kinds
    of a CRD's group): its mux's plain-text 404, not a Status."""
    return ApiError(404, "NotFound", "404 page not found\n", plain_text=True)


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        _details(name, group, resource),
    )


def conflict(resource: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        _details(name, group, resource),
    )


def precondition_failed(kind: str, group: str, name: str, why: str) -> ApiError:
    """409 of a DELETE whose preconditions fail: kube-apiserver names the kind, not the
    resource, there (`Operation cannot be fulfilled on Pod "x"`)."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(kind, group)} "{name}": {why}',
        _details(name, group, kind),
    )


STALE_OBJECT = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(kind: str, group: str, name: str, causes: list[Cause]) -> ApiError:
    """422 Invalid naming every bad field, formatted as the API server formats it."""
    what = f"{kind}.{group}" if group else kind
    listed = ", ".join(str(c) for c in causes)
    if len(causes) != 1:
        listed = f"[{listed}]"
    return ApiError(
        422,
        "Invalid",
        f'{what} "{name}" is invalid: {listed}',
        _details(name, group, kind, causes=[c.to_json() for c in causes]),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(resource: str, group: str, name: str, why: str) -> ApiError:
    target = f'{qualified(resource, group)} "{name}"' if name else qualified(resource, group)
    return ApiError(
        403, "Forbidden", f"{target} is forbidden: {why}", _details(name, group, resource)
    )


def method_not_allowed(message: str = "") -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        message or "the server does not allow this method on the requested resource",
        {},
    )


def expired(message: str) -> ApiError:
    """410 with reason Expired: a resourceVersion or continue token that is too old."""
    return ApiError(410, "Expired", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Gone", message)


def unsupported_media_type(message: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", message, {})


def not_acceptable(message: str) -> ApiError:
    return ApiError(406, "NotAcceptable", message, {})


def internal(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


_REASONS = {
    429: "TooManyRequests",
    500: "InternalError",
    502: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def injected(code: int, message: str | None) -> ApiError:
    """The error a fault-injection rule asks for (any 4xx/5xx code)."""
    reason = _REASONS.get(code, "InternalError" if code >= 500 else "BadRequest")
    text = message or f"injected fault: HTTP {code}"
    error = ApiError(code, reason, text, {})
    if code in (429, 503):
        error.headers["Retry-After"] = "1"
        error.details = {"retryAfterSeconds": 1}
    return error
