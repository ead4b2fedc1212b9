"""A gang's ResourceClaims are written all or none, against a served resource.k8s.io/v1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from voltpack.emulator import EmulatorConfig, running_emulator
from voltpack.model.devices import ClaimAllocation, DeviceId, DeviceResult
from voltpack.operator.dra.writer import DELETE_PROTECTION_FINALIZER, ClaimWrite, write_claims


@pytest.fixture
def resource() -> Iterator[client.ResourceV1Api]:
    with running_emulator(nodes=[], config=EmulatorConfig(time_factor=0.001)) as emulator:
        api = client.ApiClient(client.Configuration(host=emulator.url))
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "ml"}})
        yield client.ResourceV1Api(api)
        api.close()


POD_UIDS: dict[str, str] = {}


def claim(resource: client.ResourceV1Api, name: str) -> Any:
    """A claim and the (pending) pod that uses it: the emulator's resourceclaim controller
    drops reservations for pods that do not exist."""
    body = {
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "g"}}]}},
    }
    created = resource.create_namespaced_resource_claim("ml", body)
    pod = {
        "metadata": {"name": f"pod-{name}"},
        "spec": {
            "schedulerName": "nobody",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }
    core = client.CoreV1Api(resource.api_client)
    POD_UIDS[name] = core.create_namespaced_pod("ml", pod).metadata.uid
    return created


def write(name: str, version: str, gpu: int) -> ClaimWrite:
    device = DeviceId("gpu.nvidia.com", "node-a", f"gpu-{gpu}")
    allocation = ClaimAllocation(f"ml/{name}", "node-a", (DeviceResult("gpu", device),))
    return ClaimWrite(f"ml/{name}", version, allocation, ((f"pod-{name}", POD_UIDS[name]),))


def test_claims_are_written_with_allocation_reservation_and_finalizer(
    resource: client.ResourceV1Api,
) -> None:
    first, second = claim(resource, "a"), claim(resource, "b")
    problem, written = write_claims(
        resource,
        [
            write("a", first.metadata.resource_version, 0),
            write("b", second.metadata.resource_version, 1),
        ],
    )
    assert problem == "" and len(written) == 2
    for name, gpu in (("a", 0), ("b", 1)):
        stored = resource.read_namespaced_resource_claim(name, "ml")
        assert stored.metadata.finalizers == [DELETE_PROTECTION_FINALIZER]
        (result,) = stored.status.allocation.devices.results
        assert (result.driver, result.pool, result.device) == (
            "gpu.nvidia.com",
            "node-a",
            f"gpu-{gpu}",
        )
        assert [(r.name, r.uid) for r in stored.status.reserved_for] == [
            (f"pod-{name}", POD_UIDS[name])
        ]


def test_when_one_claim_cannot_be_written_the_ones_written_are_undone(
    resource: client.ResourceV1Api,
) -> None:
    first, second = claim(resource, "a"), claim(resource, "b")
    stale = second.metadata.resource_version
    resource.patch_namespaced_resource_claim("b", "ml", {"metadata": {"labels": {"x": "y"}}})
    problem, written = write_claims(
        resource, [write("a", first.metadata.resource_version, 0), write("b", stale, 1)]
    )
    assert written == []
    assert problem.startswith("ResourceClaim ml/b not written: ")
    for name in ("a", "b"):
        status = resource.read_namespaced_resource_claim(name, "ml").status
        assert status is None or (status.allocation is None and not status.reserved_for)
