"""ResourceSlices and DeviceClasses as NVIDIA's GPU DRA driver and DRANet publish them.

Pure functions: `node_resource_slices(node_name, gpu_model, layout)` returns the slices the two
drivers of one node would publish (one slice per driver, pool = node name, `nodeName` set), so
the emulator's simulated nodes and a test on a real kube-apiserver (for KWOK nodes) publish
the same devices. `driver_device_classes()` returns the DeviceClasses the drivers install.

What a GPU device carries (driver `gpu.nvidia.com`; names without a domain are in the driver's
domain, as the driver writes them): `type` ("gpu"), `uuid`, `productName`, `brand`,
`architecture`, `index` and `minor` (int), `driverVersion`, `cudaDriverVersion` and
`cudaComputeCapability` (version), `pcieBusID`, `resource.kubernetes.io/pcieRoot`, and, for a
GPU in an NVLink domain, `cliqueId` (`gpu.nvidia.com/cliqueId`: NVIDIA publishes the NVLink
fabric clique of systems with an NVLink fabric this way; here every NVLink domain of the layout
is one clique, `<node uuid>.<domain>`); capacity `memory`.

What a NIC device carries (driver `dra.net`, DRANet): `dra.net/ifName`, `dra.net/rdma` (bool),
`dra.net/pciVendor`, `dra.net/linkSpeedMbps` (int, as ethtool reports it; voltpack's name, DRANet
publishes no link speed), `dra.net/numaNode` (when known) and `resource.kubernetes.io/pcieRoot`.

PCIe roots come from the layout: a NIC and the GPUs behind its PCIe switch share one root; a
GPU behind no NIC, and a NIC with no GPUs, get a root of their own.
"""

from __future__ import annotations

import hashlib
import re

from voltpack.emulator.objects import JsonObj
from voltpack.model.devices import NVIDIA_GPU_DRIVER, PCIE_ROOT_ATTRIBUTE
from voltpack.model.gpu_sku import GpuSku, default_catalog
from voltpack.model.host_layout import HostLayout, HostNic

DRANET_DRIVER = "dra.net"
GPU_DEVICE_CLASS = "gpu.nvidia.com"
NIC_DEVICE_CLASS = "dra.net"
MIG_DEVICE_CLASS = "mig.nvidia.com"
CLIQUE_ATTRIBUTE = "cliqueId"
"""Published without a domain, so it is `gpu.nvidia.com/cliqueId`."""
DRIVER_VERSION = "570.133.20"
CUDA_DRIVER_VERSION = "12.8.0"
NIC_VENDOR = "Mellanox Technologies"
DEFAULT_NIC_GBIT_S = 400.0
API_VERSION = "resource.k8s.io/v1"

_COMPUTE_CAPABILITY = {
    "Kepler": "3.7.0",
    "Pascal": "6.0.0",
    "Volta": "7.0.0",
    "Turing": "7.5.0",
    "Ampere": "8.0.0",
    "Ada": "8.9.0",
    "Hopper": "9.0.0",
    "Blackwell": "10.0.0",
}
_COMPUTE_CAPABILITY_BY_SKU = {"A10": "8.6.0"}


