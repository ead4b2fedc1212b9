"""Decoding of the Kubernetes protobuf encoding, for the few kinds kubectl sends that way.

`kubectl create namespace|configmap|secret|serviceaccount|role|clusterrole|rolebinding|
clusterrolebinding` and `kubectl auth can-i|whoami` post protobuf (`application/vnd.kubernetes.
protobuf`): the magic `k8s\\0`, then a `runtime.Unknown` holding the TypeMeta and the object's
bytes. This module turns those kinds into JSON objects; any other kind is refused with 415, as
answers are always JSON (which those clients accept).
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from voltpack.emulator.errors import ApiError, bad_request, unsupported_media_type
from voltpack.emulator.objects import JsonObj, timestamp

MAGIC = b"k8s\x00"

# A schema maps a field number to (JSON name, how to decode it). A nested dict is a message.
Schema = dict[int, tuple[str, Any]]

_TYPE_META: Schema = {1: ("apiVersion", "string"), 2: ("kind", "string")}
_UNKNOWN: Schema = {1: ("typeMeta", _TYPE_META), 2: ("raw", "raw")}
_OWNER_REFERENCE: Schema = {
    1: ("kind", "string"),
    3: ("name", "string"),
    4: ("uid", "string"),
    5: ("apiVersion", "string"),
    6: ("controller", "bool"),
    7: ("blockOwnerDeletion", "bool"),
}
_OBJECT_META: Schema = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
    5: ("uid", "string"),
    6: ("resourceVersion", "string"),
    7: ("generation", "int"),
    8: ("creationTimestamp", "time"),
    9: ("deletionTimestamp", "time"),
    10: ("deletionGracePeriodSeconds", "int"),
    11: ("labels", "map"),
    12: ("annotations", "map"),
    13: ("ownerReferences", ("repeated", _OWNER_REFERENCE)),
    14: ("finalizers", "strings"),
}
_POLICY_RULE: Schema = {
    1: ("verbs", "strings"),
    2: ("apiGroups", "strings"),
    3: ("resources", "strings"),
    4: ("resourceNames", "strings"),
    5: ("nonResourceURLs", "strings"),
}
_LABEL_SELECTOR: Schema = {
    1: ("matchLabels", "map"),
    2: (
        "matchExpressions",
        ("repeated", {1: ("key", "string"), 2: ("operator", "string"), 3: ("values", "strings")}),
    ),
}
_SUBJECT: Schema = {
    1: ("kind", "string"),
    2: ("apiGroup", "string"),
    3: ("name", "string"),
    4: ("namespace", "string"),
}
_ROLE_REF: Schema = {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")}
_BINDING: Schema = {
    1: ("metadata", _OBJECT_META),
    2: ("subjects", ("repeated", _SUBJECT)),
    3: ("roleRef", _ROLE_REF),
}
_RESOURCE_ATTRIBUTES: Schema = {
    1: ("namespace", "string"),
    2: ("verb", "string"),
    3: ("group", "string"),
    4: ("version", "string"),
    5: ("resource", "string"),
    6: ("subresource", "string"),
    7: ("name", "string"),
}
_NON_RESOURCE_ATTRIBUTES: Schema = {1: ("path", "string"), 2: ("verb", "string")}
_ACCESS_REVIEW_SPEC: Schema = {
    1: ("resourceAttributes", _RESOURCE_ATTRIBUTES),
    2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES),
    3: ("user", "string"),
    4: ("groups", "strings"),
    6: ("uid", "string"),
}
_ACCESS_REVIEW: Schema = {1: ("metadata", _OBJECT_META), 2: ("spec", _ACCESS_REVIEW_SPEC)}

KINDS: dict[str, Schema] = {
    "ConfigMap": {
        1: ("metadata", _OBJECT_META),
        2: ("data", "map"),
        3: ("binaryData", "bytes_map"),
        4: ("immutable", "bool"),
    },
    "Secret": {
        1: ("metadata", _OBJECT_META),
        2: ("data", "bytes_map"),
        3: ("type", "string"),
        4: ("stringData", "map"),
        5: ("immutable", "bool"),
    },
    "Namespace": {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("finalizers", "strings")}),
    },
    "ServiceAccount": {
        1: ("metadata", _OBJECT_META),
        3: ("automountServiceAccountToken", "bool"),
        4: ("imagePullSecrets", ("repeated", {1: ("name", "string")})),
    },
    "Role": {1: ("metadata", _OBJECT_META), 2: ("rules", ("repeated", _POLICY_RULE))},
    "ClusterRole": {
        1: ("metadata", _OBJECT_META),
        2: ("rules", ("repeated", _POLICY_RULE)),
        3: ("aggregationRule", {1: ("clusterRoleSelectors", ("repeated", _LABEL_SELECTOR))}),
    },
    "RoleBinding": _BINDING,
    "ClusterRoleBinding": _BINDING,
    "TokenReview": {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("token", "string"), 2: ("audiences", "strings")}),
    },
    "SelfSubjectReview": {1: ("metadata", _OBJECT_META)},
    "TokenRequest": {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("audiences", "strings"), 4: ("expirationSeconds", "int")}),
    },
    "SubjectAccessReview": _ACCESS_REVIEW,
    "LocalSubjectAccessReview": _ACCESS_REVIEW,
    "SelfSubjectAccessReview": _ACCESS_REVIEW,
    "SelfSubjectRulesReview": {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("namespace", "string")}),
    },
}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise bad_request("truncated protobuf varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise bad_request("protobuf varint too long")


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs of one message; varints as int, length-delimited as bytes."""
    fields: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            fields.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise bad_request("truncated protobuf field")
            fields.append((number, data[pos : pos + length]))
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise bad_request(f"unsupported protobuf wire type {wire}")
    return fields


