"""Topology discovery from a fake sysfs laid out as the kernel lays it out.

The node: 2 sockets, 4 PCIe switches (two per socket), each switch with 2 GPUs and one
InfiniBand NDR HCA below it; a 25 GbE NIC on a root port of socket 0; IPoIB netdevs on the
HCAs; and virtual interfaces (lo, docker0, a veth) that must be skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from voltpack.model.resources.gpunode import Nic
from voltpack.telemetry.device import GpuInventory, GpuLink, Topology
from voltpack.telemetry.sysfs_topology import (
    PciPlacement,
    SysfsNic,
    TopologyDiscoveryError,
    best_nics,
    discover_gpus,
    discover_nics,
    discover_pci_device,
    discover_topology,
    normalize_pci_address,
    pcie_links,
    rank_nics,
    with_pcie_links,
)


@dataclass
class FakeSysfs:
    """Writes devices, links and attribute files under `root/sys` like the kernel does."""

    root: Path
    made: list[str] = field(default_factory=list)

    @property
    def sys(self) -> Path:
        return self.root / "sys"

    def _link(self, link: Path, target: Path) -> None:
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(target, link.parent))

    def pci_device(self, chain: list[str], numa_node: int | None) -> Path:
        """`chain`: root complex, bridges, device. Bridges get their own bus entries too."""
        path = self.sys / "devices"
        for i, part in enumerate(chain):
            path = path / part
            path.mkdir(parents=True, exist_ok=True)
            if i == 0:
                continue
            bus_link = self.sys / "bus" / "pci" / "devices" / part
            if not bus_link.is_symlink():
                self._link(bus_link, path)
            if numa_node is not None and not (path / "numa_node").exists():
                (path / "numa_node").write_text(f"{numa_node}\n")
        return path

    def ib_device(
        self, pci: Path, name: str, netdev: str, rate: str, link_layer: str = "InfiniBand"
    ) -> None:
        dev = pci / "infiniband" / name
        port = dev / "ports" / "1"
        port.mkdir(parents=True)
        (port / "rate").write_text(f"{rate}\n")
        (port / "link_layer").write_text(f"{link_layer}\n")
        self._link(dev / "device", pci)
        self._link(self.sys / "class" / "infiniband" / name, dev)
        self.netdev(pci, netdev, speed=None)

    def netdev(self, pci: Path, name: str, speed: int | None) -> None:
        dev = pci / "net" / name
        dev.mkdir(parents=True)
        if speed is not None:
            (dev / "speed").write_text(f"{speed}\n")
        self._link(dev / "device", pci)
        self._link(self.sys / "class" / "net" / name, dev)

    def virtual_netdev(self, name: str) -> None:
        dev = self.sys / "devices" / "virtual" / "net" / name
        dev.mkdir(parents=True)
        (dev / "speed").write_text("10000\n")
        self._link(self.sys / "class" / "net" / name, dev)


# socket -> (root complex bus, first GPU index) for the four switches
SWITCHES = [("15", 0, 0), ("37", 2, 0), ("97", 4, 1), ("b7", 6, 1)]


def gpu_address(index: int) -> str:
    bus, first, _ = SWITCHES[index // 2]
    return f"0000:{int(bus, 16) + 3 + (index - first):02x}:00.0"


def build_node(root: Path, *, link_layers: tuple[str, ...] = ("InfiniBand",) * 4) -> FakeSysfs:
    fs = FakeSysfs(root)
    for k, (bus, first, numa) in enumerate(SWITCHES):
        b = int(bus, 16)
        rc, rp = f"pci0000:{bus}", f"0000:{bus}:01.0"
        up, down = f"0000:{b + 1:02x}:00.0", f"0000:{b + 2:02x}"
        for j in range(2):
            fs.pci_device([rc, rp, up, f"{down}:{j:02x}.0", gpu_address(first + j)], numa)
        hca = fs.pci_device([rc, rp, up, f"{down}:02.0", f"0000:{b + 5:02x}:00.0"], numa)
        fs.ib_device(hca, f"mlx5_{k}", f"ib{k}", "400 Gb/sec (4X NDR)", link_layers[k])
    eth = fs.pci_device(["pci0000:00", "0000:00:1c.0", "0000:01:00.0"], 0)
    fs.netdev(eth, "eno1", speed=25000)
    for name in ("lo", "docker0", "veth1a2b3c"):
        fs.virtual_netdev(name)
    return fs


def inventory() -> list[GpuInventory]:
    return [
        GpuInventory(index=i, uuid=f"GPU-{i}", name="H100", vendor="nvidia", pci_bus_id=a)
        for i, a in enumerate(
            # NVML spells the domain with 8 digits and hex in upper case
            f"0000{gpu_address(i).upper()}"
            for i in range(8)
        )
    ]


@pytest.fixture
def node(tmp_path: Path) -> FakeSysfs:
    return build_node(tmp_path)


def test_gpu_numa_node_and_pci_path(node: FakeSysfs) -> None:
    placement = discover_pci_device("0000:18:00.0", node.root)
    assert placement == PciPlacement(
        address="0000:18:00.0",
        numa_node=0,
        pci_path=("pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"),
    )
    gpus = discover_gpus(inventory(), node.root)
    assert sorted(gpus) == list(range(8))
    assert [gpus[i].numa_node for i in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpus[5].address == gpu_address(5)
    assert gpus[5].root_complex == "pci0000:97"


def test_nics_classes_speeds_numa_and_virtual_ones_skipped(node: FakeSysfs) -> None:
    nics = {nic.name: nic for nic in discover_nics(node.root)}
    assert sorted(nics) == ["eno1", "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]  # no ib*, lo, veth
    assert nics["mlx5_2"].nic_class == "infiniband"
    assert nics["mlx5_2"].bandwidth_gbps == 400.0
    assert nics["mlx5_2"].numa_node == 1
    assert nics["mlx5_2"].pci_address == "0000:9c:00.0"
    assert nics["mlx5_2"].netdevs == ("ib2",)
    assert nics["eno1"] == SysfsNic(
        name="eno1",
        nic_class="ethernet",
        bandwidth_gbps=25.0,
        pci_address="0000:01:00.0",
        numa_node=0,
        pci_path=("pci0000:00", "0000:00:1c.0", "0000:01:00.0"),
        netdevs=("eno1",),
    )


def test_each_gpu_is_served_by_the_hca_behind_its_switch(node: FakeSysfs) -> None:
    topo = discover_topology(inventory(), node.root)
    served = {nic.name: nic.gpus for nic in topo.nics}
    assert served == {
        "mlx5_0": (0, 1),
        "mlx5_1": (2, 3),
        "mlx5_2": (4, 5),
        "mlx5_3": (6, 7),
        "eno1": (),
    }
    assert topo.nic_models()[0] == Nic(
        name="mlx5_0", nic_class="infiniband", bandwidth_gbps=400.0, numa_node=0, gpus=[0, 1]
    )


def test_ranking_prefers_switch_then_numa_then_other_socket(node: FakeSysfs) -> None:
    topo = discover_topology(inventory(), node.root)
    ranked = [nic.name for nic in rank_nics(topo.gpus[0], topo.nics)]
    # same switch; same socket (RDMA before Ethernet); the other socket
    assert ranked == ["mlx5_0", "mlx5_1", "eno1", "mlx5_2", "mlx5_3"]


def test_without_a_local_hca_a_gpu_falls_back_to_its_socket(tmp_path: Path) -> None:
    fs = build_node(tmp_path)
    (fs.sys / "class" / "infiniband" / "mlx5_3").unlink()  # HCA of GPUs 6, 7 is gone
    topo = discover_topology(inventory(), fs.root)
    served = {nic.name: nic.gpus for nic in topo.nics}
    assert served["mlx5_2"] == (4, 5, 6, 7)
    # its IPoIB netdev now stands alone as an Ethernet-class NIC without a speed
    assert served["ib3"] == ()


def test_roce_link_layer_and_ethernet_only_nodes(tmp_path: Path) -> None:
    fs = build_node(tmp_path, link_layers=("Ethernet", "InfiniBand", "InfiniBand", "Ethernet"))
    classes = {nic.name: nic.nic_class for nic in discover_nics(fs.root)}
    assert classes["mlx5_0"] == "roce"
    assert classes["mlx5_1"] == "infiniband"
    assert classes["mlx5_3"] == "roce"

    only_eth = build_node(tmp_path / "eth")
    for k in range(4):
        (only_eth.sys / "class" / "infiniband" / f"mlx5_{k}").unlink()
        (only_eth.sys / "class" / "net" / f"ib{k}").unlink()
    topo = discover_topology(inventory(), only_eth.root)
    assert {nic.name: nic.gpus for nic in topo.nics} == {"eno1": tuple(range(8))}  # far, but all


def test_pcie_links_from_paths(node: FakeSysfs) -> None:
    gpus = discover_gpus(inventory(), node.root)
    kinds = {(link.gpu_a, link.gpu_b): link.kind for link in pcie_links(gpus)}
    assert len(kinds) == 28
    assert kinds[(0, 1)] == "pcie-switch"
    assert kinds[(6, 7)] == "pcie-switch"
    assert kinds[(0, 2)] == "pcie-host-bridge"  # same socket, other switch and root complex
    assert kinds[(0, 4)] == "cross-socket"
    assert kinds[(3, 7)] == "cross-socket"


def test_backend_links_are_kept_and_gaps_filled(node: FakeSysfs) -> None:
    gpus = discover_gpus(inventory(), node.root)
    nvlink = tuple(GpuLink(a, b, "nvlink", links=18) for a in range(4) for b in range(a + 1, 4))
    backend = Topology(links=(*nvlink, GpuLink(4, 5, "unknown")), numa_node_of_gpu={0: 0})
    merged = with_pcie_links(backend, gpus)
    kinds = {(link.gpu_a, link.gpu_b): link.kind for link in merged.links}
    assert len(kinds) == 28
    assert kinds[(0, 1)] == "nvlink"
    assert kinds[(4, 5)] == "pcie-switch"
    assert kinds[(1, 6)] == "cross-socket"
    assert merged.numa_node_of_gpu[7] == 1


def test_missing_files_are_tolerated(node: FakeSysfs) -> None:
    (node.sys / "devices" / "pci0000:97" / "0000:97:01.0" / "0000:98:00.0" / "0000:99:02.0"
     / "0000:9c:00.0" / "numa_node").unlink()  # fmt: skip
    (node.sys / "class" / "infiniband" / "mlx5_1" / "ports" / "1" / "rate").unlink()
    (node.sys / "class" / "net" / "eno1" / "speed").write_text("-1\n")  # link down
    gpu_numa = node.sys / "bus" / "pci" / "devices" / gpu_address(6) / "numa_node"
    gpu_numa.write_text("-1\n")
    nics = {nic.name: nic for nic in discover_nics(node.root)}
    assert nics["mlx5_2"].numa_node is None
    assert nics["mlx5_1"].bandwidth_gbps is None
    assert nics["eno1"].bandwidth_gbps is None
    assert nics["mlx5_1"].to_model().bandwidth_gbps is None

    gpus = [*inventory(), GpuInventory(8, "GPU-8", "H100", "nvidia", pci_bus_id="0000:ee:00.0")]
    gpus.append(GpuInventory(9, "GPU-9", "H100", "nvidia", pci_bus_id=None))
    topo = discover_topology(gpus, node.root)
    assert topo.gpus[6].numa_node is None
    assert topo.gpus[8] == PciPlacement(address="0000:ee:00.0")  # not in sysfs: no path
    assert 9 not in topo.gpus
    served = {nic.name: nic.gpus for nic in topo.nics}
    assert served["mlx5_0"] == (0, 1)  # GPU 8, place unknown, is served by none
    assert served["mlx5_2"] == (4, 5)  # the switch still decides
    assert served["mlx5_3"] == (6, 7)


def test_empty_sysfs_gives_empty_results(tmp_path: Path) -> None:
    (tmp_path / "sys" / "devices").mkdir(parents=True)
    topo = discover_topology(inventory(), tmp_path)
    assert topo.nics == ()
    assert all(p.pci_path == () for p in topo.gpus.values())
    assert {link.kind for link in topo.pcie_links} == {"unknown"}


def test_wrong_root_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TopologyDiscoveryError, match=str(tmp_path / "nowhere" / "sys" / "devices")):
        discover_nics(tmp_path / "nowhere")


def test_pci_address_normalisation() -> None:
    assert normalize_pci_address("00000000:1A:00.0") == "0000:1a:00.0"
    assert normalize_pci_address(" 0000:1a:00.0\n") == "0000:1a:00.0"
    with pytest.raises(ValueError, match="not a PCI address"):
        normalize_pci_address("GPU-1234")


def test_best_nics_ties_and_no_nics() -> None:
    gpu = PciPlacement("0000:18:00.0", numa_node=0, pci_path=("pci0000:15", "0000:18:00.0"))
    a = SysfsNic("a", "infiniband", numa_node=0, pci_path=("pci0000:00", "0000:01:00.0"))
    b = SysfsNic("b", "infiniband", numa_node=0, pci_path=("pci0000:01", "0000:02:00.0"))
    c = SysfsNic("c", "infiniband", numa_node=1, pci_path=("pci0000:80", "0000:81:00.0"))
    assert [nic.name for nic in best_nics(gpu, [c, b, a])] == ["a", "b"]
    assert best_nics(gpu, []) == []
