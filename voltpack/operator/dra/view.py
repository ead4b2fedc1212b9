"""Dynamic Resource Allocation objects (`resource.k8s.io/v1`) as the decision core sees them.

- `devices_by_node`: the devices of every ResourceSlice, by node. A pool's slices count only at
  its newest generation (older ones are being replaced by the driver, as kube-scheduler reads
  them); devices of slices that are not tied to one node (`allNodes`, `nodeSelector`) are left
  out and said once in the log.
- `device_classes`: each DeviceClass's CEL selectors and configuration.
- `claim_states`: every ResourceClaim with its request resolved against its classes
  (`ClaimRequest`), the devices already allocated to it (by voltpack or any other scheduler),
  the node its allocation is on and the pods it is reserved for; a claim voltpack cannot
  allocate (a `firstAvailable` list, an unknown class, ...) carries the reason instead.
- `pod_claim_keys`: the claims a pod uses, by `resourceClaimName` or, for a template, the claim
  the resourceclaim controller generated (`status.resourceClaimStatuses`).

Pure functions of the listed objects: no API calls here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from voltpack.model.devices import (
    AttributeValue,
    ClaimRequest,
    Device,
    DeviceConstraint,
    DeviceId,
    DeviceRequest,
    OpaqueConfig,
)

log = logging.getLogger(__name__)

DRA_GROUP = "resource.k8s.io"
DRA_VERSION = "v1"


@dataclass(frozen=True)
class DeviceClassSpec:
    """A DeviceClass: the selectors every request of it adds, and its configuration."""

    name: str
    selectors: tuple[str, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()


@dataclass(frozen=True)
class ClaimState:
    """A ResourceClaim as listed: what it asks for and what it holds."""

    key: str
    uid: str
    request: ClaimRequest | None
    """None when voltpack cannot allocate the claim (`problem` says why)."""
    problem: str = ""
    allocated: tuple[DeviceId, ...] = ()
    node: str | None = None
    """The node of its allocation (from the allocation's node selector)."""
    reserved_for: tuple[str, ...] = ()
    """UIDs of the pods it is reserved for."""
    shared: frozenset[DeviceId] = frozenset()
    """Its devices allocated as a share (`shareID`): other claims may hold them too."""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_allocated(self) -> bool:
        return bool(self.allocated) or self.node is not None


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _attribute(value: Mapping[str, Any]) -> tuple[AttributeValue | None, bool]:
    """(value, is a version) of one API attribute (`bool`, `int`, `string` or `version`)."""
    for kind in ("bool", "int", "string", "version"):
        if kind in value and value[kind] is not None:
            raw = value[kind]
            if kind == "int":
                return int(raw), False
            return raw, kind == "version"
    return None, False


def _device(raw: Mapping[str, Any], driver: str, pool: str, node: str) -> Device:
    attributes: dict[str, AttributeValue] = {}
    versions: set[str] = set()
    for name, value in (raw.get("attributes") or {}).items():
        parsed, is_version = _attribute(value or {})
        if parsed is None:
            continue
        qualified = _qualified(name, driver)
        attributes[qualified] = parsed
        if is_version:
            versions.add(qualified)
    capacity = {
        _qualified(name, driver): str((value or {}).get("value"))
        for name, value in (raw.get("capacity") or {}).items()
        if (value or {}).get("value") is not None
    }
    return Device(
        id=DeviceId(driver, pool, str(raw.get("name", ""))),
        node=node,
        attributes=attributes,
        versions=frozenset(versions),
        capacity=capacity,
        allow_multiple_allocations=bool(raw.get("allowMultipleAllocations")),
    )


_said_unsupported: set[str] = set()


def devices_by_node(slices: Iterable[Mapping[str, Any]]) -> dict[str, list[Device]]:
    """Every node's devices, from the newest generation of each driver's pools."""
    newest: dict[tuple[str, str], int] = {}
    listed = list(slices)
    for item in listed:
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver", "")), str(pool.get("name", "")))
        newest[key] = max(newest.get(key, 0), int(pool.get("generation") or 0))
    found: dict[str, list[Device]] = {}
    for item in listed:
        spec = item.get("spec") or {}
        driver = str(spec.get("driver", ""))
        pool = spec.get("pool") or {}
        pool_name = str(pool.get("name", ""))
        if int(pool.get("generation") or 0) < newest[(driver, pool_name)]:
            continue
        node = spec.get("nodeName")
        if not node:
            name = str(_meta(item).get("name", ""))
            if name not in _said_unsupported:
                _said_unsupported.add(name)
                log.info("ResourceSlice %s is not tied to one node: its devices are left out", name)
            continue
        for raw in spec.get("devices") or []:
            found.setdefault(str(node), []).append(_device(raw, driver, pool_name, str(node)))
    for devices in found.values():
        devices.sort(key=lambda device: device.id)
    return found


def _selectors(items: Iterable[Mapping[str, Any]] | None) -> tuple[str, ...]:
    return tuple(
        str((item.get("cel") or {}).get("expression", ""))
        for item in items or []
        if (item.get("cel") or {}).get("expression")
    )


def _configs(items: Iterable[Mapping[str, Any]] | None, source: str) -> tuple[OpaqueConfig, ...]:
    configs = []
    for item in items or []:
        opaque = item.get("opaque")
        if not opaque:
            continue
        configs.append(
            OpaqueConfig(
                driver=str(opaque.get("driver", "")),
                parameters=dict(opaque.get("parameters") or {}),
                requests=tuple(item.get("requests") or ()),
                source="FromClass" if source == "FromClass" else "FromClaim",
            )
        )
    return tuple(configs)


def device_classes(classes: Iterable[Mapping[str, Any]]) -> dict[str, DeviceClassSpec]:
    """DeviceClasses by name."""
    found = {}
    for item in classes:
        name = str(_meta(item).get("name", ""))
        spec = item.get("spec") or {}
        found[name] = DeviceClassSpec(
            name, _selectors(spec.get("selectors")), _configs(spec.get("config"), "FromClass")
        )
    return found


def _allocation(claim: Mapping[str, Any]) -> Mapping[str, Any]:
    return (claim.get("status") or {}).get("allocation") or {}


def _results(claim: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((_allocation(claim).get("devices") or {}).get("results") or [])


def allocation_results(claim: Mapping[str, Any]) -> list[tuple[str, DeviceId]]:
    """(request, device) of each result of a claim's `status.allocation`, in order."""
    return [
        (
            str(r.get("request", "")),
            DeviceId(str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", ""))),
        )
        for r in _results(claim)
    ]


def allocation_node(claim: Mapping[str, Any]) -> str | None:
    """The node a claim's allocation is on (its node selector's `metadata.name`), or None."""
    for term in (_allocation(claim).get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for field_match in term.get("matchFields") or []:
            if field_match.get("key") == "metadata.name" and field_match.get("values"):
                return str(field_match["values"][0])
    return None


def _request(
    raw: Mapping[str, Any], classes: Mapping[str, DeviceClassSpec], key: str
) -> tuple[DeviceRequest | None, tuple[OpaqueConfig, ...], str]:
    name = str(raw.get("name", ""))
    exactly = raw.get("exactly")
    if exactly is None:
        if raw.get("firstAvailable"):
            return None, (), f"claim {key}: request {name}: firstAvailable is not supported yet"
        return None, (), f"claim {key}: request {name} asks for nothing (no exactly)"
    class_name = str(exactly.get("deviceClassName", ""))
    device_class = classes.get(class_name)
    if device_class is None:
        return None, (), f"claim {key}: request {name}: DeviceClass {class_name!r} does not exist"
    mode = exactly.get("allocationMode") or "ExactCount"
    if mode not in ("ExactCount", "All"):
        return None, (), f"claim {key}: request {name}: allocationMode {mode!r} is not known"
    if exactly.get("capacity"):
        return None, (), f"claim {key}: request {name}: capacity requests are not supported yet"
    request = DeviceRequest(
        name=name,
        device_class=class_name,
        selectors=device_class.selectors + _selectors(exactly.get("selectors")),
        count=int(exactly.get("count") or 1),
        all_devices=mode == "All",
        admin_access=bool(exactly.get("adminAccess")),
    )
    config = tuple(
        OpaqueConfig(c.driver, c.parameters, (name,), "FromClass") for c in device_class.config
    )
    return request, config, ""


def claim_state(claim: Mapping[str, Any], classes: Mapping[str, DeviceClassSpec]) -> ClaimState:
    """One ResourceClaim, resolved against the DeviceClasses."""
    meta = _meta(claim)
    key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    devices_spec = (claim.get("spec") or {}).get("devices") or {}
    status = claim.get("status") or {}
    allocated = tuple(device for _, device in allocation_results(claim))
    shared = frozenset(
        d for d, r in zip(allocated, _results(claim), strict=True) if r.get("shareID")
    )
    reserved = tuple(
        str(ref.get("uid", "")) for ref in status.get("reservedFor") or [] if ref.get("uid")
    )
    requests: list[DeviceRequest] = []
    class_config: list[OpaqueConfig] = []
    problems: list[str] = []
    for raw in devices_spec.get("requests") or []:
        one, config, problem = _request(raw, classes, key)
        if one is None:
            problems.append(problem)
        else:
            requests.append(one)
            class_config.extend(config)
    constraints = []
    for raw in devices_spec.get("constraints") or []:
        attribute = raw.get("matchAttribute")
        if not attribute:
            problems.append(f"claim {key}: a constraint without matchAttribute is not supported")
            continue
        constraints.append(DeviceConstraint(str(attribute), tuple(raw.get("requests") or ())))
    request = None
    if not problems:
        request = ClaimRequest(
            key=key,
            uid=str(meta.get("uid", "")),
            requests=tuple(requests),
            constraints=tuple(constraints),
            config=tuple(class_config) + _configs(devices_spec.get("config"), "FromClaim"),
        )
    return ClaimState(
        key=key,
        uid=str(meta.get("uid", "")),
        request=request,
        problem="; ".join(problems),
        allocated=allocated,
        node=allocation_node(claim),
        reserved_for=reserved,
        shared=shared,
        raw=claim,
    )


def claim_states(
    claims: Iterable[Mapping[str, Any]], classes: Mapping[str, DeviceClassSpec]
) -> dict[str, ClaimState]:
    """Every ResourceClaim by `namespace/name`."""
    states = (claim_state(claim, classes) for claim in claims)
    return {state.key: state for state in states}


def devices_in_use(states: Iterable[ClaimState]) -> set[DeviceId]:
    """Devices allocated to any claim, whoever allocated them."""
    return {device for state in states for device in state.allocated}


def pod_claim_keys(pod: Mapping[str, Any]) -> tuple[list[str], str]:
    """(`namespace/name` of each claim the pod uses, why some are not known yet or '')."""
    meta = _meta(pod)
    namespace = str(meta.get("namespace", ""))
    generated = {
        str(s.get("name")): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    keys, waiting = [], []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = str(entry.get("name", ""))
        if entry.get("resourceClaimName"):
            keys.append(f"{namespace}/{entry['resourceClaimName']}")
        elif entry.get("resourceClaimTemplateName"):
            claim = generated.get(name)
            if claim:
                keys.append(f"{namespace}/{claim}")
            elif name not in generated:
                waiting.append(f"the claim of {name} is not generated from its template yet")
            # a null resourceClaimName: the controller decided the pod needs no claim
    return keys, "; ".join(waiting)


def uses_claims(pod: Mapping[str, Any]) -> bool:
    """True when the pod asks for devices through ResourceClaims."""
    return bool((pod.get("spec") or {}).get("resourceClaims"))
