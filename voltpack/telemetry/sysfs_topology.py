"""PCIe/NUMA placement of GPUs and NICs, read from Linux sysfs.

The root of the file system is a parameter (default "/") so tests, and agents that mount the
host's /sys elsewhere, can point it at another tree. What is read:

- a PCI device's NUMA node from `/sys/bus/pci/devices/<bdf>/numa_node` (-1 means unknown) and
  its PCI path by resolving that symlink into `/sys/devices/pci<domain>:<bus>/<bridge>/.../<bdf>`;
- every RDMA device in `/sys/class/infiniband/<dev>` (its `device` link, and
  `ports/<n>/link_layer`: "InfiniBand" -> class `infiniband`, "Ethernet" -> `roce`; speed from
  `ports/<n>/rate`, e.g. "400 Gb/sec (4X NDR)");
- every physical network interface in `/sys/class/net/<if>` (those without a `device` link or
  under `/sys/devices/virtual` are virtual: lo, bridges, veths, tunnels; skipped), class
  `ethernet`, speed from `speed` in Mb/s. A netdev on the same PCI function as an RDMA device
  (IPoIB `ib0`, the RoCE port's netdev) is that RDMA device, reported once under its RDMA name.

A file that is missing or unreadable makes that one value None; only a root without
`sys/devices` raises, naming the path.

Each GPU is served best by the NICs nearest to it on the PCIe tree: behind the same PCIe
switch (the longer the shared bridge chain the better) > the same host bridge > the same NUMA
node > anywhere else. RDMA NICs (`infiniband`, `roce`) are preferred when the node has any,
since they are what GPUDirect and NCCL use; the ranking decides among them.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from voltpack.model.resources.gpunode import Nic
from voltpack.telemetry.device import GpuInventory, GpuLink, TelemetryError, Topology

_log = logging.getLogger(__name__)

NicClass = Literal["infiniband", "roce", "ethernet"]
RDMA_CLASSES: frozenset[str] = frozenset({"infiniband", "roce"})

_BDF = re.compile(r"^(?P<domain>[0-9a-fA-F]{4,8}):(?P<rest>[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])$")
_ROOT_COMPLEX = re.compile(r"^pci[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}$")
_RATE = re.compile(r"^\s*(?P<value>[0-9]+(?:\.[0-9]+)?)\s*Gb/sec")


class TopologyDiscoveryError(TelemetryError):
    """The sysfs root does not look like a Linux /sys (wrong mount or wrong path)."""


def normalize_pci_address(address: str) -> str:
    """`0000:18:00.0` in lower case, from NVML's `00000000:18:00.0` or any case.

    Raises:
        ValueError: the text is not a PCI address (domain:bus:device.function).
    """
    match = _BDF.match(address.strip())
    if match is None:
        raise ValueError(f"not a PCI address: {address!r} (expected e.g. 0000:18:00.0)")
    return f"{match['domain'][-4:]}:{match['rest']}".lower()


@dataclass(frozen=True)
class PciPlacement:
    """Where a PCI function sits: its NUMA node and its chain of bridges."""

    address: str
    numa_node: int | None = None
    pci_path: tuple[str, ...] = ()
    """Root complex first (`pci0000:15`), then every bridge, then the device itself."""

    @property
    def root_complex(self) -> str | None:
        return self.pci_path[0] if self.pci_path and _ROOT_COMPLEX.match(self.pci_path[0]) else None


@dataclass(frozen=True)
class SysfsNic:
    """One physical NIC and the GPUs it serves best (see `Nic` in the model)."""

    name: str
    nic_class: NicClass
    bandwidth_gbps: float | None = None
    pci_address: str | None = None
    numa_node: int | None = None
    pci_path: tuple[str, ...] = ()
    netdevs: tuple[str, ...] = ()
    """Network interfaces on the same PCI function (`ib0`, `ens1f0np0`); the NIC's own for
    plain Ethernet."""
    gpus: tuple[int, ...] = ()

    @property
    def placement(self) -> PciPlacement:
        return PciPlacement(self.pci_address or self.name, self.numa_node, self.pci_path)

    def to_model(self) -> Nic:
        """The `Nic` of a GPUNode's topology."""
        return Nic(
            name=self.name,
            nic_class=self.nic_class,
            bandwidth_gbps=self.bandwidth_gbps,
            numa_node=self.numa_node,
            gpus=list(self.gpus),
        )


