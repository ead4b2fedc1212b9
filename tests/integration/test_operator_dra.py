"""voltpack's decision made binding through Dynamic Resource Allocation, end to end: nodes whose
GPUs and NICs are published in ResourceSlices (as NVIDIA's GPU driver and DRANet publish them),
pods asking through ResourceClaims, the operator writing each claim's allocation and binding."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.integration.backends import Cluster, EmulatorCluster, RealCluster, operator_in_thread
from tests.integration.conftest import wait_for
from tests.integration.services import started_control_plane
from tests.k8s_control_plane import ControlPlane
from voltpack.emulator import EmulatorConfig, running_emulator
from voltpack.model import Node
from voltpack.operator.runner import OperatorConfig
from voltpack.policies.schema import policy_for_strategy
from voltpack.scheduler.device_selectors import parse_quantity

PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
GANG = "voltpack.io/pod-group"


BACKENDS = ["emulator", "real"]
CONSUMABLE_CAPACITY = "--feature-gates=DRAConsumableCapacity=true"
NODES = [Node.empty(f"node-{c}", 64_000, 524_288, 8, "H100") for c in "ab"]


@pytest.fixture(scope="module")
def real_plane() -> Iterator[ControlPlane]:
    # GPU shares: several claims on one GPU (consumable capacity, alpha in Kubernetes 1.34)
    yield from started_control_plane(kwok=True, extra_apiserver_args=(CONSUMABLE_CAPACITY,))


def _prepare(cluster: Cluster, shared_gpus: bool) -> None:
    cluster.ensure_namespace("voltpack-system")
    cluster.ensure_namespace("ml")
    cluster.install_crds()
    cluster.add_dra_gpu_nodes(NODES, shared_gpus=shared_gpus)


def _cluster(request: pytest.FixtureRequest, tmp_path: Path, shared: bool) -> Iterator[Cluster]:
    if request.param == "emulator":
        config = EmulatorConfig(
            time_factor=0.001, bookmark_interval_s=0.2, dra=True, dra_shared_gpus=shared
        )
        with running_emulator(nodes=[], config=config) as emulator:
            emulated = EmulatorCluster(emulator, tmp_path)
            _prepare(emulated, shared)
            yield emulated
        return
    real = RealCluster(request.getfixturevalue("real_plane"))
    real.reset()
    _prepare(real, shared)
    try:
        yield real
    finally:
        real.reset()


@pytest.fixture(params=BACKENDS)
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """Two nodes of 8 H100s whose devices the DRA drivers publish (no device plugin): on the
    emulator (its simulated drivers) or on a real kube-apiserver (slices created here)."""
    yield from _cluster(request, tmp_path, shared=False)


@pytest.fixture(params=BACKENDS)
def sharing_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """The same, with GPUs several claims may hold (`allowMultipleAllocations`)."""
    yield from _cluster(request, tmp_path, shared=True)


@pytest.fixture
def api(cluster: Cluster) -> Iterator[client.ApiClient]:
    with cluster.api_client() as api_client:
        yield api_client


def operator_config() -> OperatorConfig:
    return OperatorConfig(
        policy=policy_for_strategy("best-fit"),
        identity="op-dra",
        cycle_interval_s=0.05,
        lease_duration_s=2,
        power=False,
        policy_configmap=None,
    )


def gpu_and_nic_claim(name: str, gpu_selector: str | None = None) -> dict[str, Any]:
    """One GPU and one RDMA NIC on the same PCIe root."""
    gpu: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com", "count": 1}
    if gpu_selector:
        gpu["selectors"] = [{"cel": {"expression": gpu_selector}}]
    nic = {
        "deviceClassName": "dra.net",
        "selectors": [{"cel": {"expression": 'device.attributes["dra.net"].rdma == true'}}],
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": gpu}, {"name": "nic", "exactly": nic}],
                "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": PCIE_ROOT}],
            }
        },
    }


def claiming_pod(
    name: str, claim: str, gang: str | None = None, **annotations: str
) -> dict[str, Any]:
    if gang:
        annotations[GANG] = gang
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "annotations": annotations},
        "spec": {
            "schedulerName": "voltpack",
            "resourceClaims": [{"name": "devices", "resourceClaimName": claim}],
            "containers": [
                {
                    "name": "main",
                    "image": "trainer",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi"},
                        "claims": [{"name": "devices"}],
                    },
                }
            ],
        },
    }


def devices_of(resource: client.ResourceV1Api) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every published device by (driver, pool, name), with its attributes."""
    found = {}
    for item in resource.list_resource_slice().items:
        for device in item.spec.devices or []:
            attributes = {
                name: next(
                    v for v in (value.string, value.int, value.bool, value.version) if v is not None
                )
                for name, value in (device.attributes or {}).items()
            }
            found[(item.spec.driver, item.spec.pool.name, device.name)] = attributes
    return found


