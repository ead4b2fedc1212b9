"""The DRA side-by-side benchmark's objects and its correctness check
(benchmarks/dra_bench_objects.py), on the slices voltpack's simulated drivers publish."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

from voltpack.emulator.dra.slices import node_resource_slices

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from dra_bench_objects import (
    PCIE_ROOT,
    check_allocations,
    claiming_pod,
    device_attributes,
    dra_node,
    gpu_claim,
    node_selector_matches,
)

NS = "bench"
SLICES = [s for n in ("n-0", "n-1") for s in node_resource_slices(n, "H100", None, 8)]


def on_node(node: str) -> dict[str, Any]:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeSelectorTerms": [term]}


def bound_pair(
    i: int, node: str, devices: dict[str, tuple[str, str]], variant: str = "gpu"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Pod p-i bound to `node` and its claim c-i allocated `devices` (request: driver, name)."""
    pod = claiming_pod(f"p-{i}", NS, f"c-{i}", "voltpack")
    pod["metadata"]["uid"] = f"uid-{i}"
    pod["spec"]["nodeName"] = node
    claim = gpu_claim(f"c-{i}", NS, variant)
    results = [
        {"request": request, "driver": driver, "pool": node, "device": device}
        for request, (driver, device) in devices.items()
    ]
    claim["status"] = {
        "allocation": {"devices": {"results": results}, "nodeSelector": on_node(node)},
        "reservedFor": [{"resource": "pods", "name": f"p-{i}", "uid": f"uid-{i}"}],
    }
    return pod, claim


def gpu(index: int) -> tuple[str, str]:
    return ("gpu.nvidia.com", f"gpu-{index}")


def nic(index: int) -> tuple[str, str]:
    return ("dra.net", f"mlx5-{index}")


def test_a_correct_run_passes() -> None:
    pairs = [
        bound_pair(0, "n-0", {"gpu": gpu(0)}),
        bound_pair(1, "n-0", {"gpu": gpu(1)}),
        bound_pair(2, "n-1", {"gpu": gpu(0)}),
    ]
    result = check_allocations([p for p, _ in pairs], [c for _, c in pairs], SLICES)
    assert result.ok, result.problems
    assert (result.bound, result.claims_allocated, result.devices_allocated) == (3, 3, 3)


def test_a_gpu_and_nic_on_one_pcie_root_pass_and_on_two_roots_fail() -> None:
    good = bound_pair(0, "n-0", {"gpu": gpu(2), "nic": nic(1)}, "gpu-nic")
    bad = bound_pair(1, "n-1", {"gpu": gpu(0), "nic": nic(3)}, "gpu-nic")
    assert check_allocations([good[0]], [good[1]], SLICES).ok
    result = check_allocations([bad[0]], [bad[1]], SLICES)
    assert not result.ok
    assert PCIE_ROOT in result.problems[0]


def test_a_device_in_two_claims_is_found() -> None:
    pairs = [bound_pair(0, "n-0", {"gpu": gpu(3)}), bound_pair(1, "n-0", {"gpu": gpu(3)})]
    result = check_allocations([p for p, _ in pairs], [c for _, c in pairs], SLICES)
    assert result.problem_count == 1
    assert "gpu.nvidia.com/n-0/gpu-3 in claims c-0 and c-1" in result.problems[0]


def test_a_device_shared_with_the_claim_of_an_unbound_pod_is_found() -> None:
    bound, claim = bound_pair(0, "n-0", {"gpu": gpu(3)})
    waiting, other = bound_pair(1, "n-0", {"gpu": gpu(3)})
    del waiting["spec"]["nodeName"]
    result = check_allocations([bound, waiting], [claim, other], SLICES)
    assert result.problem_count == 2
    assert any("p-1 is not bound" in p for p in result.problems)
    assert any("in claims c-0 and c-1" in p for p in result.problems)


def test_a_node_selector_naming_another_node_is_found() -> None:
    pod, claim = bound_pair(0, "n-0", {"gpu": gpu(0)})
    claim["status"]["allocation"]["nodeSelector"] = on_node("n-1")
    result = check_allocations([pod], [claim], SLICES)
    assert result.problems == ["claim c-0: node selector does not select p-0's n-0"]


def test_a_device_of_another_node_a_missing_allocation_and_reservation_are_found() -> None:
    pod, claim = bound_pair(0, "n-0", {"gpu": gpu(0)})
    moved = copy.deepcopy(claim)
    moved["status"]["allocation"]["devices"]["results"][0]["pool"] = "n-1"
    assert "is on n-1, pod p-0 on n-0" in check_allocations([pod], [moved], SLICES).problems[0]
    unreserved = copy.deepcopy(claim)
    unreserved["status"]["reservedFor"] = []
    problems = check_allocations([pod], [unreserved], SLICES).problems
    assert problems == ["claim c-0 is not reserved for pod p-0"]
    del claim["status"]
    problems = check_allocations([pod], [claim], SLICES).problems
    assert problems == ["claim c-0 of bound pod p-0 has no allocation"]
    assert not check_allocations([pod], [], SLICES).ok


def test_node_selectors_with_label_expressions() -> None:
    labels = {"kubernetes.io/hostname": "n-0", "zone": "a"}
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    assert node_selector_matches({"nodeSelectorTerms": [term]}, "n-0", labels)
    assert not node_selector_matches({"nodeSelectorTerms": [term]}, "n-0", {})
    absent = {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}
    assert node_selector_matches({"nodeSelectorTerms": [{}, absent]}, "n-0", labels)
    assert node_selector_matches(None, "n-0", {})
    assert not node_selector_matches({"nodeSelectorTerms": [{}]}, "n-0", labels)
    odd = {"matchFields": [{"key": "metadata.name", "operator": "Gt", "values": ["1"]}]}
    with pytest.raises(ValueError, match="'Gt' is not checked"):
        node_selector_matches({"nodeSelectorTerms": [odd]}, "n-0", labels)


def test_the_builders() -> None:
    node = dra_node("n-0")
    assert "nvidia.com/gpu" not in node["status"]["capacity"]
    assert node["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    claim = gpu_claim("c", NS, "gpu-nic")["spec"]["devices"]
    assert [r["name"] for r in claim["requests"]] == ["gpu", "nic"]
    assert claim["constraints"] == [{"requests": ["gpu", "nic"], "matchAttribute": PCIE_ROOT}]
    assert "constraints" not in gpu_claim("c", NS)["spec"]["devices"]
    pod = claiming_pod("p", NS, "c", "default-scheduler")
    assert pod["spec"]["resourceClaims"] == [{"name": "devices", "resourceClaimName": "c"}]
    devices = device_attributes(SLICES)
    assert devices[("gpu.nvidia.com", "n-0", "gpu-0")]["node"] == "n-0"
    assert devices[("gpu.nvidia.com", "n-0", "gpu-0")][PCIE_ROOT] == "pci0000:00"


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown claim variant 'tpu'"):
        gpu_claim("c", NS, "tpu")
    with pytest.raises(ValueError, match="needs a name"):
        dra_node("")