@dataclass(frozen=True)
class SysfsTopology:
    """What sysfs tells about one node's GPUs and NICs."""

    gpus: dict[int, PciPlacement]
    nics: tuple[SysfsNic, ...]
    pcie_links: tuple[GpuLink, ...]

    def nic_models(self) -> list[Nic]:
        return [nic.to_model() for nic in self.nics]


# --- reading sysfs -----------------------------------------------------------------------------


def _sys(root: str | os.PathLike[str]) -> Path:
    sys_dir = Path(root) / "sys"
    if not (sys_dir / "devices").is_dir():
        raise TopologyDiscoveryError(
            f"{sys_dir / 'devices'} is not a directory: is {Path(root)} the root of a Linux "
            "file system with sysfs mounted (pass the host's root, e.g. /host, if the agent "
            "runs in a container)?"
        )
    return sys_dir


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _read_numa(path: Path) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        node = int(text)
    except ValueError:
        return None
    return node if node >= 0 else None


def _pci_path(sys_dir: Path, device: Path) -> tuple[str, ...]:
    """The bridge chain of a device link, from the root complex down to the PCI function."""
    try:
        resolved = device.resolve(strict=True)
        relative = resolved.relative_to((sys_dir / "devices").resolve())
    except (OSError, ValueError, RuntimeError):
        return ()
    parts = relative.parts
    if not parts or not _ROOT_COMPLEX.match(parts[0]):
        return ()
    chain = [parts[0]]
    for part in parts[1:]:
        if not _BDF.match(part):
            break  # below the PCI function: net/<if>, infiniband/<dev>, ...
        chain.append(part.lower())
    return tuple(chain) if len(chain) > 1 else ()


def _placement_of_device_dir(sys_dir: Path, device: Path, address: str) -> PciPlacement:
    path = _pci_path(sys_dir, device)
    return PciPlacement(address=address, numa_node=_read_numa(device / "numa_node"), pci_path=path)


def discover_pci_device(address: str, root: str | os.PathLike[str] = "/") -> PciPlacement | None:
    """NUMA node and PCI path of one PCI function, or None if sysfs does not list it."""
    sys_dir = _sys(root)
    try:
        bdf = normalize_pci_address(address)
    except ValueError:
        _log.warning("sysfs topology: ignoring malformed PCI address %r", address)
        return None
    device = sys_dir / "bus" / "pci" / "devices" / bdf
    if not device.exists():
        return None
    return _placement_of_device_dir(sys_dir, device, bdf)


def discover_gpus(
    gpus: Iterable[GpuInventory], root: str | os.PathLike[str] = "/"
) -> dict[int, PciPlacement]:
    """Placement of each GPU with a PCI address, keyed by GPU index.

    A GPU that sysfs does not list keeps the NUMA node its backend reported and no PCI path.
    """
    sys_dir = _sys(root)
    found: dict[int, PciPlacement] = {}
    for gpu in gpus:
        if gpu.pci_bus_id is None:
            continue
        placement = discover_pci_device(gpu.pci_bus_id, root)
        if placement is None:
            _log.info(
                "sysfs topology: GPU %d (%s) not under %s", gpu.index, gpu.pci_bus_id, sys_dir
            )
            try:
                address = normalize_pci_address(gpu.pci_bus_id)
            except ValueError:
                continue
            placement = PciPlacement(address=address, numa_node=gpu.numa_node)
        elif placement.numa_node is None and gpu.numa_node is not None:
            placement = replace(placement, numa_node=gpu.numa_node)
        found[gpu.index] = placement
    return found


def _pci_address_of(path: tuple[str, ...]) -> str | None:
    return path[-1] if path else None


def _ib_rate_gbps(text: str | None) -> float | None:
    if text is None:
        return None
    match = _RATE.match(text)
    if match is None:
        return None
    value = float(match["value"])
    return value if value > 0 else None