def allocated(resource: client.ResourceV1Api, name: str) -> bool:
    """True when the claim holds an allocation."""
    status = resource.read_namespaced_resource_claim(name, "ml").status
    return status is not None and status.allocation is not None


def test_a_gang_with_gpu_and_nic_claims_gets_the_devices_voltpack_chose_on_one_pcie_root(
    cluster: Cluster, api: client.ApiClient
) -> None:
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    for i in range(4):
        resource.create_namespaced_resource_claim("ml", gpu_and_nic_claim(f"train-{i}"))
        core.create_namespaced_pod("ml", claiming_pod(f"train-{i}", f"train-{i}", gang="train"))
    with operator_in_thread(cluster, operator_config()):

        def running() -> list[Any]:
            pods = core.list_namespaced_pod("ml").items
            ok = len(pods) == 4 and all(p.status.phase == "Running" for p in pods)
            return pods if ok else []

        pods = wait_for(running, timeout_s=30, what="the gang of 4 running")
    devices = devices_of(resource)
    seen: set[tuple[str, str, str]] = set()
    for pod in pods:
        claim = resource.read_namespaced_resource_claim(pod.metadata.name, "ml")
        allocation = claim.status.allocation
        terms = allocation.node_selector.node_selector_terms
        assert terms[0].match_fields[0].values == [pod.spec.node_name]
        assert [(r.uid, r.name) for r in claim.status.reserved_for] == [
            (pod.metadata.uid, pod.metadata.name)
        ]
        assert "resource.kubernetes.io/delete-protection" in claim.metadata.finalizers
        by_request = {r.request: (r.driver, r.pool, r.device) for r in allocation.devices.results}
        assert set(by_request) == {"gpu", "nic"}
        assert not (set(by_request.values()) & seen)  # no device in two claims
        seen |= set(by_request.values())
        gpu, nic = devices[by_request["gpu"]], devices[by_request["nic"]]
        assert by_request["gpu"][1] == pod.spec.node_name
        assert gpu[PCIE_ROOT] == nic[PCIE_ROOT]
        # the claim holds the GPU voltpack chose and recorded on the pod
        assert str(gpu["index"]) == pod.metadata.annotations["voltpack.io/gpu-indices"]
        reason = pod.metadata.annotations["voltpack.io/placement-reason"]
        assert f"GPU {gpu['index']} " in reason and "on the same PCIe root" in reason
    assert len({p.spec.node_name for p in pods}) == 1  # best-fit packs the gang on one node


def test_a_claim_asking_for_a_product_the_cluster_lacks_stays_pending_with_the_reason(
    cluster: Cluster, api: client.ApiClient
) -> None:
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    selector = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200"'
    resource.create_namespaced_resource_claim("ml", gpu_and_nic_claim("b200", selector))
    core.create_namespaced_pod("ml", claiming_pod("wants-b200", "b200"))
    with operator_in_thread(cluster, operator_config()):

        def failed() -> Any:
            events = core.list_namespaced_event("ml").items
            return next((e for e in events if e.reason == "FailedScheduling"), None)

        event = wait_for(failed, timeout_s=30, what="a FailedScheduling Event")
    assert "no node can allocate its ResourceClaims" in event.message
    assert selector in event.message
    pod = core.read_namespaced_pod("wants-b200", "ml")
    assert pod.spec.node_name is None
    assert not allocated(resource, "b200")


def gpu_claim(name: str, count: int = 1) -> dict[str, Any]:
    requests = [
        {"name": f"gpu{n}", "exactly": {"deviceClassName": "gpu.nvidia.com"}} for n in range(count)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": requests}},
    }


