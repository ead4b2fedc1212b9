"""Who a request is from: its `Authorization: Bearer` header checked by the authenticator."""

from __future__ import annotations

from voltpack.api.auth import Authenticator, AuthUnavailableError, Principal
from voltpack.api.problems import ApiProblemError

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="voltpack"'}


def authenticate_bearer(authenticator: Authenticator, authorization: str | None) -> Principal:
    """The principal of a bearer token; ApiProblemError 401 without a known token, 503 when the
    authentication back end cannot be asked."""
    if not authorization or not authorization.lower().startswith("bearer "):
        raise ApiProblemError(
            401,
            "unauthenticated",
            "Authentication required",
            "send 'Authorization: Bearer <token>'",
            headers=CHALLENGE,
        )
    token = authorization[7:].strip()
    try:
        principal = authenticator.authenticate(token) if token else None
    except AuthUnavailableError as exc:
        raise ApiProblemError(503, "auth-unavailable", "Cannot check the token", str(exc)) from None
    if principal is None:
        raise ApiProblemError(
            401,
            "unauthenticated",
            "Unknown token",
            "the bearer token is not valid",
            headers=CHALLENGE,
        )
    return principal
