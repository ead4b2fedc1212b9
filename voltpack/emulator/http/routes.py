"""URL layout of the Kubernetes API and the HTTP handlers that map requests onto verbs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web

from voltpack.emulator.access import reviews
from voltpack.emulator.access.auth import RequestIdentity, request_user
from voltpack.emulator.errors import (
    ApiError,
    Cause,
    bad_request,
    invalid,
    method_not_allowed,
    not_acceptable,
    page_not_found,
    path_not_found,
    unsupported_media_type,
)
from voltpack.emulator.http import aggregated, discovery, protobuf
from voltpack.emulator.http.tables import table
from voltpack.emulator.http.watch import WatchRequest, WatchStream
from voltpack.emulator.objects import JsonObj
from voltpack.emulator.operations import (
    APPLY_PATCH,
    PATCH_TYPES,
    DeleteOptions,
    ListOptions,
    WriteOptions,
    Written,
)
from voltpack.emulator.resources import BUILTINS, ResourceType
from voltpack.emulator.selectors import parse_field_selector, parse_label_selector
from voltpack.model import safe_yaml

if TYPE_CHECKING:
    from voltpack.emulator.state import EmulatorState

STATE_KEY: web.AppKey[EmulatorState] = web.AppKey("voltpack_emulator_state")
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True)
class Target:
    """A resource URL: /api(s)/group/version/[watch/][namespaces/ns/]resource[/name[/sub]]."""

    group: str
    version: str
    namespace: str | None
    resource: str
    name: str | None
    subresource: str | None
    watch_path: bool


def parse_resource_path(path: str) -> Target | None:
    parts = [part for part in path.split("/") if part]
    if len(parts) >= 3 and parts[0] == "api" and parts[1] == "v1":
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    watch_path = False
    if rest and rest[0] == "watch":
        watch_path = True
        rest = rest[1:]
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace = rest[1]
        rest = rest[2:]
    if not rest or len(rest) > 3:
        return None
    return Target(
        group,
        version,
        namespace,
        rest[0],
        rest[1] if len(rest) > 1 else None,
        rest[2] if len(rest) > 2 else None,
        watch_path,
    )


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1", "yes")


def verb_of(method: str, target: Target, query: Any) -> str:
    """The Kubernetes verb of a request (get, list, watch, create, ...)."""
    method = method.upper()
    if method == "GET":
        if target.watch_path or (target.name is None and _truthy(query.get("watch"))):
            return "watch"
        return "get" if target.name else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if target.name else "deletecollection"
    return method.lower()


def request_verb(request: web.Request) -> str | None:
    target = parse_resource_path(request.path)
    return None if target is None else verb_of(request.method, target, request.query)


# --- responses ---------------------------------------------------------------------------------


def _wants_yaml(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "yaml" in accept and "json" not in accept


def respond(
    request: web.Request,
    body: JsonObj,
    status: int = 200,
    warnings: list[str] | None = None,
) -> web.Response:
    headers = {"Cache-Control": "no-cache, private"}
    if warnings:
        headers["Warning"] = ", ".join(
            '299 - "' + w.replace("\\", "\\\\").replace('"', '\\"') + '"' for w in warnings
        )
    if _wants_yaml(request):
        text = yaml.safe_dump(body, sort_keys=False)
        return web.Response(
            text=text, status=status, content_type="application/yaml", headers=headers
        )
    indent = 2 if _truthy(request.query.get("pretty")) else None
    return web.Response(
        body=json.dumps(body, indent=indent, separators=None if indent else (",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def error_response(request: web.Request, error: ApiError) -> web.Response:
    if error.plain_text:
        return web.Response(status=error.code, text=error.message, content_type="text/plain")
    response = respond(request, error.status(), error.code)
    for key, value in error.headers.items():
        response.headers[key] = value
    return response


def _check_accept(request: web.Request) -> None:
    accept = request.headers.get("Accept", "")
    if not accept:
        return
    for media in accept.split(","):
        kind = media.split(";", 1)[0].strip().lower()
        if kind in ("*/*", "application/*", "application/json", "application/yaml", "") or (
            kind.endswith("+json")
        ):
            return
    raise not_acceptable(
        "only the following media types are accepted: application/json, application/yaml"
    )


def _table_requested(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    first = accept.split(",", 1)[0]
    return "as=Table" in first


async def _read_body(request: web.Request) -> Any:
    raw = await request.read()
    content_type = request.content_type.lower()
    if content_type == "application/vnd.kubernetes.protobuf":
        return protobuf.decode(raw)
    if "protobuf" in content_type or "cbor" in content_type:
        raise unsupported_media_type(
            f"the body of the request was in an unknown format - accepted media types include: "
            f"application/json, application/yaml (got {content_type})"
        )
    if not raw.strip():
        return None
    try:
        if "yaml" in content_type:
            return safe_yaml.safe_load(raw.decode("utf-8"))
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise bad_request(f"error decoding the request body: {exc}") from None
    except RecursionError:
        raise bad_request("error decoding the request body: it nests too deep") from None


_OPTIONS_KIND = {"PUT": "UpdateOptions", "PATCH": "PatchOptions", "DELETE": "DeleteOptions"}


def _write_options(request: web.Request) -> WriteOptions:
    dry_run = request.query.getall("dryRun", [])
    bad = [value for value in dry_run if value != "All"]
    if bad:
        shown = "[" + ", ".join(f'"{value}"' for value in bad) + "]"
        why = f'Unsupported value: {shown}: supported values: "All"'
        kind = _OPTIONS_KIND.get(request.method.upper(), "CreateOptions")
        raise invalid(kind, "meta.k8s.io", "", [Cause("dryRun", "FieldValueNotSupported", why)])
    validation = request.query.get("fieldValidation") or "Warn"
    if validation not in ("Ignore", "Warn", "Strict"):
        raise bad_request(
            f"invalid fieldValidation directive {validation!r}: must be Ignore, Warn or Strict"
        )
    return WriteOptions(dry_run=bool(dry_run), field_validation=validation)


def _int_param(request: web.Request, name: str) -> int | None:
    value = request.query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise bad_request(f"invalid value for {name}: {value!r}") from None


async def _delete_options(request: web.Request) -> DeleteOptions:
    body = await _read_body(request)
    options: JsonObj = body if isinstance(body, dict) else {}
    grace = options.get("gracePeriodSeconds")
    query_grace = _int_param(request, "gracePeriodSeconds")
    if query_grace is not None:
        grace = query_grace
    policy = request.query.get("propagationPolicy") or options.get("propagationPolicy")
    orphan = request.query.get("orphanDependents")
    if orphan is None and "orphanDependents" in options:
        orphan = str(options["orphanDependents"]).lower()
    if policy is None and orphan is not None and _truthy(orphan):
        policy = "Orphan"
    if policy not in (None, "Orphan", "Background", "Foreground"):
        raise bad_request(f"invalid propagationPolicy {policy!r}")
    preconditions = options.get("preconditions") or {}
    dry_run = request.query.getall("dryRun", []) or options.get("dryRun") or []
    return DeleteOptions(
        dry_run=bool(dry_run),
        grace_period_s=int(grace) if grace is not None else None,
        propagation_policy=policy,
        precondition_uid=preconditions.get("uid"),
        precondition_rv=preconditions.get("resourceVersion"),
    )


def _list_options(request: web.Request, rtype: ResourceType) -> ListOptions:
    limit = _int_param(request, "limit")
    return ListOptions(
        labels=parse_label_selector(request.query.get("labelSelector")),
        fields=parse_field_selector(request.query.get("fieldSelector"), rtype),
        limit=limit,
        continue_token=request.query.get("continue") or None,
    )


def _include_object(request: web.Request) -> str:
    value = request.query.get("includeObject") or "Metadata"
    if value not in ("None", "Metadata", "Object"):
        raise bad_request(f"invalid includeObject {value!r}")
    return value


# --- handlers ----------------------------------------------------------------------------------


async def handle(request: web.Request) -> web.StreamResponse:
    """Entry point for every request (one catch-all route)."""
    state = request.app[STATE_KEY]
    path = "/" + "/".join(part for part in request.path.split("/") if part)
    if path in ("/healthz", "/livez", "/readyz"):
        return web.Response(text="ok")
    _check_accept(request)
    if request.method not in ("GET", "HEAD") and (
        path in ("/", "/version", "/api", "/apis", "/api/v1")
        or path.startswith("/openapi")
        or (path.startswith("/apis/") and path.count("/") <= 3)
    ):
        raise method_not_allowed()
    if path == "/":
        paths = ["/api", "/api/v1", "/apis", "/healthz", "/openapi/v3", "/version"]
        paths += [f"/apis/{g}" for g in state.registry.group_versions()]
        return respond(request, {"paths": sorted(paths)})
    if path == "/version":
        return respond(request, discovery.version_info(state.config.kubernetes_version))
    if path in ("/api", "/apis") and aggregated.wanted(request.headers.get("Accept", "")):
        discovered = aggregated.discovery_list(state.registry, legacy=path == "/api")
        return web.Response(
            body=json.dumps(discovered, separators=(",", ":")).encode(),
            headers={"Content-Type": aggregated.MEDIA_TYPE, "Cache-Control": "no-cache, private"},
        )
    if path == "/api":
        return respond(request, discovery.api_versions(request.host))
    if path == "/apis":
        return respond(request, discovery.api_group_list(state.registry))
    if path == "/openapi/v3":
        return respond(request, discovery.openapi_root(state.registry))
    if path.startswith("/openapi/v3/"):
        parts = path.split("/")[3:]
        document = None
        if len(parts) == 2 and parts[0] == "api":
            document = discovery.openapi_document(state.registry, "", parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            document = discovery.openapi_document(state.registry, parts[1], parts[2])
        if document is None:
            raise path_not_found()
        return respond(request, document)
    parts = path.split("/")[1:]
    if path == "/api/v1":
        return respond(request, discovery.resource_list(state.registry, "", "v1") or {})
    if len(parts) == 2 and parts[0] == "apis":
        group = discovery.api_group(state.registry, parts[1])
        if group is None:
            raise path_not_found()
        return respond(request, group)
    if len(parts) == 3 and parts[0] == "apis":
        listing = discovery.resource_list(state.registry, parts[1], parts[2])
        if listing is None:
            raise path_not_found()
        return respond(request, listing)
    target = parse_resource_path(path)
    if target is None:
        raise path_not_found()
    return await _handle_resource(request, state, target)


_BUILTIN_GROUPS = frozenset(rtype.group for rtype in BUILTINS)


def _unserved(group: str) -> ApiError:
    """A resource path nothing serves: a built-in group answers a NotFound Status, any other
    path falls through to kube-apiserver's plain-text 404."""
    return path_not_found() if group in _BUILTIN_GROUPS else page_not_found()


