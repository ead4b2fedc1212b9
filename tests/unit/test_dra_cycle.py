"""The operator's DRA cycle on its own: devices into the snapshot, claims into requests."""

from __future__ import annotations

from typing import Any

import pytest

from voltpack.emulator.dra.slices import driver_device_classes, node_resource_slices
from voltpack.model import Node
from voltpack.model.errors import InvalidRequestError
from voltpack.model.workload import Pod
from voltpack.operator.dra.cycle import DraCycle
from voltpack.operator.dra.devices import device_kind
from voltpack.operator.kube.translate import node_to_k8s
from voltpack.operator.scheduling.cluster_view import build_snapshot
from voltpack.scheduler.device_selectors import DeviceSelectors
from voltpack.scheduler.dra_allocation import Unsatisfiable


def mig_partitioned(slices: list[dict[str, Any]], gpu: int, parts: int) -> list[dict[str, Any]]:
    """GPU `gpu` published as `parts` MIG devices instead of whole, as NVIDIA's driver does
    for a GPU in static MIG mode."""
    gpu_slice = slices[0]
    devices = gpu_slice["spec"]["devices"]
    whole = next(d for d in devices if d["name"] == f"gpu-{gpu}")
    devices.remove(whole)
    for part in range(parts):
        attributes = dict(whole["attributes"])
        attributes["type"] = {"string": "mig"}
        attributes["profile"] = {"string": "1g.10gb"}
        attributes["parentUUID"] = attributes.pop("uuid")
        devices.append(
            {
                "name": f"gpu-{gpu}-mig-1g10gb-{part}",
                "attributes": attributes,
                "capacity": {"memory": {"value": "10Gi"}},
            }
        )
    return slices


def claim(name: str, **status: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ml", "uid": name, "resourceVersion": "1"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    if status:
        body["status"] = status
    return body


def allocated_to(device: str) -> dict[str, Any]:
    result = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-a", "device": device}
    on_node = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
    return {
        "allocation": {
            "devices": {"results": [result]},
            "nodeSelector": {"nodeSelectorTerms": [on_node]},
        }
    }


def test_a_mig_partitioned_gpu_leaves_a_gap_the_snapshot_slots_close() -> None:
    slices = mig_partitioned(node_resource_slices("node-a", "H100", None), gpu=2, parts=7)
    dra = DraCycle.build(
        slices,
        driver_device_classes(),
        [claim("taken", **allocated_to("gpu-5"))],
        DeviceSelectors(),
    )
    devices = dra.nodes["node-a"]
    assert len(devices.gpus) == 7  # the partitioned GPU is not offered whole
    assert [d.id.name for d in devices.gpus.values()] == [f"gpu-{i}" for i in (0, 1, 3, 4, 5, 6, 7)]
    assert sum(device_kind(d) == "mig" for d in devices.devices) == 7
    node = node_to_k8s(Node.empty("node-a", 64_000, 524_288, 0, None))
    node["status"]["allocatable"].pop("nvidia.com/gpu")
    (view,) = dra.node_views([node])
    assert view["status"]["allocatable"]["nvidia.com/gpu"] == "7"
    layout = dra.layouts()["node-a"]
    assert layout.gpu_count == 7
    # the NIC of the PCIe root of GPUs 2 and 3 serves slot 2 (GPU 3) only
    assert [nic.pcie_gpus for nic in layout.nics] == [(0, 1), (2,), (3, 4), (5, 6)]
    snapshot = build_snapshot([view], [], dra.layouts())
    dra.account(snapshot, [])
    # GPU 5, allocated by another scheduler, is slot 4
    assert snapshot.gpu_free_milli[0, :7].tolist() == [1000, 1000, 1000, 1000, 0, 1000, 1000]


def test_a_claim_for_a_mig_device_gets_one_and_takes_no_whole_gpu() -> None:
    slices = mig_partitioned(node_resource_slices("node-a", "H100", None), gpu=2, parts=7)
    mig = claim("mig")
    mig["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "mig.nvidia.com"
    dra = DraCycle.build(slices, driver_device_classes(), [mig], DeviceSelectors())
    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"resourceClaims": [{"name": "mig", "resourceClaimName": "mig"}]},
    }
    request = dra.request(pod, Pod(name="ml/p", cpu_milli=1000, memory_mib=1024))
    assert request.num_gpu == 0 and request.nodes == frozenset({"node-a"})
    allocations = dra.allocate([("ml/p", "node-a", (), ())], {"ml/p": pod})
    assert not isinstance(allocations, Unsatisfiable)
    ((allocation,),) = allocations.values()
    (device,) = allocation.devices()
    assert device.name.startswith("gpu-2-mig-1g10gb-")
    assert dra.chosen((allocation,)) == ((), ())  # no whole GPU recorded on the pod


def test_a_reason_shared_by_claims_of_one_shape_names_each_pods_own_claim() -> None:
    b200 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200"'
    claims = []
    for name in ("first", "second"):
        body = claim(name)
        body["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
            {"cel": {"expression": b200}}
        ]
        claims.append(body)
    dra = DraCycle.build(
        node_resource_slices("node-a", "H100", None),
        driver_device_classes(),
        claims,
        DeviceSelectors(),
    )
    for name in ("first", "second"):
        pod = {
            "metadata": {"name": f"pod-{name}", "namespace": "ml"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": name}]},
        }
        with pytest.raises(InvalidRequestError) as refused:
            dra.request(pod, Pod(name=f"ml/pod-{name}", cpu_milli=1, memory_mib=1))
        assert f"claim ml/{name}: request gpu: 0 of 12 devices" in str(refused.value)
        other = "second" if name == "first" else "first"
        assert f"ml/{other}" not in str(refused.value)


def test_requests_of_one_class_are_told_apart_by_their_own_selectors() -> None:
    nowhere = claim("nowhere")
    nowhere["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName == "B200"'}}
    ]
    dra = DraCycle.build(
        node_resource_slices("node-a", "H100", None),
        driver_device_classes(),
        [nowhere, claim("any")],
        DeviceSelectors(),
    )
    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "nowhere"}]},
    }
    with pytest.raises(InvalidRequestError):
        dra.request(pod, Pod(name="ml/p", cpu_milli=1, memory_mib=1))
    pod["spec"]["resourceClaims"][0]["resourceClaimName"] = "any"
    assert dra.request(pod, Pod(name="ml/p", cpu_milli=1, memory_mib=1)).num_gpu == 1
