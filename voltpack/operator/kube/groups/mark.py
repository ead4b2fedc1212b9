"""What one convention says of a pod's gang, and where the workload objects it reads come from."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from voltpack.model.errors import InvalidRequestError
from voltpack.model.topology_request import TopologyRequest


@dataclass(frozen=True)
class OwnerRef:
    """The workload object a gang belongs to (it hears the gang's Events)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str | None = None

    def as_object(self) -> dict[str, Any]:
        """The reference as an object `record_event` can name."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": {"name": self.name, "namespace": self.namespace, "uid": self.uid},
        }


@dataclass(frozen=True)
class GroupMark:
    """A pod's gang as its convention names it."""

    key: str
    """`namespace/name` of voltpack's own groups, `namespace/<convention>:<name>` of others."""
    min_member: int | None
    """The members the gang needs to start (running ones count); None: every member that exists."""
    convention: str
    queue: str | None = None
    owner: OwnerRef | None = None
    topology: TopologyRequest | None = None
    """What the gang's definition asks of the topology (a pod's own annotations come first)."""
    joins_running: bool = True
    """Its members running already count towards the minimum, so a replacement pod or a
    scale-up is placed on its own; False for a rigid GPUJob (its controller restarts it whole)."""


class GroupUnreadableError(InvalidRequestError):
    """The pod belongs to a gang whose definition cannot be read yet (its PodGroup or owner not
    in the cache, or malformed): it is held with this reason, never scheduled alone."""


class WorkloadObjects(Protocol):
    """The cluster's workload objects a convention may read (JobSets, PodGroups, ...)."""

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The object of `resource` (`plural.group`) named `namespace/name`, if cached."""
        ...


class NoWorkloadObjects:
    """No workload object is known: conventions that need one hold their pods."""

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return None


@dataclass(frozen=True)
class CachedWorkloadObjects:
    """Workload objects by resource, each from a function of `namespace/name` (a cache's `peek`)."""

    by_resource: Mapping[str, Callable[[str], dict[str, Any] | None]]

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        peek = self.by_resource.get(resource)
        return None if peek is None else peek(f"{namespace}/{name}")


Convention = Callable[[dict[str, Any], WorkloadObjects], GroupMark | None]
"""A pod's gang under one convention; None: the pod does not follow it.
Raises GroupUnreadableError."""


def namespace_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"].get("namespace") or "default")


def labels_of(pod: dict[str, Any]) -> dict[str, str]:
    return pod["metadata"].get("labels") or {}


def annotations_of(pod: dict[str, Any]) -> dict[str, str]:
    return pod["metadata"].get("annotations") or {}


def count(text: Any, where: str) -> int:
    """A member count (>= 1) from a label, annotation or field (else an error naming `where`)."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise GroupUnreadableError(f"{where}={text!r} is not an integer") from None
    if value < 1:
        raise GroupUnreadableError(f"{where}={value} is not a positive count")
    return value


def owner_of(obj: dict[str, Any]) -> OwnerRef:
    """An object's own reference."""
    meta = obj["metadata"]
    return OwnerRef(
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(meta.get("namespace") or "default"),
        str(meta["name"]),
        meta.get("uid"),
    )
