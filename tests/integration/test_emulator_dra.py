"""Dynamic Resource Allocation (`resource.k8s.io/v1`) on the emulator, through the official
client's `ResourceV1Api` and kubectl: discovery, the drivers' slices on simulated nodes,
validation as kube-apiserver answers it, the kubelet's wait for reserved claims and the
resourceclaim controller (claims from templates, reservations and deallocation)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import TIME_FACTOR, Kubectl, pod_manifest, wait_for
from voltpack.emulator import EmulatorConfig, RunningEmulator, running_emulator
from voltpack.model import Node

NODE = "gpu-h100-0"
NODES = (
    Node.empty(NODE, cpu_milli=64000, memory_mib=512000, gpu_count=8, gpu_model="H100"),
    Node.empty("cpu-0", cpu_milli=16000, memory_mib=65536, gpu_count=0, gpu_model=None),
)
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"


@pytest.fixture
def emulator() -> Iterator[RunningEmulator]:
    config = EmulatorConfig(time_factor=TIME_FACTOR, bookmark_interval_s=0.2, dra=True)
    with running_emulator(nodes=NODES, config=config) as running:
        yield running


@pytest.fixture
def resource(api_client: client.ApiClient) -> client.ResourceV1Api:
    return client.ResourceV1Api(api_client)


def claim_body(
    name: str, *, count: int = 2, device_class: str = "gpu.nvidia.com"
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpus", "exactly": {"deviceClassName": device_class, "count": count}}
                ]
            }
        },
    }


def allocation(devices: list[str], request: str = "gpus") -> dict[str, Any]:
    return {
        "devices": {
            "results": [
                {"request": request, "driver": "gpu.nvidia.com", "pool": NODE, "device": d}
                for d in devices
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}
            ]
        },
    }


def reserved_for(pod: Any) -> dict[str, Any]:
    return {"resource": "pods", "name": pod.metadata.name, "uid": pod.metadata.uid}


def causes(error: ApiException) -> dict[str, str]:
    body = json.loads(error.body)
    assert body["reason"] == "Invalid", body
    return {c["field"]: c["message"] for c in body["details"]["causes"]}


def invalid(call: Any, *args: Any, **kwargs: Any) -> dict[str, str]:
    with pytest.raises(ApiException) as caught:
        call(*args, **kwargs)
    assert caught.value.status == 422, caught.value.body
    return causes(caught.value)


GROUP, VERSION = "resource.k8s.io", "v1"


def rejected_create(custom: client.CustomObjectsApi, plural: str, body: Any) -> dict[str, str]:
    """Create through the generic API (the typed client refuses bad bodies itself)."""
    if plural in ("resourceclaims", "resourceclaimtemplates"):
        return invalid(
            custom.create_namespaced_custom_object, GROUP, VERSION, "default", plural, body
        )
    return invalid(custom.create_cluster_custom_object, GROUP, VERSION, plural, body)


def rejected_status(custom: client.CustomObjectsApi, name: str, status: Any) -> dict[str, str]:
    return invalid(
        custom.patch_namespaced_custom_object_status,
        GROUP,
        VERSION,
        "default",
        "resourceclaims",
        name,
        {"status": status},
    )


def allocate(resource: client.ResourceV1Api, name: str, pod: Any | None, devices: list[str]) -> Any:
    """What kube-scheduler does: delete-protection finalizer, then allocation + reservation."""
    resource.patch_namespaced_resource_claim(
        name, "default", {"metadata": {"finalizers": [DELETE_PROTECTION]}}
    )
    status: dict[str, Any] = {"allocation": allocation(devices)}
    if pod is not None:
        status["reservedFor"] = [reserved_for(pod)]
    return resource.patch_namespaced_resource_claim_status(name, "default", {"status": status})


# --- discovery and slices ----------------------------------------------------------------------


def test_discovery_serves_resource_v1(api_client: client.ApiClient, kubectl: Kubectl) -> None:
    groups = {g.name: g for g in client.ApisApi(api_client).get_api_versions().groups}
    assert groups["resource.k8s.io"].preferred_version.group_version == "resource.k8s.io/v1"
    listed = client.ResourceV1Api(api_client).get_api_resources()
    by_name = {r.name: r for r in listed.resources}
    assert set(by_name) == {
        "deviceclasses",
        "resourceclaims",
        "resourceclaims/status",
        "resourceclaimtemplates",
        "resourceslices",
    }
    assert not by_name["deviceclasses"].namespaced and not by_name["resourceslices"].namespaced
    assert by_name["resourceclaims"].namespaced and by_name["resourceclaimtemplates"].namespaced
    out = kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout.split()
    assert sorted(out) == [
        "deviceclasses.resource.k8s.io",
        "resourceclaims.resource.k8s.io",
        "resourceclaimtemplates.resource.k8s.io",
        "resourceslices.resource.k8s.io",
    ]


def test_nodes_publish_driver_slices(
    resource: client.ResourceV1Api, core: client.CoreV1Api, kubectl: Kubectl
) -> None:
    node = core.read_node(NODE)
    assert "nvidia.com/gpu" not in node.status.capacity  # the DRA driver replaces the plugin
    slices = resource.list_resource_slice(field_selector=f"spec.nodeName={NODE}").items
    assert {s.spec.driver for s in slices} == {"gpu.nvidia.com", "dra.net"}
    assert resource.list_resource_slice(field_selector="spec.nodeName=cpu-0").items == []
    gpus = resource.list_resource_slice(field_selector="spec.driver=gpu.nvidia.com").items
    assert len(gpus) == 1 and gpus[0].spec.pool.name == NODE and gpus[0].spec.node_name == NODE
    devices = {d.name: d for d in gpus[0].spec.devices}
    assert sorted(devices) == [f"gpu-{i}" for i in range(8)]
    gpu0 = devices["gpu-0"].attributes
    assert gpu0["type"].string == "gpu"
    assert gpu0["productName"].string == "NVIDIA H100 80GB HBM3"
    assert gpu0["index"].int == 0 and gpu0["cudaComputeCapability"].version == "9.0.0"
    assert devices["gpu-0"].capacity["memory"].value == "81920Mi"
    cliques = {d.attributes["cliqueId"].string for d in devices.values()}
    assert len(cliques) == 1  # one NVLink domain of 8
    roots = [
        devices[f"gpu-{i}"].attributes["resource.kubernetes.io/pcieRoot"].string for i in range(8)
    ]
    assert len(set(roots)) == 4 and roots[0] == roots[1] != roots[2]
    (nics,) = resource.list_resource_slice(field_selector="spec.driver=dra.net").items
    by_if = {d.attributes["dra.net/ifName"].string: d.attributes for d in nics.spec.devices}
    assert sorted(by_if) == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert by_if["mlx5_0"]["dra.net/rdma"].bool is True
    assert by_if["mlx5_0"]["resource.kubernetes.io/pcieRoot"].string == roots[0]
    assert by_if["mlx5_0"]["dra.net/linkSpeedMbps"].int == 400_000
    classes = {c.metadata.name for c in resource.list_device_class().items}
    assert classes == {"gpu.nvidia.com", "mig.nvidia.com", "dra.net"}
    table = kubectl("get", "resourceslices").stdout
    assert f"{NODE}-gpu.nvidia.com" in table
    bad = kubectl("get", "resourceslices", "--field-selector=spec.pool.name=x", check=False)
    assert bad.returncode != 0 and "field label not supported" in bad.stderr


def test_without_dra_nodes_keep_the_device_plugin() -> None:
    config = EmulatorConfig(time_factor=TIME_FACTOR)
    with (
        running_emulator(nodes=NODES, config=config) as emu,
        client.ApiClient(client.Configuration(host=emu.url)) as api,
    ):
        assert client.CoreV1Api(api).read_node(NODE).status.capacity["nvidia.com/gpu"] == "8"
        resource = client.ResourceV1Api(api)
        assert resource.list_resource_slice().items == []
        assert resource.list_device_class().items == []


# --- validation --------------------------------------------------------------------------------


def test_invalid_objects_are_422_naming_the_field(custom: client.CustomObjectsApi) -> None:
    bad_claim = claim_body("Bad_Name", count=0)
    bad_claim["spec"]["devices"]["requests"].append({"name": "nics"})
    found = rejected_create(custom, "resourceclaims", bad_claim)
    assert "metadata.name" in found
    assert "must be greater than zero" in found["spec.devices.requests[0].exactly.count"]
    assert "exactly one of `exactly`" in found["spec.devices.requests[1]"]
    no_class = claim_body("no-class")
    del no_class["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"]
    found = rejected_create(custom, "resourceclaims", no_class)
    assert found == {"spec.devices.requests[0].exactly.deviceClassName": "Required value"}
    bad_cel = {
        "metadata": {"name": "bad-cel"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]},
    }
    found = rejected_create(custom, "deviceclasses", bad_cel)
    assert "compilation failed" in found["spec.selectors[0].cel.expression"]
    slice_body = {
        "metadata": {"name": "dup"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": NODE,
            "pool": {"name": "", "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}, {"name": "gpu-0"}],
        },
    }
    found = rejected_create(custom, "resourceslices", slice_body)
    assert found["spec.devices[1]"] == 'Duplicate value: "gpu-0"'
    assert found["spec.pool.name"] == "Required value"
    no_node = {
        "metadata": {"name": "nowhere"},
        "spec": {"driver": "gpu.nvidia.com", "pool": {"name": "p", "resourceSliceCount": 1}},
    }
    found = rejected_create(custom, "resourceslices", no_node)
    assert "exactly one of `nodeName`" in found["spec"]


def test_claim_spec_is_immutable_and_status_rules_hold(
    resource: client.ResourceV1Api, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    created = resource.create_namespaced_resource_claim(
        "default", {**claim_body("train"), "status": {"allocation": allocation(["gpu-0"])}}
    )
    assert created.status is None or created.status.allocation is None  # status reset on create
    assert created.spec.devices.requests[0].exactly.allocation_mode == "ExactCount"
    found = invalid(
        resource.patch_namespaced_resource_claim,
        "train",
        "default",
        {
            "spec": {
                "devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "x"}}]}
            }
        },
    )
    assert "field is immutable" in found["spec"]
    pod = core.create_namespaced_pod("default", pod_manifest("holder"))
    # reservedFor without an allocation
    found = rejected_status(custom, "train", {"reservedFor": [reserved_for(pod)]})
    assert "may not be specified when `allocated` is not set" in found["status.reservedFor"]
    # an allocation result naming a request the claim does not have
    found = rejected_status(custom, "train", {"allocation": allocation(["gpu-0"], request="nics")})
    assert "must be the name of a request" in found["status.allocation.devices.results[0].request"]
    allocate(resource, "train", pod, ["gpu-0", "gpu-1"])
    # an allocation cannot change once set
    found = rejected_status(custom, "train", {"allocation": allocation(["gpu-2", "gpu-3"])})
    assert "field is immutable" in found["status.allocation"]
    # at most 256 consumers
    many = [{"resource": "pods", "name": f"p{i}", "uid": f"uid-{i}"} for i in range(257)]
    found = rejected_status(custom, "train", {"reservedFor": many})
    assert "must have at most 256 items" in found["status.reservedFor"]


def test_pod_resource_claims_are_kept_validated_and_immutable(core: client.CoreV1Api) -> None:
    manifest = pod_manifest("with-claims")
    manifest["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "train"}]
    manifest["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    pod = core.create_namespaced_pod("default", manifest)
    assert pod.spec.resource_claims[0].resource_claim_name == "train"
    assert pod.spec.containers[0].resources.claims[0].name == "gpus"
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod(
            "with-claims",
            "default",
            {"spec": {"resourceClaims": [{"name": "gpus", "resourceClaimName": "other"}]}},
        )
    assert caught.value.status == 422 and "spec" in causes(caught.value)
    bad = pod_manifest("bad-claims")
    bad["spec"]["containers"][0]["resources"]["claims"] = [{"name": "nothing"}]
    found = invalid(core.create_namespaced_pod, "default", bad)
    assert "Not found" in found["spec.containers[0].resources.claims[0]"]


# --- kubelet and controller --------------------------------------------------------------------


def test_pod_starts_only_with_a_reserved_claim(
    resource: client.ResourceV1Api, core: client.CoreV1Api
) -> None:
    resource.create_namespaced_resource_claim("default", claim_body("job-gpus"))
    manifest = pod_manifest("worker", node_name=NODE)
    manifest["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "job-gpus"}]
    manifest["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    pod = core.create_namespaced_pod("default", manifest)

    def failed_prepare() -> list[Any]:
        events = core.list_namespaced_event(
            "default", field_selector="reason=FailedPrepareDynamicResources"
        ).items
        return [e for e in events if e.involved_object.name == "worker"]

    (event,) = wait_for(failed_prepare, what="FailedPrepareDynamicResources")
    assert event.type == "Warning" and "not allocated" in event.message
    assert core.read_namespaced_pod("worker", "default").status.phase == "Pending"
    allocate(resource, "job-gpus", pod, ["gpu-0", "gpu-1"])
    wait_for(
        lambda: core.read_namespaced_pod("worker", "default").status.phase == "Running",
        what="worker Running",
    )
    # the pod goes: its reservation goes, and the claim (protected) is deallocated
    core.delete_namespaced_pod("worker", "default", grace_period_seconds=0)

    def released() -> bool:
        claim = resource.read_namespaced_resource_claim("job-gpus", "default")
        status = claim.status
        return (
            not (status and status.reserved_for)
            and not (status and status.allocation)
            and not claim.metadata.finalizers
        )

    wait_for(released, what="claim deallocated")


def test_claims_from_templates_follow_their_pod(
    resource: client.ResourceV1Api, core: client.CoreV1Api
) -> None:
    template = {
        "metadata": {"name": "two-gpus"},
        "spec": {
            "metadata": {"labels": {"team": "ml"}},
            "spec": claim_body("unused")["spec"],
        },
    }
    resource.create_namespaced_resource_claim_template("default", template)
    manifest = pod_manifest("trainer", node_name=NODE)
    manifest["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]
    core.create_namespaced_pod("default", manifest)

    def generated() -> Any:
        statuses = core.read_namespaced_pod("trainer", "default").status.resource_claim_statuses
        return statuses[0].resource_claim_name if statuses else None

    claim_name = wait_for(generated, what="resourceClaimStatuses")
    assert claim_name.startswith("trainer-gpus-")
    claim = resource.read_namespaced_resource_claim(claim_name, "default")
    assert claim.metadata.annotations["resource.kubernetes.io/pod-claim-name"] == "gpus"
    assert claim.metadata.labels == {"team": "ml"}
    (owner,) = claim.metadata.owner_references
    assert owner.kind == "Pod" and owner.name == "trainer" and owner.controller
    assert claim.spec.devices.requests[0].exactly.count == 2
    pod = core.read_namespaced_pod("trainer", "default")
    allocate(resource, claim_name, pod, ["gpu-4", "gpu-5"])
    wait_for(
        lambda: core.read_namespaced_pod("trainer", "default").status.phase == "Running",
        what="trainer Running",
    )
    core.delete_namespaced_pod("trainer", "default", grace_period_seconds=0)

    def claim_gone() -> bool:
        return all(
            c.metadata.name != claim_name
            for c in resource.list_namespaced_resource_claim("default").items
        )

    wait_for(claim_gone, what="generated claim deleted with its pod")
