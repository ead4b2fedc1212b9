"""DRA objects as the operator lists them, read into the decision core's types."""

from __future__ import annotations

from typing import Any

from voltpack.model.devices import DeviceConstraint, DeviceId, OpaqueConfig
from voltpack.operator.dra.view import (
    claim_state,
    device_classes,
    devices_by_node,
    devices_in_use,
    pod_claim_keys,
)

GPU_CLASS_SELECTOR = 'device.driver == "gpu.nvidia.com"'


def gpu_slice(node: str, generation: int = 1, count: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-gpu.nvidia.com-{generation}"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "index": {"int": i},
                        "driverVersion": {"version": "550.54.15"},
                        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i // 2}"},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(count)
            ],
        },
    }


def test_devices_come_from_the_newest_generation_of_each_pool_with_qualified_names() -> None:
    found = devices_by_node(
        [gpu_slice("a", 1, 4), gpu_slice("a", 2, 2), gpu_slice("b"), {"spec": {"allNodes": True}}]
    )
    assert sorted(found) == ["a", "b"]
    assert [d.id.name for d in found["a"]] == ["gpu-0", "gpu-1"]  # generation 1 is replaced
    gpu = found["a"][1]
    assert gpu.id == DeviceId("gpu.nvidia.com", "a", "gpu-1")
    assert gpu.attribute("gpu.nvidia.com/index") == 1
    assert gpu.attribute("resource.kubernetes.io/pcieRoot") == "pci0000:0"
    assert gpu.versions == {"gpu.nvidia.com/driverVersion"}
    assert gpu.capacity == {"gpu.nvidia.com/memory": "80Gi"}


CLASSES = device_classes(
    [
        {
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {
                "selectors": [{"cel": {"expression": GPU_CLASS_SELECTOR}}],
                "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"a": 1}}}],
            },
        },
        {"metadata": {"name": "dranet"}, "spec": {}},
    ]
)


def claim(requests: list[dict[str, Any]], **devices: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ml", "uid": "u1", "resourceVersion": "7"},
        "spec": {"devices": {"requests": requests, **devices}},
    }


def test_a_claim_is_resolved_against_its_classes() -> None:
    state = claim_state(
        claim(
            [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "gpu.nvidia.com",
                        "count": 2,
                        "selectors": [{"cel": {"expression": "true"}}],
                    },
                },
                {"name": "nic", "exactly": {"deviceClassName": "dranet"}},
            ],
            constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}],
            config=[
                {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {}}}
            ],
        ),
        CLASSES,
    )
    assert state.key == "ml/c" and state.problem == "" and not state.is_allocated
    request = state.request
    assert request is not None
    gpu, nic = request.requests
    assert gpu.selectors == (GPU_CLASS_SELECTOR, "true") and gpu.count == 2
    assert nic.selectors == () and nic.count == 1 and not nic.all_devices
    assert request.constraints == (DeviceConstraint("resource.kubernetes.io/pcieRoot"),)
    assert request.config == (
        OpaqueConfig("gpu.nvidia.com", {"a": 1}, ("gpu",), "FromClass"),
        OpaqueConfig("gpu.nvidia.com", {}, ("gpu",), "FromClaim"),
    )


def test_claims_voltpack_cannot_allocate_carry_the_reason() -> None:
    unknown = claim_state(claim([{"name": "x", "exactly": {"deviceClassName": "tpu"}}]), CLASSES)
    assert unknown.request is None
    assert unknown.problem == "claim ml/c: request x: DeviceClass 'tpu' does not exist"
    alternatives = claim_state(
        claim([{"name": "x", "firstAvailable": [{"name": "a", "deviceClassName": "dranet"}]}]),
        CLASSES,
    )
    assert "firstAvailable is not supported yet" in alternatives.problem


def test_an_allocated_claim_holds_its_devices_node_and_pods() -> None:
    allocated = claim([{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}])
    allocated["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "a", "device": "gpu-1"}
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}],
    }
    state = claim_state(allocated, CLASSES)
    assert state.is_allocated and state.node == "a" and state.reserved_for == ("pod-uid",)
    assert devices_in_use([state]) == {DeviceId("gpu.nvidia.com", "a", "gpu-1")}


def test_a_pods_claims_by_name_or_generated_from_a_template() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {
            "resourceClaims": [
                {"name": "gpu", "resourceClaimName": "shared"},
                {"name": "nic", "resourceClaimTemplateName": "nic-template"},
            ]
        },
    }
    assert pod_claim_keys(pod) == (
        ["ml/shared"],
        "the claim of nic is not generated from its template yet",
    )
    pod["status"] = {"resourceClaimStatuses": [{"name": "nic", "resourceClaimName": "p-nic-x1"}]}
    assert pod_claim_keys(pod) == (["ml/shared", "ml/p-nic-x1"], "")
