"""Kubernetes timestamps (RFC 3339, e.g. `2026-11-28T17:32:02Z`) as Unix seconds."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def kube_time_s(text: object) -> float | None:
    """Unix seconds of an RFC 3339 timestamp (or anything whose text is one, e.g. a
    datetime); None when absent or unreadable."""
    if text is None or text == "":
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def pod_start_s(pod: Mapping[str, Any]) -> float | None:
    """When the kubelet started the pod (`status.startTime`), None before it did."""
    return kube_time_s((pod.get("status") or {}).get("startTime"))


def created_s(obj: Mapping[str, Any]) -> float | None:
    """When the API server created the object (`metadata.creationTimestamp`)."""
    return kube_time_s(obj["metadata"].get("creationTimestamp"))


def rfc3339(seconds: float) -> str:
    """Unix seconds as an RFC 3339 UTC time (whole seconds)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
