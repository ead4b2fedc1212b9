"""Devices and device claims as Dynamic Resource Allocation (`resource.k8s.io/v1`) states them.

Pure data, independent of Kubernetes' JSON: the operator parses ResourceSlices, DeviceClasses
and ResourceClaims into these types (`voltpack.operator.dra.view`), the decision core chooses
devices for claims (`voltpack.scheduler.dra_allocation`), and the operator writes the choice
back as each claim's `status.allocation`.

Names follow the API: a device is named by (driver, pool, device); attributes and capacities
are keyed by their fully qualified name (`<domain>/<id>`, e.g. `gpu.nvidia.com/productName`,
`resource.kubernetes.io/pcieRoot`): an attribute a driver publishes without a domain is stored
under the driver's name as domain, as CEL sees it (`device.attributes["gpu.nvidia.com"]`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

AttributeValue = bool | int | str
"""A device attribute: `bool`, `int`, `string` or `version` (semver, kept as its text)."""

PCIE_ROOT_ATTRIBUTE = "resource.kubernetes.io/pcieRoot"
"""The standard attribute naming a device's PCIe root complex (GPU-NIC alignment)."""

NVIDIA_GPU_DRIVER = "gpu.nvidia.com"
"""NVIDIA's GPU DRA driver."""


@dataclass(frozen=True, order=True)
class DeviceId:
    """A device's name in the API: driver, pool and device name."""

    driver: str
    pool: str
    name: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"


@dataclass(frozen=True)
class Device:
    """One device a driver publishes in a ResourceSlice."""

    id: DeviceId
    node: str | None
    """The node the device is attached to (None: a network-attached device; not supported)."""
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    """Fully qualified attribute name -> value."""
    versions: frozenset[str] = frozenset()
    """Qualified names of the attributes whose value is a semantic version."""
    capacity: Mapping[str, str] = field(default_factory=dict)
    """Fully qualified capacity name -> quantity text (e.g. `80Gi`)."""
    allow_multiple_allocations: bool = False
    """The driver lets several claims share the device (consumable capacity)."""

    def attribute(self, qualified_name: str) -> AttributeValue | None:
        """The attribute's value, or None when the device does not have it."""
        return self.attributes.get(qualified_name)


@dataclass(frozen=True)
class OpaqueConfig:
    """Driver-specific configuration passed through to the driver (e.g. NVIDIA's GpuConfig)."""

    driver: str
    parameters: Mapping[str, object]
    requests: tuple[str, ...] = ()
    """The requests it applies to (empty: all of the claim's)."""
    source: Literal["FromClass", "FromClaim"] = "FromClaim"


@dataclass(frozen=True)
class DeviceRequest:
    """One request of a claim: `count` devices of a class that every selector accepts."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    """CEL expressions over `device`: the class's selectors first, then the request's own."""
    count: int = 1
    all_devices: bool = False
    """`allocationMode: All`: every matching device of the node (count is then ignored)."""
    admin_access: bool = False


@dataclass(frozen=True)
class DeviceConstraint:
    """Devices of the named requests (all requests when empty) share an attribute's value."""

    match_attribute: str
    requests: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClaimRequest:
    """A ResourceClaim to allocate (its spec, resolved against its DeviceClasses)."""

    key: str
    """`namespace/name`."""
    uid: str
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()
    """The classes' configuration (FromClass) and the claim's own (FromClaim), in that order."""


@dataclass(frozen=True)
class DeviceResult:
    """One device allocated for one request of a claim."""

    request: str
    device: DeviceId
    share_id: str | None = None
    """Set when the device allows multiple allocations: which share of it this is."""
    consumed_capacity: Mapping[str, str] = field(default_factory=dict)
    """Of a shared device: capacity name -> quantity this share takes."""


@dataclass(frozen=True)
class ClaimAllocation:
    """What a claim gets: devices on one node, and the configuration the driver applies."""

    claim: str
    node: str
    results: tuple[DeviceResult, ...]
    config: tuple[OpaqueConfig, ...] = ()

    def devices(self) -> tuple[DeviceId, ...]:
        """The devices allocated, in request order."""
        return tuple(result.device for result in self.results)
