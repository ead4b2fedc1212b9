"""Plain-JSON Kubernetes objects: the type alias, metadata access, timestamps and names."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

JsonObj = dict[str, Any]
"""A Kubernetes object (or any JSON object) as decoded from the wire."""

Clock = Callable[[], datetime]
"""Returns the current time as an aware UTC datetime."""

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATE_SUFFIX_LEN = 5


def utc_now() -> datetime:
    """The wall clock, the default `Clock`."""
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    """RFC 3339 with second precision, as `metav1.Time` is serialised (`2024-05-01T12:00:00Z`)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(value: str) -> datetime | None:
    """Parse an RFC 3339 timestamp; None when it is not one."""
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except (ValueError, AttributeError):
        return None


def new_uid() -> str:
    """A random UID as the API server assigns to every object."""
    return str(uuid.uuid4())


def generated_name(prefix: str, rng: random.Random) -> str:
    """`metadata.generateName` plus five random characters, as the API server does it."""
    suffix = "".join(rng.choice(_GENERATE_ALPHABET) for _ in range(_GENERATE_SUFFIX_LEN))
    return prefix + suffix


def meta(obj: JsonObj) -> JsonObj:
    """`obj.metadata`, created empty when missing or not an object."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
        obj["metadata"] = metadata
    return metadata


def name_of(obj: JsonObj) -> str:
    """`metadata.name` or the empty string."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        name = metadata.get("name")
        if isinstance(name, str):
            return name
    return ""


def namespace_of(obj: JsonObj) -> str:
    """`metadata.namespace` or the empty string."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        namespace = metadata.get("namespace")
        if isinstance(namespace, str):
            return namespace
    return ""


def string_map(obj: JsonObj, field: str) -> dict[str, str]:
    """`metadata.<field>` (labels, annotations) as a dict of strings; empty when absent."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return {}
    value = metadata.get(field)
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def finalizers_of(obj: JsonObj) -> list[str]:
    """`metadata.finalizers` or an empty list."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        finalizers = metadata.get("finalizers")
        if isinstance(finalizers, list):
            return [str(f) for f in finalizers]
    return []


def is_deleting(obj: JsonObj) -> bool:
    """True when `metadata.deletionTimestamp` is set."""
    metadata = obj.get("metadata")
    return isinstance(metadata, dict) and bool(metadata.get("deletionTimestamp"))


def resource_version_of(obj: JsonObj) -> str:
    """`metadata.resourceVersion` or the empty string."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        rv = metadata.get("resourceVersion")
        if isinstance(rv, str):
            return rv
    return ""


def get_path(obj: Any, dotted: str) -> Any:
    """The value at a dotted path (`spec.nodeName`) or None when any step is missing."""
    current = obj
    for part in dotted.split("."):
        if not isinstance(current, dict):
            return None
        current = current.get(part)
    return current
