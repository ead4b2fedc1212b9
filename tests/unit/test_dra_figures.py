"""DRA devices counted for the metrics and shown per pod for the admin API, from slices as the
drivers publish them (the emulator's slice builder) and claims as the API server stores them."""

from __future__ import annotations

from typing import Any

from voltpack.emulator.dra.slices import node_resource_slices
from voltpack.model.devices import DeviceId
from voltpack.operator.dra.figures import (
    dra_device_counts,
    kind_of,
    pod_devices,
    published_devices,
)
from voltpack.operator.dra.view import allocation_results

SLICES = node_resource_slices("node-a", "H100", None) + node_resource_slices("node-b", "H100", None)
"""Two nodes of 8 GPUs and 4 RDMA NICs (one per PCIe root of two GPUs)."""


def claim(name: str, results: list[tuple[str, str, str, str]], node: str | None) -> dict[str, Any]:
    """A ResourceClaim in namespace ml; `results`: (request, driver, pool, device)."""
    status: dict[str, Any] = {}
    if node is not None:
        on_node = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        status["allocation"] = {
            "devices": {
                "results": [
                    {"request": r, "driver": d, "pool": p, "device": n} for r, d, p, n in results
                ]
            },
            "nodeSelector": {"nodeSelectorTerms": [on_node]},
        }
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": {}, "status": status}


def pod(
    name: str, claims: list[str] | None = None, node: str | None = None, **annotations: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main"}]}
    if claims is not None:
        spec["resourceClaims"] = [
            {"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)
        ]
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {"name": name, "namespace": "ml", "annotations": annotations},
        "spec": spec,
    }


def test_every_published_device_is_counted_once_as_allocated_or_free() -> None:
    mine = claim(
        "train-0",
        [("gpu", "gpu.nvidia.com", "node-a", "gpu-0"), ("nic", "dra.net", "node-a", "mlx5-0")],
        "node-a",
    )
    # another scheduler's claim: its devices count as allocated all the same
    other = claim(
        "other", [(f"g{i}", "gpu.nvidia.com", "node-b", f"gpu-{i}") for i in range(3)], "node-b"
    )
    pending = claim("waiting", [], None)
    counts = dra_device_counts(SLICES, [mine, other, pending])
    assert counts == {
        ("gpu.nvidia.com", "gpu", "allocated"): 4,
        ("gpu.nvidia.com", "gpu", "free"): 12,
        ("dra.net", "nic", "allocated"): 1,
        ("dra.net", "nic", "free"): 7,
    }


def test_counts_without_claims_show_zero_allocated_and_nothing_without_slices() -> None:
    counts = dra_device_counts(SLICES, [])
    assert counts[("gpu.nvidia.com", "gpu", "allocated")] == 0
    assert counts[("gpu.nvidia.com", "gpu", "free")] == 16
    assert dra_device_counts([], [claim("x", [("g", "gpu.nvidia.com", "n", "gpu-0")], "n")]) == {}


def test_an_older_pool_generation_and_a_device_allocated_twice_are_not_double_counted() -> None:
    old = node_resource_slices("node-a", "H100", None)[0]
    old["spec"]["pool"]["generation"] = 0
    new = node_resource_slices("node-a", "H100", None)[0]
    new["spec"]["pool"]["generation"] = 1
    shared = [("gpu", "gpu.nvidia.com", "node-a", "gpu-0")]
    counts = dra_device_counts(
        [old, new], [claim("a", shared, "node-a"), claim("b", shared, "node-a")]
    )
    assert counts == {
        ("gpu.nvidia.com", "gpu", "allocated"): 1,
        ("gpu.nvidia.com", "gpu", "free"): 7,
    }


def test_a_device_of_an_unknown_driver_is_other_and_an_unpublished_one_is_known_by_driver() -> None:
    fpga = node_resource_slices("node-a", "H100", None)[0]
    fpga["spec"]["driver"] = "fpga.example.com"
    counts = dra_device_counts([fpga], [])
    assert counts == {
        ("fpga.example.com", "other", "allocated"): 0,
        ("fpga.example.com", "other", "free"): 8,
    }
    assert kind_of(DeviceId("gpu.nvidia.com", "gone", "gpu-9"), {}) == "gpu"
    assert kind_of(DeviceId("dra.net", "gone", "eth9"), {}) == "nic"
    assert kind_of(DeviceId("x.example.com", "gone", "d"), {}) == "other"


def test_a_claimed_pods_devices_name_driver_pool_request_node_index_and_pcie_root() -> None:
    published = published_devices(SLICES)
    results = [("gpu", "gpu.nvidia.com", "node-a", "gpu-3"), ("nic", "dra.net", "node-a", "mlx5-1")]
    claims = {"ml/train-0": claim("train-0", results, "node-a")}
    claim_views, devices = pod_devices(pod("train-0", ["train-0"], "node-a"), claims, published)
    assert [(c.name, c.allocated, c.node, c.problem) for c in claim_views] == [
        ("ml/train-0", True, "node-a", None)
    ]
    assert claim_views[0].devices == devices
    gpu, nic = devices
    assert (gpu.binding, gpu.kind, gpu.driver, gpu.pool, gpu.device) == (
        "allocated",
        "gpu",
        "gpu.nvidia.com",
        "node-a",
        "gpu-3",
    )
    assert (gpu.request, gpu.claim, gpu.node, gpu.gpu_index) == ("gpu", "ml/train-0", "node-a", 3)
    assert (nic.kind, nic.device, nic.request, nic.gpu_index) == ("nic", "mlx5-1", "nic", None)
    assert gpu.pcie_root is not None and gpu.pcie_root == nic.pcie_root  # GPU 3 sits by NIC 1


def test_a_pending_claimed_pod_shows_its_unallocated_and_missing_claims() -> None:
    claims = {"ml/later": claim("later", [], None)}
    views, devices = pod_devices(pod("p", ["later", "gone"]), claims, published_devices(SLICES))
    assert devices == []
    assert [(v.name, v.allocated, v.devices) for v in views] == [
        ("ml/later", False, []),
        ("ml/gone", False, []),
    ]
    assert views[1].problem == "ResourceClaim ml/gone does not exist"


def test_a_claim_generated_from_a_template_is_found_through_the_pod_status() -> None:
    templated = pod("t", node="node-a")
    templated["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "tpl"}]
    views, devices = pod_devices(templated, {}, {})
    assert (views, devices) == ([], [])  # not generated yet: nothing to show
    templated["status"] = {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "t-x"}]}
    claims = {"ml/t-x": claim("t-x", [("gpus", "gpu.nvidia.com", "node-a", "gpu-7")], "node-a")}
    views, devices = pod_devices(templated, claims, published_devices(SLICES))
    assert [v.name for v in views] == ["ml/t-x"]
    assert [(d.device, d.gpu_index) for d in devices] == [("gpu-7", 7)]