async def _handle_resource(
    request: web.Request, state: EmulatorState, target: Target
) -> web.StreamResponse:
    rtype = state.registry.lookup(target.group, target.version, target.resource)
    if rtype is None:
        raise _unserved(target.group)
    method = request.method.upper()
    ops = state.ops
    if target.namespace is not None and not rtype.namespaced:
        raise _unserved(target.group)
    if rtype.review:
        return await _review(request, state, rtype, target)
    if rtype.key == "bindings":
        if target.name is not None or method != "POST" or target.namespace is None:
            raise method_not_allowed() if target.name is None else path_not_found()
        body = await _read_body(request)
        return respond(
            request, ops.bind(target.namespace, body, None, _write_options(request)), 201
        )
    if rtype.namespaced and target.name is not None and target.namespace is None:
        raise path_not_found()
    if target.subresource is not None:
        return await _handle_subresource(request, state, rtype, target)
    verb = verb_of(method, target, request.query)
    if verb == "get":
        assert target.name is not None
        obj = ops.get(rtype, target.namespace, target.name)
        if _table_requested(request):
            rv = obj["metadata"].get("resourceVersion", "")
            body = table(
                rtype, [obj], state.clock(), {"resourceVersion": rv}, _include_object(request)
            )
            return respond(request, body)
        return respond(request, obj)
    if verb == "list":
        listed = ops.list(rtype, target.namespace, _list_options(request, rtype))
        if _table_requested(request):
            items = [ops.present(rtype, item) for item in listed["items"]]
            list_meta = {k: v for k, v in listed["metadata"].items() if v != ""}
            body = table(rtype, items, state.clock(), list_meta, _include_object(request))
            return respond(request, body)
        return respond(request, listed)
    if verb == "watch":
        return await _watch(request, state, rtype, target)
    if verb == "create":
        if target.name is not None:
            raise method_not_allowed()
        body = await _read_body(request)
        written = ops.create(rtype, target.namespace, body, _write_options(request))
        return respond(request, written.obj, 201, written.warnings)
    if verb == "update":
        if target.name is None:
            raise method_not_allowed()
        body = await _read_body(request)
        written = ops.update(
            rtype, target.namespace, target.name, body, "", _write_options(request)
        )
        return _written(request, written)
    if verb == "patch":
        if target.name is None:
            raise method_not_allowed()
        written = await _patch(request, state, rtype, target, "")
        return _written(request, written)
    if verb == "delete":
        assert target.name is not None
        result = ops.delete(rtype, target.namespace, target.name, await _delete_options(request))
        return respond(request, result)
    if verb == "deletecollection":
        list_options = _list_options(request, rtype)
        result = ops.delete_collection(
            rtype, target.namespace, list_options, await _delete_options(request)
        )
        return respond(request, result)
    raise method_not_allowed()