def default_host_layout(gpu_count: int, *, nvlink: bool = True) -> HostLayout:
    """An HGX-like layout: one NVLink domain of all GPUs (when `nvlink`), one PCIe root per
    two GPUs with one 400 Gbit/s InfiniBand NIC (`mlx5_0`, `mlx5_1`, ...), half the roots on
    NUMA node 0 and half on 1. For 8 GPUs: 4 roots, 4 NICs."""
    if gpu_count <= 0:
        return HostLayout(gpu_count=0)
    roots = (gpu_count + 1) // 2
    numa_of_root = [0 if root < (roots + 1) // 2 else 1 for root in range(roots)]
    nics = tuple(
        HostNic(
            name=f"mlx5_{root}",
            nic_class="infiniband",
            line_rate_gbit_s=DEFAULT_NIC_GBIT_S,
            numa_node=numa_of_root[root],
            pcie_gpus=tuple(g for g in (2 * root, 2 * root + 1) if g < gpu_count),
        )
        for root in range(roots)
    )
    return HostLayout(
        gpu_count=gpu_count,
        nvlink_domains=(tuple(range(gpu_count)),) if nvlink else (),
        numa_of_gpu=tuple(numa_of_root[gpu // 2] for gpu in range(gpu_count)),
        nics=nics,
    )


def _sku(gpu_model: str | None) -> GpuSku | None:
    catalog = default_catalog()
    if gpu_model and gpu_model in catalog:
        return catalog.get(gpu_model)
    return None


def layout_for(gpu_count: int, gpu_model: str | None, layout: HostLayout | None) -> HostLayout:
    """The node's layout, or the default one (NVLink when the GPU model has NVLink)."""
    if layout is not None:
        return layout
    sku = _sku(gpu_model)
    link = (sku.intra_node_link or "") if sku is not None else "nvlink"
    return default_host_layout(gpu_count, nvlink=link.startswith("nvlink"))


def product_name(gpu_model: str | None) -> str:
    """The name NVML reports (`nvidia-smi --query-gpu=name`): the catalog alias that starts
    with "NVIDIA " when there is one (H100-SXM: "NVIDIA H100 80GB HBM3"), else "NVIDIA <name>"."""
    sku = _sku(gpu_model)
    if sku is None:
        return f"NVIDIA {gpu_model}" if gpu_model else "NVIDIA GPU"
    reported = [alias for alias in sku.aliases if alias.startswith("NVIDIA ")]
    return reported[0] if reported else f"NVIDIA {sku.name}"


def _uuid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def device_name(text: str) -> str:
    """A NIC's name as a device name (a DNS label): `mlx5_0` -> `mlx5-0`."""
    cleaned = re.sub(r"[^a-z0-9-]", "-", text.lower()).strip("-")[:63]
    return cleaned or "nic"


def pcie_roots(layout: HostLayout) -> tuple[list[int], list[int]]:
    """The PCIe root number of every GPU and of every NIC (in layout order)."""
    gpu_root: list[int | None] = [None] * layout.gpu_count
    nic_root: list[int] = []
    next_root = 0
    for nic in layout.nics:
        shared = [root for g in nic.pcie_gpus if (root := gpu_root[g]) is not None]
        if shared:
            root = shared[0]
        else:
            root = next_root
            next_root += 1
        nic_root.append(root)
        for gpu in nic.pcie_gpus:
            if gpu_root[gpu] is None:
                gpu_root[gpu] = root
    resolved: list[int] = []
    for assigned in gpu_root:
        if assigned is None:
            resolved.append(next_root)
            next_root += 1
        else:
            resolved.append(assigned)
    return resolved, nic_root


def _root_name(root: int) -> str:
    return f"pci{root:04x}:00"


def _string(value: str) -> JsonObj:
    return {"string": value}


def _gpu_devices(
    node_name: str, gpu_model: str | None, layout: HostLayout, shared: bool
) -> list[JsonObj]:
    sku = _sku(gpu_model)
    architecture = (sku.architecture if sku is not None else None) or "Hopper"
    capability = _COMPUTE_CAPABILITY_BY_SKU.get(
        sku.name if sku is not None else "", _COMPUTE_CAPABILITY.get(architecture, "9.0.0")
    )
    memory_mib = int((sku.memory_gib if sku and sku.memory_gib else 80) * 1024)
    gpu_root, _ = pcie_roots(layout)
    domain_of = layout.nvlink_domain_of()
    node_uuid = _uuid(node_name, "node")
    devices = []
    for index in range(layout.gpu_count):
        attributes: JsonObj = {
            "type": _string("gpu"),
            "uuid": _string("GPU-" + _uuid(node_name, "gpu", str(index))),
            "productName": _string(product_name(gpu_model)),
            "brand": _string("Nvidia"),
            "architecture": _string(architecture),
            "index": {"int": index},
            "minor": {"int": index},
            "driverVersion": {"version": DRIVER_VERSION},
            "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
            "cudaComputeCapability": {"version": capability},
            "pcieBusID": _string(f"{gpu_root[index]:04x}:{0x18 + index:02x}:00.0"),
            PCIE_ROOT_ATTRIBUTE: _string(_root_name(gpu_root[index])),
        }
        if domain_of[index] >= 0:
            attributes[CLIQUE_ATTRIBUTE] = _string(f"{node_uuid}.{domain_of[index]}")
        device: JsonObj = {
            "name": f"gpu-{index}",
            "attributes": attributes,
            "capacity": {"memory": {"value": f"{memory_mib}Mi"}},
        }
        if shared:
            device["allowMultipleAllocations"] = True
        devices.append(device)
    return devices


def _nic_devices(layout: HostLayout) -> list[JsonObj]:
    _, nic_root = pcie_roots(layout)
    devices = []
    for nic, root in zip(layout.nics, nic_root, strict=True):
        attributes: JsonObj = {
            "dra.net/ifName": _string(nic.name),
            "dra.net/rdma": {"bool": nic.is_rdma},
            "dra.net/pciVendor": _string(NIC_VENDOR),
            "dra.net/linkSpeedMbps": {"int": int(nic.line_rate_gbit_s * 1000)},
            PCIE_ROOT_ATTRIBUTE: _string(_root_name(root)),
        }
        if nic.numa_node is not None:
            attributes["dra.net/numaNode"] = {"int": nic.numa_node}
        devices.append({"name": device_name(nic.name), "attributes": attributes})
    return devices


def slice_name(node_name: str, driver: str) -> str:
    """`<node>-<driver>`, e.g. `gpu-node-0-gpu.nvidia.com` (a DNS subdomain)."""
    return f"{node_name}-{driver}"


def _slice(node_name: str, driver: str, devices: list[JsonObj]) -> JsonObj:
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(node_name, driver)},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 0, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def node_resource_slices(
    node_name: str,
    gpu_model: str | None,
    layout: HostLayout | None,
    gpu_count: int = 8,
    *,
    shared_gpus: bool = False,
) -> list[JsonObj]:
    """The ResourceSlices of one node: GPUs (`gpu.nvidia.com`) and NICs (`dra.net`).

    `layout` None takes `default_host_layout(gpu_count)` (NVLink when the catalog's GPU model
    has it); a driver with no devices on the node publishes no slice. `shared_gpus`: the GPUs
    may be allocated to several claims at once (`allowMultipleAllocations`, Kubernetes'
    consumable capacity, alpha in 1.34: feature gate `DRAConsumableCapacity`), as GPU shares
    (MPS, time-slicing) need.
    """
    resolved = layout_for(gpu_count, gpu_model, layout)
    slices = []
    gpus = _gpu_devices(node_name, gpu_model, resolved, shared_gpus)
    if gpus:
        slices.append(_slice(node_name, NVIDIA_GPU_DRIVER, gpus))
    nics = _nic_devices(resolved)
    if nics:
        slices.append(_slice(node_name, DRANET_DRIVER, nics))
    return slices


def driver_device_classes() -> list[JsonObj]:
    """The DeviceClasses the two drivers install: `gpu.nvidia.com`, `mig.nvidia.com` (MIG
    devices of GPUs in MIG mode) and `dra.net`."""
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": GPU_DEVICE_CLASS},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f'device.driver == "{NVIDIA_GPU_DRIVER}" && '
                            f'device.attributes["{NVIDIA_GPU_DRIVER}"].type == "gpu"'
                        }
                    }
                ]
            },
        },
        {
            "apiVersion": API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": MIG_DEVICE_CLASS},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f'device.driver == "{NVIDIA_GPU_DRIVER}" && '
                            f'device.attributes["{NVIDIA_GPU_DRIVER}"].type == "mig"'
                        }
                    }
                ]
            },
        },
        {
            "apiVersion": API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": NIC_DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRANET_DRIVER}"'}}]},
        },
    ]