def test_a_device_plugin_pod_shows_voltpacks_annotations_as_advisory_devices() -> None:
    annotations = {"voltpack.io/gpu-indices": "2,3", "voltpack.io/nics": "mlx5_1"}
    bound = pod("dp", node="node-c", **annotations)
    claim_views, devices = pod_devices(bound, {}, {})
    assert claim_views == []
    assert [(d.binding, d.kind, d.gpu_index, d.device, d.node) for d in devices] == [
        ("advisory", "gpu", 2, None, "node-c"),
        ("advisory", "gpu", 3, None, "node-c"),
        ("advisory", "nic", None, "mlx5_1", "node-c"),
    ]
    assert all(d.driver is None and d.claim is None for d in devices)
    # not bound yet: voltpack has chosen nothing that holds
    assert pod_devices(pod("dp", **annotations), {}, {}) == ([], [])


def test_malformed_allocation_results_are_read_without_failing() -> None:
    broken = {"metadata": {"name": "b", "namespace": "ml"}, "status": {"allocation": {}}}
    assert allocation_results(broken) == []
    assert allocation_results({"status": None}) == []
    half = {"status": {"allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com"}]}}}}
    assert allocation_results(half) == [("", DeviceId("gpu.nvidia.com", "", ""))]
    bad_indices = pod("x", node="n", **{"voltpack.io/gpu-indices": "two"})
    assert pod_devices(bad_indices, {}, {}) == ([], [])