def _text(value: int | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _entry(value: int | bytes) -> tuple[str, bytes]:
    key, payload = "", b""
    for number, part in _fields(value if isinstance(value, bytes) else b""):
        if number == 1:
            key = _text(part)
        elif number == 2 and isinstance(part, bytes):
            payload = part
    return key, payload


def _decode(data: bytes, schema: Schema) -> JsonObj:
    out: JsonObj = {}
    for number, value in _fields(data):
        spec = schema.get(number)
        if spec is None:
            continue
        name, how = spec
        if isinstance(how, dict):
            out[name] = _decode(value if isinstance(value, bytes) else b"", how)
        elif isinstance(how, tuple):
            element = _decode(value if isinstance(value, bytes) else b"", how[1])
            out.setdefault(name, []).append(element)
        elif how in ("string", "raw"):
            out[name] = value if how == "raw" else _text(value)
        elif how == "int":
            out[name] = int(value) if isinstance(value, int) else 0
        elif how == "bool":
            out[name] = bool(value)
        elif how == "strings":
            out.setdefault(name, []).append(_text(value))
        elif how == "time":
            seconds = _decode(value if isinstance(value, bytes) else b"", {1: ("s", "int")})
            if seconds.get("s"):
                out[name] = timestamp(datetime.fromtimestamp(seconds["s"], UTC))
        elif how in ("map", "bytes_map"):
            key, payload = _entry(value)
            shown = base64.b64encode(payload).decode() if how == "bytes_map" else payload.decode()
            out.setdefault(name, {})[key] = shown
    return {
        k: v
        for k, v in out.items()
        if v not in ("", {}, [], 0) or k in ("immutable", "automountServiceAccountToken")
    }


def decode(body: bytes) -> JsonObj:
    """A protobuf-encoded object of one of `KINDS` as its JSON object."""
    if not body.startswith(MAGIC):
        raise bad_request("protobuf body does not start with the Kubernetes magic prefix")
    unknown = _decode(body[len(MAGIC) :], _UNKNOWN)
    type_meta = unknown.get("typeMeta") or {}
    kind = str(type_meta.get("kind", ""))
    schema = KINDS.get(kind)
    if schema is None:
        error: ApiError = unsupported_media_type(
            f"protobuf is only accepted for {', '.join(sorted(KINDS))}, not {kind or 'this kind'}"
            "; send application/json"
        )
        raise error
    raw = unknown.get("raw")
    obj = _decode(raw if isinstance(raw, bytes) else b"", schema)
    obj["apiVersion"] = type_meta.get("apiVersion") or "v1"
    obj["kind"] = kind
    obj.setdefault("metadata", {})
    return obj
