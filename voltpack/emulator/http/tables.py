"""Server-side printing: `meta.k8s.io/v1 Table` responses, which `kubectl get` asks for."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from voltpack.emulator.objects import JsonObj, get_path, parse_timestamp
from voltpack.emulator.resources import ResourceType

Column = tuple[str, str, str, int]
"""(name, type, format, priority) of a table column."""

_NAME: Column = ("Name", "string", "name", 0)
_AGE: Column = ("Age", "string", "", 0)


def human_duration(seconds: float) -> str:
    """An age as kubectl shows it: 45s, 3m20s, 5h12m, 3d4h, 400d, 2y30d."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if days < 365 * 8:
        rest = days % 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{years}y"


def _age(value: Any, now: datetime) -> str:
    moment = parse_timestamp(value) if isinstance(value, str) else None
    if moment is None:
        return "<unknown>"
    return human_duration((now - moment).total_seconds())


def _pod_cells(obj: JsonObj, now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for container in statuses:
        state = container.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason"):
            reason = state["terminated"]["reason"]
    if obj.get("metadata", {}).get("deletionTimestamp"):
        reason = "Terminating"
    return [
        obj["metadata"]["name"],
        f"{ready}/{len(containers)}",
        reason,
        str(restarts),
        _age(obj["metadata"].get("creationTimestamp"), now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        "<none>",
    ]


def _node_cells(obj: JsonObj, now: datetime) -> list[Any]:
    status = obj.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is None:
        state = "Unknown"
    else:
        state = {"True": "Ready", "False": "NotReady"}.get(ready.get("status"), "Unknown")
    if (obj.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = obj["metadata"].get("labels") or {}
    roles = sorted(
        key.split("/", 1)[1]
        for key in labels
        if key.startswith("node-role.kubernetes.io/") and "/" in key
    )
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return [
        obj["metadata"]["name"],
        state,
        ",".join(roles) or "<none>",
        _age(obj["metadata"].get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP") or "<none>",
        addresses.get("ExternalIP") or "<none>",
        info.get("osImage", "<unknown>"),
        info.get("kernelVersion", "<unknown>"),
        info.get("containerRuntimeVersion", "<unknown>"),
    ]


def _event_cells(obj: JsonObj, now: datetime) -> list[Any]:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    last = (
        obj.get("lastTimestamp") or obj.get("eventTime") or obj["metadata"].get("creationTimestamp")
    )
    return [
        _age(last, now),
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        obj.get("message") or obj.get("note") or "",
    ]


_BUILTIN_COLUMNS: dict[str, list[Column]] = {
    "pods": [
        _NAME,
        ("Ready", "string", "", 0),
        ("Status", "string", "", 0),
        ("Restarts", "string", "", 0),
        _AGE,
        ("IP", "string", "", 1),
        ("Node", "string", "", 1),
        ("Nominated Node", "string", "", 1),
        ("Readiness Gates", "string", "", 1),
    ],
    "nodes": [
        _NAME,
        ("Status", "string", "", 0),
        ("Roles", "string", "", 0),
        _AGE,
        ("Version", "string", "", 0),
        ("Internal-IP", "string", "", 1),
        ("External-IP", "string", "", 1),
        ("OS-Image", "string", "", 1),
        ("Kernel-Version", "string", "", 1),
        ("Container-Runtime", "string", "", 1),
    ],
    "namespaces": [_NAME, ("Status", "string", "", 0), _AGE],
    "configmaps": [_NAME, ("Data", "integer", "", 0), _AGE],
    "secrets": [_NAME, ("Type", "string", "", 0), ("Data", "integer", "", 0), _AGE],
    "events": [
        ("Last Seen", "string", "", 0),
        ("Type", "string", "", 0),
        ("Reason", "string", "", 0),
        ("Object", "string", "", 0),
        ("Message", "string", "", 0),
    ],
    "events.events.k8s.io": [
        ("Last Seen", "string", "", 0),
        ("Type", "string", "", 0),
        ("Reason", "string", "", 0),
        ("Object", "string", "", 0),
        ("Message", "string", "", 0),
    ],
    "leases.coordination.k8s.io": [_NAME, ("Holder", "string", "", 0), _AGE],
    "customresourcedefinitions.apiextensions.k8s.io": [
        _NAME,
        ("Created At", "date", "", 0),
    ],
    "serviceaccounts": [_NAME, ("Secrets", "string", "", 0), _AGE],
    "roles.rbac.authorization.k8s.io": [_NAME, ("Created At", "date", "", 0)],
    "clusterroles.rbac.authorization.k8s.io": [_NAME, ("Created At", "date", "", 0)],
    "rolebindings.rbac.authorization.k8s.io": [
        _NAME,
        ("Role", "string", "", 0),
        _AGE,
        ("Users", "string", "", 1),
        ("Groups", "string", "", 1),
        ("ServiceAccounts", "string", "", 1),
    ],
    "clusterrolebindings.rbac.authorization.k8s.io": [
        _NAME,
        ("Role", "string", "", 0),
        _AGE,
        ("Users", "string", "", 1),
        ("Groups", "string", "", 1),
        ("ServiceAccounts", "string", "", 1),
    ],
}


def _binding_cells(obj: JsonObj, age: str) -> list[Any]:
    ref = obj.get("roleRef") or {}
    by_kind: dict[str, list[str]] = {"User": [], "Group": [], "ServiceAccount": []}
    for subject in obj.get("subjects") or []:
        kind = subject.get("kind")
        if kind == "ServiceAccount":
            by_kind[kind].append(f"{subject.get('namespace', '')}/{subject.get('name', '')}")
        elif kind in by_kind:
            by_kind[kind].append(str(subject.get("name", "")))
    return [
        obj["metadata"]["name"],
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        age,
        ", ".join(by_kind["User"]),
        ", ".join(by_kind["Group"]),
        ", ".join(by_kind["ServiceAccount"]),
    ]


def _builtin_cells(rtype: ResourceType, obj: JsonObj, now: datetime) -> list[Any]:
    metadata = obj["metadata"]
    age = _age(metadata.get("creationTimestamp"), now)
    key = rtype.key
    if key == "pods":
        return _pod_cells(obj, now)
    if key == "nodes":
        return _node_cells(obj, now)
    if key == "namespaces":
        return [metadata["name"], (obj.get("status") or {}).get("phase", ""), age]
    if key == "configmaps":
        count = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
        return [metadata["name"], count, age]
    if key == "secrets":
        return [metadata["name"], obj.get("type", ""), len(obj.get("data") or {}), age]
    if key in ("events", "events.events.k8s.io"):
        return _event_cells(obj, now)
    if key == "leases.coordination.k8s.io":
        return [metadata["name"], (obj.get("spec") or {}).get("holderIdentity") or "", age]
    if key in (
        "customresourcedefinitions.apiextensions.k8s.io",
        "roles.rbac.authorization.k8s.io",
        "clusterroles.rbac.authorization.k8s.io",
    ):
        return [metadata["name"], metadata.get("creationTimestamp", "")]
    if key in (
        "rolebindings.rbac.authorization.k8s.io",
        "clusterrolebindings.rbac.authorization.k8s.io",
    ):
        return _binding_cells(obj, age)
    if key == "serviceaccounts":
        return [metadata["name"], str(len(obj.get("secrets") or [])), age]
    return [metadata["name"], age]


# --- JSONPath subset for additionalPrinterColumns ---------------------------------------------

_STEP_RE = re.compile(
    r"\.([A-Za-z0-9_\-]+)|\['([^']+)'\]|\[(\d+)\]|\[\*\]|\[\?\(@\.([\w.\-]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]"
)


def json_path(obj: Any, path: str) -> list[Any]:
    """Values at a JSONPath such as `.spec.size`, `.a[0].b`, `.a[*].b`, `.a[?(@.t=="x")].s`."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    text = text.removeprefix("$")
    current = [obj]
    pos = 0
    while pos < len(text):
        match = _STEP_RE.match(text, pos)
        if match is None:
            return []
        pos = match.end()
        field = match.group(1) or match.group(2)
        following: list[Any] = []
        for value in current:
            if field is not None:
                if isinstance(value, dict) and field in value:
                    following.append(value[field])
            elif match.group(3) is not None:
                index = int(match.group(3))
                if isinstance(value, list) and index < len(value):
                    following.append(value[index])
            elif match.group(4) is not None:
                if isinstance(value, list):
                    following.extend(
                        item
                        for item in value
                        if str(get_path(item, match.group(4))) == match.group(5)
                    )
            elif isinstance(value, list):
                following.extend(value)
        current = following
    return current


def _custom_cell(column: JsonObj, obj: JsonObj, now: datetime) -> Any:
    values = json_path(obj, str(column.get("jsonPath", "")))
    if not values:
        return None
    ctype = column.get("type", "string")
    if ctype == "date":
        return _age(values[0], now)
    if len(values) == 1 and ctype in ("integer", "number", "boolean"):
        return values[0]
    if len(values) == 1 and not isinstance(values[0], (dict, list)):
        return values[0] if ctype != "string" else str(values[0])
    return ",".join(str(v) for v in values)


NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)


def _custom_columns(rtype: ResourceType) -> list[JsonObj]:
    """A CRD's printer columns described as kube-apiserver describes them."""
    custom = rtype.printer_columns or [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]
    name: JsonObj = {"name": "Name", "type": "string", "format": "name"}
    name.update({"description": NAME_DESCRIPTION, "priority": 0})
    return [name] + [
        {
            "name": str(c.get("name", "")),
            "type": str(c.get("type", "string")),
            "format": str(c.get("format", "")),
            "description": str(c.get("description") or "")
            or f"Custom resource definition column (in JSONPath format): {c.get('jsonPath', '')}",
            "priority": int(c.get("priority", 0) or 0),
        }
        for c in custom
    ]


def columns_for(rtype: ResourceType) -> list[JsonObj]:
    if rtype.custom:
        return _custom_columns(rtype)
    columns = _BUILTIN_COLUMNS.get(rtype.key, [_NAME, _AGE])
    return [
        {
            "name": name,
            "type": ctype,
            "format": fmt,
            "description": f"{name} of the {rtype.kind}",
            "priority": priority,
        }
        for name, ctype, fmt, priority in columns
    ]


def row_for(rtype: ResourceType, obj: JsonObj, now: datetime, include: str) -> JsonObj:
    if rtype.custom:
        cells: list[Any] = [obj["metadata"]["name"]]
        if rtype.printer_columns:
            cells.extend(_custom_cell(column, obj, now) for column in rtype.printer_columns)
        else:
            cells.append(_age(obj["metadata"].get("creationTimestamp"), now))
    else:
        cells = _builtin_cells(rtype, obj, now)
    row: JsonObj = {"cells": cells}
    if include == "Object":
        row["object"] = obj
    elif include != "None":
        row["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata", {}),
        }
    return row


def table(
    rtype: ResourceType,
    objects: list[JsonObj],
    now: datetime,
    list_meta: JsonObj,
    include: str = "Metadata",
) -> JsonObj:
    """A Table of `objects` with the columns `kubectl get` shows for their type."""
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns_for(rtype),
        "rows": [row_for(rtype, obj, now, include) for obj in objects],
    }