def allocate_by_hand(resource: client.ResourceV1Api, claim: str, node: str, gpus: range) -> None:
    """As another scheduler would: the claim's GPUs `gpus` of `node`."""
    resource.create_namespaced_resource_claim("ml", gpu_claim(claim, len(gpus)))
    results = [
        {"request": f"gpu{n}", "driver": "gpu.nvidia.com", "pool": node, "device": f"gpu-{i}"}
        for n, i in enumerate(gpus)
    ]
    on_node = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    allocation = {"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [on_node]}}
    resource.patch_namespaced_resource_claim_status(
        claim, "ml", {"status": {"allocation": allocation}}
    )


def test_devices_another_scheduler_allocated_are_never_handed_out_again(
    cluster: Cluster, api: client.ApiClient
) -> None:
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    allocate_by_hand(resource, "other-a", "node-a", range(6))
    allocate_by_hand(resource, "other-b", "node-b", range(8))
    for i in range(3):
        resource.create_namespaced_resource_claim("ml", gpu_claim(f"late-{i}"))
        core.create_namespaced_pod("ml", claiming_pod(f"late-{i}", f"late-{i}"))
    with operator_in_thread(cluster, operator_config()):

        def settled() -> list[Any]:
            pods = core.list_namespaced_pod("ml").items
            bound = [p for p in pods if p.spec.node_name]
            events = core.list_namespaced_event("ml").items
            waiting = any(e.reason == "FailedScheduling" for e in events)
            return bound if len(bound) == 2 and waiting else []

        bound = wait_for(settled, timeout_s=30, what="two pods bound, the third waiting")
    given = set()
    for pod in bound:
        claim = resource.read_namespaced_resource_claim(pod.metadata.name, "ml")
        for result in claim.status.allocation.devices.results:
            given.add((result.pool, result.device))
    assert given == {("node-a", "gpu-6"), ("node-a", "gpu-7")}
    waiting = next(p for p in core.list_namespaced_pod("ml").items if not p.spec.node_name)
    assert not allocated(resource, waiting.metadata.name)


def test_gpu_shares_go_to_one_gpu_and_each_claim_carries_the_mps_setting_of_its_share(
    sharing_cluster: Cluster,
) -> None:
    with sharing_cluster.api_client() as api:
        core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
        shares = {"share-a": "300", "share-b": "250", "share-c": "400"}
        for name, milli in shares.items():
            resource.create_namespaced_resource_claim("ml", gpu_claim(name))
            pod = claiming_pod(name, name, **{"voltpack.io/gpu-milli": milli})
            core.create_namespaced_pod("ml", pod)
        resource.create_namespaced_resource_claim("ml", gpu_claim("sliced"))
        sliced = claiming_pod(
            "sliced",
            "sliced",
            **{"voltpack.io/gpu-milli": "50", "voltpack.io/gpu-sharing": "time-slicing"},
        )
        core.create_namespaced_pod("ml", sliced)
        with operator_in_thread(sharing_cluster, operator_config()):

            def running() -> list[Any]:
                pods = core.list_namespaced_pod("ml").items
                ok = len(pods) == 4 and all(p.status.phase == "Running" for p in pods)
                return pods if ok else []

            pods = wait_for(running, timeout_s=30, what="the share pods running")
        held = {}
        for pod in pods:
            claim = resource.read_namespaced_resource_claim(pod.metadata.name, "ml")
            (result,) = claim.status.allocation.devices.results
            assert result.share_id  # one share of a device several claims hold
            held[pod.metadata.name] = (result.pool, result.device, result.share_id)
            assert f"{result.pool}" == pod.spec.node_name
            assert result.device == f"gpu-{pod.metadata.annotations['voltpack.io/gpu-indices']}"
            (config,) = claim.status.allocation.devices.config
            assert config.source == "FromClaim" and config.requests == ["gpu0"]
            sharing = config.opaque.parameters["sharing"]
            assert config.opaque.driver == "gpu.nvidia.com"
            assert config.opaque.parameters["kind"] == "GpuConfig"
            if pod.metadata.name == "sliced":
                assert sharing == {
                    "strategy": "TimeSlicing",
                    "timeSlicingConfig": {"interval": "Default"},
                }
                continue
            milli = int(shares[pod.metadata.name])
            assert sharing["strategy"] == "MPS"
            mps = sharing["mpsConfig"]
            assert mps["defaultActiveThreadPercentage"] == milli // 10
            memory_mib = 80 * 1024 * milli // 1000
            assert mps["defaultPinnedDeviceMemoryLimit"] == f"{memory_mib}Mi"
            (consumed,) = result.consumed_capacity.items()  # a real apiserver writes 24Gi
            assert consumed[0] == "memory"
            assert parse_quantity(consumed[1]) == parse_quantity(f"{memory_mib}Mi")
        # best-fit packs the shares (300 + 250 + 400 + 50 = 1000 milli) onto one GPU
        assert len({(pool, device) for pool, device, _ in held.values()}) == 1
        assert len({share for _, _, share in held.values()}) == 4