async def _review(
    request: web.Request, state: EmulatorState, rtype: ResourceType, target: Target
) -> web.Response:
    """Create (answer) a TokenReview, SubjectAccessReview or one of their variants."""
    if target.name is not None or target.subresource is not None:
        raise path_not_found()
    if request.method.upper() != "POST":
        raise method_not_allowed()
    if rtype.namespaced and target.namespace is None:
        raise path_not_found()
    _write_options(request)
    body = await _read_body(request)
    kind = rtype.kind
    if kind == "TokenReview":
        answer = reviews.token_review(body, state.authenticator)
    elif kind == "SubjectAccessReview":
        answer = reviews.subject_access_review(body, state.rbac_policy())
    elif kind == "LocalSubjectAccessReview":
        assert target.namespace is not None
        answer = reviews.local_subject_access_review(body, target.namespace, state.rbac_policy())
    else:
        identity = RequestIdentity.from_headers(request.headers.items())
        requester = request_user(identity, state.authenticator, state.rbac_policy().authorize)
        if kind == "SelfSubjectReview":
            answer = reviews.self_subject_review(body, requester, state.clock())
        elif kind == "SelfSubjectAccessReview":
            answer = reviews.self_subject_access_review(body, requester, state.rbac_policy())
        elif kind == "SelfSubjectRulesReview":
            answer = reviews.self_subject_rules_review(body, requester, state.rbac_policy())
        else:
            raise method_not_allowed()
    return respond(request, answer, 201)


