"""One node's devices as the DRA drivers publish them, and those devices in words.

- `device_kind`: a whole GPU, a MIG device, a NIC, or other (by driver and `type`);
- `NodeDevices`: a node's whole GPUs by snapshot slot (index order), NICs by name, and the host
  layout their attributes give (NVLink clique, PCIe root shared by a GPU and a NIC);
- `describe_devices`: e.g. 'GPUs 0-3 (NVLink domain 0) + mlx5-0 on the same PCIe root'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from voltpack.model.devices import (
    PCIE_ROOT_ATTRIBUTE,
    ClaimAllocation,
    Device,
    DeviceId,
)
from voltpack.model.host_layout import HostLayout, HostNic

DeviceKind = Literal["gpu", "mig", "nic", "other"]
GPU_DRIVERS = ("gpu.nvidia.com", "gpu.amd.com")
NIC_DRIVERS = ("dra.net",)
NVLINK_CLIQUE_ATTRIBUTE = "gpu.nvidia.com/cliqueId"
DEFAULT_NIC_RATE_GBIT_S = 400.0


def device_kind(device: Device) -> DeviceKind:
    """A whole GPU (a GPU driver's device of type `gpu`), a MIG device (type `mig`: a
    partition of a GPU, allocated as a device of its own), a NIC (a NIC driver's), or other."""
    driver = device.id.driver
    kind = device.attribute(f"{driver}/type") if driver in GPU_DRIVERS else None
    if driver in GPU_DRIVERS and kind in (None, "gpu"):
        return "gpu"
    if kind == "mig":
        return "mig"
    if driver in NIC_DRIVERS:
        return "nic"
    return "other"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def gpu_index(device: Device) -> int | None:
    """The GPU's index on its node as the driver publishes it (`<driver>/index`)."""
    return _int(device.attribute(f"{device.id.driver}/index"))


@dataclass(frozen=True)
class NodeDevices:
    """One node's published devices: whole GPUs by slot, NICs by device name.

    A GPU's slot is its position among the node's whole GPUs in index order: the snapshot's
    GPU columns. It is its index unless some GPU is not published whole (e.g. partitioned
    into MIG devices, which are allocated as devices of their own)."""

    devices: tuple[Device, ...]
    gpus: Mapping[int, Device]
    nics: Mapping[str, Device]
    slot_of: Mapping[DeviceId, int] = field(default_factory=dict)

    @classmethod
    def of(cls, devices: Sequence[Device]) -> NodeDevices:
        indexed = sorted(
            (index, device)
            for device in devices
            if device_kind(device) == "gpu" and (index := gpu_index(device)) is not None
        )
        gpus = {slot: device for slot, (_, device) in enumerate(indexed)}
        nics = {d.id.name: d for d in devices if device_kind(d) == "nic"}
        return cls(tuple(devices), gpus, nics, {d.id: slot for slot, d in gpus.items()})

    @property
    def gpu_product(self) -> str | None:
        for device in self.gpus.values():
            product = device.attribute(f"{device.id.driver}/productName")
            if isinstance(product, str) and product:
                return product
        return None

    @cached_property
    def layout(self) -> HostLayout:
        """NVLink domains from the GPUs' clique, NICs with the GPUs on their PCIe root."""
        count = len(self.gpus)
        cliques: dict[object, list[int]] = {}
        for index, device in sorted(self.gpus.items()):
            clique = device.attribute(NVLINK_CLIQUE_ATTRIBUTE)
            if clique is not None:
                cliques.setdefault(clique, []).append(index)
        roots = {i: d.attribute(PCIE_ROOT_ATTRIBUTE) for i, d in self.gpus.items()}
        nics = []
        for name, nic in sorted(self.nics.items()):
            root = nic.attribute(PCIE_ROOT_ATTRIBUTE)
            rate = _int(nic.attribute("dra.net/linkSpeedMbps"))
            nics.append(
                HostNic(
                    name=name,
                    nic_class="infiniband" if nic.attribute("dra.net/rdma") is True else "ethernet",
                    line_rate_gbit_s=rate / 1000 if rate else DEFAULT_NIC_RATE_GBIT_S,
                    pcie_gpus=tuple(i for i, r in sorted(roots.items()) if root and r == root),
                )
            )
        return HostLayout(
            gpu_count=count,
            nvlink_domains=tuple(tuple(group) for group in cliques.values()),
            nics=tuple(nics),
        )


def _span(indices: Sequence[int]) -> str:
    """0,1,2,3 -> '0-3'; 0,2 -> '0,2'."""
    ordered = sorted(indices)
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(str(i) for i in ordered)


def describe_devices(
    allocations: Sequence[ClaimAllocation],
    devices: Mapping[str, Device],
    gpu_index: Mapping[str, int],
    nvlink_domain: Mapping[int, int],
) -> str:
    """E.g. 'GPUs 0-3 (NVLink domain 0) + mlx5_0 on the same PCIe root' for one pod.

    `devices`: the node's devices by `str(DeviceId)`; `gpu_index`: GPU device id -> index;
    `nvlink_domain`: GPU index -> its NVLink domain number."""
    gpus, others, roots_gpu, roots_other = [], [], set(), set()
    for allocation in allocations:
        for device_id in allocation.devices():
            key = str(device_id)
            device = devices.get(key)
            root = device.attribute(PCIE_ROOT_ATTRIBUTE) if device is not None else None
            if key in gpu_index:
                gpus.append(gpu_index[key])
                roots_gpu.add(root)
            else:
                others.append(device_id.name)
                roots_other.add(root)
    parts = []
    if gpus:
        word = "GPU" if len(gpus) == 1 else "GPUs"
        domains = {nvlink_domain[g] for g in gpus if g in nvlink_domain}
        where = f" (NVLink domain {domains.pop()})" if len(domains) == 1 else ""
        parts.append(f"{word} {_span(gpus)}{where}")
    if others:
        parts.append(", ".join(sorted(others)))
    text = " + ".join(parts)
    if (
        gpus
        and others
        and len(roots_gpu) == 1
        and None not in roots_gpu
        and roots_gpu == roots_other
    ):
        text += " on the same PCIe root"
    return text
