"""A pod's effective resource requests, as kube-scheduler's NodeResourcesFit counts them.

component-helpers' `PodRequests`: the containers' requests summed; each init container needs its
own requests plus those of the restartable (sidecar) init containers started before it, and the
pod needs the larger of the two per resource; sidecars run beside the containers, so their
requests add to the sum. Pod-level requests (`spec.resources`, for CPU, memory and hugepages)
replace the containers' figure; `spec.overhead` is added last. A container without a request
for a resource it limits asks for the limit (the apiserver's defaulting).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from voltpack.model.errors import InvalidRequestError

Requests = dict[str, Decimal]
HUGEPAGES_PREFIX = "hugepages-"
POD_LEVEL_RESOURCES = ("cpu", "memory")
"""Resources `spec.resources` may set for the whole pod (and hugepages-*)."""


def quantity(value: Any, where: str) -> Decimal:
    """A Kubernetes quantity as a number; a clear error naming `where` when it is none."""
    try:
        return Decimal(parse_quantity(value))
    except (ValueError, TypeError, ArithmeticError):
        raise InvalidRequestError(f"{where}: {value!r} is not a Kubernetes quantity") from None


def _container_requests(container: Mapping[str, Any], where: str) -> Requests:
    resources = container.get("resources") or {}
    requests = dict(resources.get("limits") or {})
    requests.update(resources.get("requests") or {})
    return {name: quantity(value, f"{where} {name}") for name, value in requests.items()}


def _add(total: Requests, more: Mapping[str, Decimal]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, Decimal(0)) + amount


def _max(total: Requests, other: Mapping[str, Decimal]) -> None:
    for name, amount in other.items():
        if amount > total.get(name, Decimal(0)):
            total[name] = amount


def _containers(spec: Mapping[str, Any], field: str) -> Iterable[tuple[int, Mapping[str, Any]]]:
    for index, container in enumerate(spec.get(field) or []):
        if not isinstance(container, Mapping):
            raise InvalidRequestError(f"spec.{field}[{index}] is not an object")
        yield index, container


def effective_requests(pod: Mapping[str, Any], key: str) -> Requests:
    """What the pod needs of each resource on a node to be admitted there."""
    spec = pod.get("spec") or {}
    total: Requests = {}
    for index, container in _containers(spec, "containers"):
        _add(total, _container_requests(container, f"pod {key}: spec.containers[{index}]"))
    sidecars: Requests = {}
    init_peak: Requests = {}
    for index, container in _containers(spec, "initContainers"):
        own = _container_requests(container, f"pod {key}: spec.initContainers[{index}]")
        if container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            _max(init_peak, sidecars)
        else:
            during = dict(sidecars)
            _add(during, own)
            _max(init_peak, during)
    _max(total, init_peak)
    pod_level = ((spec.get("resources") or {}).get("requests")) or {}
    for name, value in pod_level.items():
        if name in POD_LEVEL_RESOURCES or name.startswith(HUGEPAGES_PREFIX):
            total[name] = quantity(value, f"pod {key}: spec.resources.requests {name}")
    for name, value in (spec.get("overhead") or {}).items():
        _add(total, {name: quantity(value, f"pod {key}: spec.overhead {name}")})
    return total
