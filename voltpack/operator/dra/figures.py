"""Dynamic Resource Allocation devices as the metrics count them and the admin API shows them.

- `dra_device_counts`: published devices by driver, kind (`dra_devices.device_kind`) and state
  (allocated to any claim, whoever allocated it, or free); the `voltpack_dra_devices` gauge.
- `pod_devices`: a pod's claims with the devices allocated to each (driver, pool, device, the
  request it serves, its node, a GPU's index, any device's PCIe root); for a pod without
  claims, the GPUs and NICs voltpack recorded on it (`voltpack.io/gpu-indices`,
  `voltpack.io/nics`), marked advisory: the device plugin picks the devices there.

Pure functions of the listed objects: no API calls here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from voltpack.model.admin import ClaimView, DeviceView
from voltpack.model.devices import PCIE_ROOT_ATTRIBUTE, Device, DeviceId
from voltpack.operator.dra.devices import (
    GPU_DRIVERS,
    NIC_DRIVERS,
    DeviceKind,
    device_kind,
    gpu_index,
)
from voltpack.operator.dra.view import (
    allocation_node,
    allocation_results,
    devices_by_node,
    pod_claim_keys,
    uses_claims,
)
from voltpack.operator.kube.translate import gpu_indices, pod_nics

DeviceCountKey = tuple[str, str, str]
"""(driver, kind, state): kind gpu/nic/other, state allocated/free."""


def published_devices(slices: Iterable[Mapping[str, Any]]) -> dict[DeviceId, Device]:
    """Every device of the ResourceSlices (newest pool generations, slices tied to a node)."""
    return {device.id: device for devices in devices_by_node(slices).values() for device in devices}


def allocated_devices(claims: Iterable[Mapping[str, Any]]) -> set[DeviceId]:
    """Devices allocated to any claim, whoever allocated them."""
    return {device for claim in claims for _, device in allocation_results(claim)}


def kind_of(device_id: DeviceId, published: Mapping[DeviceId, Device]) -> DeviceKind:
    """The device's kind from its published attributes, or from its driver when it is not
    published (any more)."""
    device = published.get(device_id)
    if device is not None:
        return device_kind(device)
    if device_id.driver in GPU_DRIVERS:
        return "gpu"
    return "nic" if device_id.driver in NIC_DRIVERS else "other"


def dra_device_counts(
    slices: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]]
) -> dict[DeviceCountKey, int]:
    """Published devices by (driver, kind, state), state `allocated` (in any claim's
    allocation) or `free`. Both states of every (driver, kind) published are present (0 when
    none), so a series never disappears because its count went to zero."""
    published = published_devices(slices)
    in_use = allocated_devices(claims)
    counts: dict[DeviceCountKey, int] = {}
    for device_id, device in published.items():
        kind = device_kind(device)
        state = "allocated" if device_id in in_use else "free"
        counts.setdefault((device_id.driver, kind, "allocated"), 0)
        counts.setdefault((device_id.driver, kind, "free"), 0)
        counts[(device_id.driver, kind, state)] += 1
    return counts


def _allocated_view(
    claim_key: str,
    request: str,
    device_id: DeviceId,
    claim_node: str | None,
    published: Mapping[DeviceId, Device],
) -> DeviceView:
    device = published.get(device_id)
    kind = kind_of(device_id, published)
    index = None
    root = None
    if device is not None:
        if kind == "gpu":
            index = gpu_index(device)
        found_root = device.attribute(PCIE_ROOT_ATTRIBUTE)
        root = str(found_root) if found_root is not None else None
    return DeviceView(
        binding="allocated",
        kind=kind,
        driver=device_id.driver,
        pool=device_id.pool,
        device=device_id.name,
        request=request,
        claim=claim_key,
        node=(device.node if device is not None else None) or claim_node,
        gpu_index=index,
        pcie_root=root,
    )


def _claim_view(
    key: str, claim: Mapping[str, Any] | None, published: Mapping[DeviceId, Device]
) -> ClaimView:
    if claim is None:
        return ClaimView(name=key, allocated=False, problem=f"ResourceClaim {key} does not exist")
    allocation = (claim.get("status") or {}).get("allocation")
    node = allocation_node(claim)
    devices = [
        _allocated_view(key, request, device_id, node, published)
        for request, device_id in allocation_results(claim)
    ]
    return ClaimView(name=key, allocated=allocation is not None, node=node, devices=devices)


def _advisory(pod: Mapping[str, Any], node: str) -> list[DeviceView]:
    meta = {"metadata": pod.get("metadata") or {}}
    views = [
        DeviceView(binding="advisory", kind="gpu", node=node, gpu_index=index)
        for index in gpu_indices(meta) or ()
    ]
    views += [
        DeviceView(binding="advisory", kind="nic", device=name, node=node)
        for name in pod_nics(meta)
    ]
    return views


def pod_devices(
    pod: Mapping[str, Any],
    claims: Mapping[str, Mapping[str, Any]],
    published: Mapping[DeviceId, Device],
) -> tuple[list[ClaimView], list[DeviceView]]:
    """(the pod's claims, every device it holds).

    `claims`: ResourceClaims by `namespace/name`; `published`: `published_devices(slices)`.
    A pod with claims holds their allocated devices (`binding: allocated`); a bound pod
    without claims holds the GPUs and NICs voltpack recorded on it (`binding: advisory`). A
    claim still to be generated from its template is not listed yet.
    """
    if uses_claims(pod):
        keys, _ = pod_claim_keys(pod)
        views = [_claim_view(key, claims.get(key), published) for key in keys]
        devices = [device for view in views for device in view.devices]
        return views, devices
    node = (pod.get("spec") or {}).get("nodeName")
    return [], _advisory(pod, str(node)) if node else []
