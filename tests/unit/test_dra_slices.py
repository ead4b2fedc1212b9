"""The ResourceSlices the emulator's simulated DRA drivers publish, from a node's HostLayout."""

from __future__ import annotations

from voltpack.emulator.dra.slices import (
    default_host_layout,
    driver_device_classes,
    node_resource_slices,
    pcie_roots,
)
from voltpack.emulator.dra.validation import validate_device_class, validate_resource_slice
from voltpack.model.host_layout import HostLayout, HostNic


def test_default_layout_is_hgx_like() -> None:
    layout = default_host_layout(8)
    assert layout.nvlink_domains == (tuple(range(8)),)
    assert [nic.name for nic in layout.nics] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert [nic.pcie_gpus for nic in layout.nics] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert all(nic.is_rdma and nic.line_rate_gbit_s == 400 for nic in layout.nics)


def test_gpus_behind_no_nic_get_their_own_root() -> None:
    layout = HostLayout(
        gpu_count=4,
        nvlink_domains=((0, 1), (2, 3)),
        nics=(HostNic(name="eth0", nic_class="ethernet", line_rate_gbit_s=100, pcie_gpus=(0,)),),
    )
    gpu_root, nic_root = pcie_roots(layout)
    assert nic_root == [0] and gpu_root == [0, 1, 2, 3]
    gpus, nics = node_resource_slices("n1", "A100-80GB", layout)
    devices = {d["name"]: d["attributes"] for d in gpus["spec"]["devices"]}
    assert devices["gpu-0"]["cliqueId"] == devices["gpu-1"]["cliqueId"]
    assert devices["gpu-0"]["cliqueId"] != devices["gpu-2"]["cliqueId"]
    assert devices["gpu-0"]["productName"] == {"string": "NVIDIA A100-SXM4-80GB"}
    (nic,) = nics["spec"]["devices"]
    assert nic["name"] == "eth0"
    assert nic["attributes"]["dra.net/rdma"] == {"bool": False}
    assert (
        nic["attributes"]["resource.kubernetes.io/pcieRoot"]
        == (devices["gpu-0"]["resource.kubernetes.io/pcieRoot"])
    )


def test_published_objects_pass_the_apiservers_validation() -> None:
    for resource_slice in node_resource_slices("node-a", "H100", None):
        assert validate_resource_slice(resource_slice) == []
        assert resource_slice["spec"]["pool"] == {
            "name": "node-a",
            "generation": 0,
            "resourceSliceCount": 1,
        }
    for device_class in driver_device_classes():
        assert validate_device_class(device_class) == []


def test_a_pcie_only_gpu_has_no_clique_and_no_gpus_no_slices() -> None:
    (gpus, _) = node_resource_slices("t4-node", "T4", None, gpu_count=2)
    assert all("cliqueId" not in d["attributes"] for d in gpus["spec"]["devices"])
    assert node_resource_slices("cpu", None, HostLayout(gpu_count=0)) == []
