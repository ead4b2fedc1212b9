"""Small helpers over the official `kubernetes` client: plain-dict replies and API errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import orjson
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from voltpack.operator.kube.async_post import attached

REQUEST_TIMEOUT_S = (10.0, 60.0)
"""(connect, read) seconds for one API request: a connection that died without a reset (an
API server failover, a dropped route) fails the call instead of hanging the caller forever,
as client-go's HTTP/2 health checks do."""


def call_json(function: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Call a client method without model deserialisation; return the reply as a dict.

    The client cannot parse some replies a real API server sends (e.g. the `Status` a
    `pods/binding` create returns, kubernetes-client/python#825), so voltpack reads them raw.
    A request without `_request_timeout` gets `REQUEST_TIMEOUT_S`.
    """
    kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT_S)
    response = function(*args, _preload_content=False, **kwargs)
    return _reply_dict(response.data)


def _reply_dict(data: bytes | None) -> dict[str, Any]:
    """A reply's JSON object; {} for an empty reply or one that is not an object."""
    parsed = orjson.loads(data) if data else {}
    return parsed if isinstance(parsed, dict) else {}


def post_json(
    api: ApiClient,
    resource_path: str,
    body: dict[str, Any],
    timeout_s: tuple[float, float] = REQUEST_TIMEOUT_S,
) -> dict[str, Any]:
    """POST `body` to `resource_path` (its parts already quoted) with the client's own
    connection pool, headers, credentials (refreshed as the client refreshes them) and errors
    (`ApiException` for a non-2xx answer, as `call_json` raises), without the generated
    method's argument validation and model serialisation: on a real apiserver those were a
    third of the CPU of each of the operator's bindings. With an `AsyncPoster` attached to
    `api` (the operator's), the request goes through it instead (`kube/async_post.py`)."""
    poster = attached(api)
    if poster is not None:
        return poster.post(resource_path, body, timeout_s)
    headers: dict[str, str] = {**api.default_headers, "Content-Type": "application/json",
                               "Accept": "application/json"}  # fmt: skip
    if api.cookie:
        headers["Cookie"] = api.cookie
    api.update_params_for_auth(headers, [], ["BearerToken"], resource_path, "POST", body)
    response = api.call_api(
        "POST",
        api.configuration.host + resource_path,
        header_params=headers,
        body=body,
        _request_timeout=timeout_s,
    )
    data = response.read()
    if not 200 <= response.status <= 299:
        raise ApiException.from_response(http_resp=response, body=None, data=None)
    return _reply_dict(data)


def path_part(value: str) -> str:
    """One segment of a resource path, quoted as the client quotes path parameters."""
    return quote(value, safe="")


def status_code(error: Exception) -> int | None:
    """HTTP status of an API error, None for other errors."""
    return error.status if isinstance(error, ApiException) else None


def api_message(error: Exception) -> str:
    """The `message` of a v1 Status body, or the error text."""
    if isinstance(error, ApiException) and error.body:
        try:
            body = json.loads(error.body)
        except (ValueError, TypeError):
            return str(error.body)
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    return str(error)