def _net_speed_gbps(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        mbps = int(text)
    except ValueError:
        return None
    return mbps / 1000 if mbps > 0 else None  # -1 (or 0) when the link is down


def _rdma_nics(sys_dir: Path) -> list[SysfsNic]:
    class_dir = sys_dir / "class" / "infiniband"
    if not class_dir.is_dir():
        return []
    nics: list[SysfsNic] = []
    for entry in sorted(class_dir.iterdir()):
        device = entry / "device"
        if not device.exists():
            continue  # soft RDMA (rxe, siw) over another netdev: no PCI function of its own
        ports = sorted(
            (p for p in (entry / "ports").glob("*") if p.name.isdigit()), key=lambda p: int(p.name)
        )
        link_layer = None
        rate = None
        for port in ports:
            link_layer = link_layer or _read(port / "link_layer")
            rate = rate or _ib_rate_gbps(_read(port / "rate"))
        nic_class: NicClass = "roce" if (link_layer or "").lower() == "ethernet" else "infiniband"
        path = _pci_path(sys_dir, device)
        netdevs = tuple(
            sorted(p.name for p in (device / "net").glob("*")) if (device / "net").is_dir() else ()
        )
        nics.append(
            SysfsNic(
                name=entry.name,
                nic_class=nic_class,
                bandwidth_gbps=rate,
                pci_address=_pci_address_of(path),
                numa_node=_read_numa(device / "numa_node"),
                pci_path=path,
                netdevs=netdevs,
            )
        )
    return nics


def _is_virtual_netdev(sys_dir: Path, entry: Path) -> bool:
    if not (entry / "device").exists():
        return True
    try:
        resolved = entry.resolve(strict=True)
    except (OSError, RuntimeError):
        return True
    return (sys_dir / "devices" / "virtual").resolve() in resolved.parents


def _ethernet_nics(sys_dir: Path, rdma: Sequence[SysfsNic]) -> list[SysfsNic]:
    class_dir = sys_dir / "class" / "net"
    if not class_dir.is_dir():
        return []
    taken = {nic.pci_address for nic in rdma if nic.pci_address} | {
        name for nic in rdma for name in nic.netdevs
    }
    nics: list[SysfsNic] = []
    for entry in sorted(class_dir.iterdir()):
        if entry.name in taken or _is_virtual_netdev(sys_dir, entry):
            continue
        device = entry / "device"
        if (device / "physfn").exists():
            continue  # an SR-IOV virtual function: a slice of a NIC listed on its own
        path = _pci_path(sys_dir, device)
        address = _pci_address_of(path)
        if address is not None and address in taken:
            continue
        nics.append(
            SysfsNic(
                name=entry.name,
                nic_class="ethernet",
                bandwidth_gbps=_net_speed_gbps(_read(entry / "speed")),
                pci_address=address,
                numa_node=_read_numa(device / "numa_node"),
                pci_path=path,
                netdevs=(entry.name,),
            )
        )
    return nics


def discover_nics(root: str | os.PathLike[str] = "/") -> list[SysfsNic]:
    """Every physical NIC, RDMA devices first, each once; `gpus` is left empty."""
    sys_dir = _sys(root)
    rdma = _rdma_nics(sys_dir)
    return rdma + _ethernet_nics(sys_dir, rdma)


# --- ranking -------------------------------------------------------------------------------------

_SWITCH, _HOST_BRIDGE, _SAME_NUMA, _FAR = 0, 1, 2, 3


def _shared_bridges(a: PciPlacement, b: PciPlacement) -> int:
    """How many bridges below the root complex two devices share (0: none, or unknown)."""
    if a.root_complex is None or a.root_complex != b.root_complex:
        return 0
    shared = 0
    for left, right in zip(a.pci_path[1:-1], b.pci_path[1:-1], strict=False):
        if left != right:
            break
        shared += 1
    return shared


def pci_distance(a: PciPlacement, b: PciPlacement) -> tuple[int, int]:
    """A sort key, smaller is nearer: (tier, -shared bridges).

    Tiers: 0 behind a common PCIe bridge/switch, 1 the same host bridge (root complex),
    2 the same NUMA node, 3 another socket or unknown.
    """
    shared = _shared_bridges(a, b)
    if shared > 0:
        return (_SWITCH, -shared)
    if a.root_complex is not None and a.root_complex == b.root_complex:
        return (_HOST_BRIDGE, 0)
    if a.numa_node is not None and a.numa_node == b.numa_node:
        return (_SAME_NUMA, 0)
    return (_FAR, 0)


def rank_nics(gpu: PciPlacement, nics: Sequence[SysfsNic]) -> list[SysfsNic]:
    """All NICs, nearest to the GPU first (RDMA before Ethernet at equal distance, then name)."""
    return sorted(
        nics,
        key=lambda nic: (
            pci_distance(gpu, nic.placement),
            nic.nic_class not in RDMA_CLASSES,
            nic.name,
        ),
    )


def best_nics(gpu: PciPlacement, nics: Sequence[SysfsNic]) -> list[SysfsNic]:
    """The NICs that serve a GPU best: the nearest ones, among the RDMA NICs if any exist.

    A GPU whose place is unknown (no PCI path, no NUMA node) is served by none: no NIC is
    nearer than another, and claiming all of them would mislead the scheduler.
    """
    if not gpu.pci_path and gpu.numa_node is None:
        return []
    candidates = [nic for nic in nics if nic.nic_class in RDMA_CLASSES] or list(nics)
    if not candidates:
        return []
    nearest = min(pci_distance(gpu, nic.placement) for nic in candidates)
    return sorted(
        (nic for nic in candidates if pci_distance(gpu, nic.placement) == nearest),
        key=lambda nic: nic.name,
    )


def assign_gpus_to_nics(
    gpus: Mapping[int, PciPlacement], nics: Sequence[SysfsNic]
) -> tuple[SysfsNic, ...]:
    """The NICs with `gpus` filled in: each GPU goes to every NIC that serves it best."""
    served: dict[str, list[int]] = {nic.name: [] for nic in nics}
    for index in sorted(gpus):
        for nic in best_nics(gpus[index], nics):
            served[nic.name].append(index)
    return tuple(replace(nic, gpus=tuple(served[nic.name])) for nic in nics)


def pcie_links(gpus: Mapping[int, PciPlacement]) -> tuple[GpuLink, ...]:
    """The PCIe part of GPU-to-GPU links, one per pair (a < b), for backends that cannot tell.

    `pcie-switch` when the two GPUs share a bridge below the root complex,
    `pcie-host-bridge` when they share the root complex or NUMA node, `cross-socket` when
    they are on different NUMA nodes, `unknown` when sysfs told nothing about either.
    """
    links: list[GpuLink] = []
    indices = sorted(gpus)
    for i, a in enumerate(indices):
        for b in indices[i + 1 :]:
            left, right = gpus[a], gpus[b]
            tier, _ = pci_distance(left, right)
            kind: Literal["pcie-switch", "pcie-host-bridge", "cross-socket", "unknown"]
            if tier == _SWITCH:
                kind = "pcie-switch"
            elif tier in (_HOST_BRIDGE, _SAME_NUMA):
                kind = "pcie-host-bridge"
            elif left.numa_node is not None and right.numa_node is not None:
                kind = "cross-socket"
            elif left.root_complex is not None and right.root_complex is not None:
                kind = "cross-socket"  # different host bridges, NUMA unknown: assume the worst
            else:
                kind = "unknown"
            links.append(GpuLink(gpu_a=a, gpu_b=b, kind=kind))
    return tuple(links)


def with_pcie_links(topology: Topology, gpus: Mapping[int, PciPlacement]) -> Topology:
    """A backend's topology with every pair it left out, or called `unknown`, filled from sysfs.

    Links the backend knows (NVLink, xGMI, its own PCIe view) are kept as they are; NUMA nodes
    it did not report are taken from sysfs.
    """
    known = {
        (min(link.gpu_a, link.gpu_b), max(link.gpu_a, link.gpu_b))
        for link in topology.links
        if link.kind != "unknown"
    }
    kept = [link for link in topology.links if link.kind != "unknown"]
    added = [link for link in pcie_links(gpus) if (link.gpu_a, link.gpu_b) not in known]
    numa = {
        index: placement.numa_node
        for index, placement in gpus.items()
        if placement.numa_node is not None
    }
    numa.update(topology.numa_node_of_gpu)
    links = sorted(kept + added, key=lambda link: (link.gpu_a, link.gpu_b, link.kind))
    return Topology(links=tuple(links), numa_node_of_gpu=numa)


def discover_topology(
    gpus: Iterable[GpuInventory], root: str | os.PathLike[str] = "/"
) -> SysfsTopology:
    """GPU placements, NICs with the GPUs they serve, and PCIe GPU-to-GPU links, from sysfs."""
    placements = discover_gpus(gpus, root)
    nics = assign_gpus_to_nics(placements, discover_nics(root))
    return SysfsTopology(gpus=placements, nics=nics, pcie_links=pcie_links(placements))