def _written(request: web.Request, written: Written) -> web.Response:
    return respond(request, written.obj, 201 if written.created else 200, written.warnings)


async def _patch(
    request: web.Request,
    state: EmulatorState,
    rtype: ResourceType,
    target: Target,
    subresource: str,
) -> Written:
    assert target.name is not None
    content_type = request.content_type.lower()
    if content_type not in PATCH_TYPES:
        raise unsupported_media_type(
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(PATCH_TYPES)}"
        )
    if content_type == APPLY_PATCH and not request.query.get("fieldManager"):
        why = "Required value: is required for apply patch"
        cause = Cause("fieldManager", "FieldValueRequired", why)
        raise invalid("PatchOptions", "meta.k8s.io", "", [cause])
    raw = await request.read()
    return state.ops.patch(
        rtype,
        target.namespace,
        target.name,
        content_type,
        raw,
        subresource,
        _write_options(request),
    )


async def _handle_subresource(
    request: web.Request, state: EmulatorState, rtype: ResourceType, target: Target
) -> web.StreamResponse:
    assert target.name is not None and target.subresource is not None
    if target.subresource not in rtype.subresources:
        raise path_not_found()
    method = request.method.upper()
    ops = state.ops
    if target.subresource == "binding":
        if method != "POST":
            raise method_not_allowed()
        body = await _read_body(request)
        status = ops.bind(target.namespace or "", body, target.name, _write_options(request))
        return respond(request, status, 201)
    if target.subresource == "eviction":
        if method != "POST":
            raise method_not_allowed()
        body = await _read_body(request)
        status = ops.evict(target.namespace or "", target.name, body, _write_options(request))
        return respond(request, status, 201)
    if target.subresource == "token":
        if method != "POST":
            raise method_not_allowed()
        account = ops.get(rtype, target.namespace, target.name)
        body = await _read_body(request)
        answer = reviews.token_request(body, account, state.authenticator, state.clock())
        return respond(request, answer, 201)
    if method == "GET":
        return respond(request, ops.get(rtype, target.namespace, target.name))
    if method == "PUT":
        body = await _read_body(request)
        written = ops.update(
            rtype, target.namespace, target.name, body, "status", _write_options(request)
        )
        return _written(request, written)
    if method == "PATCH":
        return _written(request, await _patch(request, state, rtype, target, "status"))
    raise method_not_allowed()


async def _watch(
    request: web.Request, state: EmulatorState, rtype: ResourceType, target: Target
) -> web.StreamResponse:
    if "watch" not in rtype.verbs:
        raise method_not_allowed()
    if _truthy(request.query.get("sendInitialEvents")) and (
        request.query.get("resourceVersionMatch") != "NotOlderThan"
    ):
        why = "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        cause = Cause("resourceVersionMatch", "FieldValueForbidden", why)
        raise invalid("ListOptions", "meta.k8s.io", "", [cause])
    timeout = _int_param(request, "timeoutSeconds")
    limit_s = state.config.max_watch_timeout_s
    timeout_s = float(min(timeout, limit_s)) if timeout is not None and timeout > 0 else limit_s
    options = _list_options(request, rtype)
    fields = options.fields
    if target.name is not None:
        fields = parse_field_selector(
            ",".join(
                part
                for part in (
                    f"metadata.name={target.name}",
                    request.query.get("fieldSelector") or "",
                )
                if part
            ),
            rtype,
        )
    watch_request = WatchRequest(
        rtype=rtype,
        namespace=target.namespace,
        labels=options.labels,
        fields=fields,
        resource_version=request.query.get("resourceVersion", ""),
        timeout_s=timeout_s,
        bookmarks=_truthy(request.query.get("allowWatchBookmarks")),
        send_initial_events=_truthy(request.query.get("sendInitialEvents")),
        as_table=_table_requested(request),
        include_object=_include_object(request),
    )
    return await WatchStream(state, watch_request).serve(request)
