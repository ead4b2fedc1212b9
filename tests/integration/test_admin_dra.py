"""The admin API shows each pod's devices and the operator's metrics count DRA devices, end to
end on the emulator and on a real kube-apiserver: the operator allocates a gang's GPU+NIC
claims, another scheduler holds a claim of its own, the API (over real HTTP, reading through
the official client) names every claim's devices, and a real Prometheus scrapes the counts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from tests.integration.backends import Cluster, EmulatorCluster, RealCluster, operator_in_thread
from tests.integration.conftest import pod_manifest, wait_for
from tests.integration.prometheus import promtool_check_metrics, running_prometheus
from tests.integration.services import started_control_plane
from tests.integration.test_operator_dra import (
    PCIE_ROOT,
    allocate_by_hand,
    claiming_pod,
    devices_of,
    gpu_and_nic_claim,
    operator_config,
)
from tests.k8s_control_plane import ControlPlane
from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens
from voltpack.api.server import serving
from voltpack.emulator import EmulatorConfig, running_emulator
from voltpack.model import Node
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.policies.schema import policy_for_strategy

BACKENDS = ["emulator", "real"]
DRA_NODES = [Node.empty(f"node-{c}", 64_000, 524_288, 8, "H100") for c in "ab"]
PLUGIN_NODES = [Node.empty("plain-a", 64_000, 524_288, 8, "H100")]
TOKEN = "tok-viewer-dra"


@pytest.fixture(scope="module")
def real_plane() -> Iterator[ControlPlane]:
    yield from started_control_plane(kwok=True)


@contextmanager
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, *, dra: bool, nodes: list[Node]
) -> Iterator[Cluster]:
    """The emulator (its simulated DRA drivers publish the slices when `dra`) or a real
    kube-apiserver (slices created by the test), with namespaces, CRDs and `nodes`."""
    if request.param == "emulator":
        config = EmulatorConfig(time_factor=0.001, bookmark_interval_s=0.2, dra=dra)
        with running_emulator(nodes=[], config=config) as emulator:
            cluster: Cluster = EmulatorCluster(emulator, tmp_path)
            _prepare(cluster, dra, nodes)
            yield cluster
        return
    real = RealCluster(request.getfixturevalue("real_plane"))
    real.reset()
    _prepare(real, dra, nodes)
    try:
        yield real
    finally:
        real.reset()


def _prepare(cluster: Cluster, dra: bool, nodes: list[Node]) -> None:
    cluster.ensure_namespace("voltpack-system")
    cluster.ensure_namespace("ml")
    cluster.install_crds()
    if dra:
        cluster.add_dra_gpu_nodes(nodes)
    else:
        cluster.add_gpu_nodes(nodes)


@pytest.fixture(params=BACKENDS)
def dra_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """Two nodes of 8 H100s (and 4 RDMA NICs each) published by the DRA drivers."""
    with backend(request, tmp_path, dra=True, nodes=DRA_NODES) as cluster:
        yield cluster


@pytest.fixture(params=BACKENDS)
def plugin_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """One node of 8 H100s behind the device plugin (`nvidia.com/gpu`), no ResourceSlices."""
    with backend(request, tmp_path, dra=False, nodes=PLUGIN_NODES) as cluster:
        yield cluster


@contextmanager
def admin_api(cluster: Cluster, tmp_path: Path) -> Iterator[httpx.Client]:
    """The admin API over real HTTP, reading `cluster` through the official client."""
    tokens_file = tmp_path / "tokens.csv"
    tokens_file.write_text(f"{TOKEN},viewer-user,viewer\n")
    tokens = StaticTokens.from_file(tokens_file)
    policy = policy_for_strategy("best-fit")
    with cluster.api_client() as api:
        source = KubeAdminSource(api, policy, "")
        app = create_app(
            ApiDependencies(
                cluster=source, policies=source, authenticator=tokens, authorizer=tokens
            )
        )
        try:
            with (
                serving(app) as url,
                httpx.Client(
                    base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
                ) as http,
            ):
                yield http
        finally:
            source.close()


def job(http: httpx.Client, name: str) -> dict[str, Any]:
    answer = http.get(f"/api/v1/jobs/ml/{name}")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_the_api_names_each_pods_claims_and_allocated_devices_and_metrics_count_them(
    dra_cluster: Cluster, tmp_path: Path
) -> None:
    with dra_cluster.api_client() as api:
        core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
        allocate_by_hand(resource, "other", "node-b", range(2))  # another scheduler's claim
        for i in range(2):
            resource.create_namespaced_resource_claim("ml", gpu_and_nic_claim(f"train-{i}"))
            core.create_namespaced_pod("ml", claiming_pod(f"train-{i}", f"train-{i}", "train"))
        b200 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200"'
        resource.create_namespaced_resource_claim("ml", gpu_and_nic_claim("b200", b200))
        core.create_namespaced_pod("ml", claiming_pod("wants-b200", "b200"))
        config = replace(operator_config(), metrics_port=0)
        with operator_in_thread(dra_cluster, config) as operator:

            def running() -> list[Any]:
                pods = [p for p in core.list_namespaced_pod("ml").items if p.spec.node_name]
                chosen = all("voltpack.io/gpu-indices" in p.metadata.annotations for p in pods)
                return pods if len(pods) == 2 and chosen else []

            pods = wait_for(running, timeout_s=30, what="the gang of 2 bound")
            assert operator.metrics is not None
            target = f"127.0.0.1:{operator.metrics.port}"
            with running_prometheus(tmp_path, [target]) as prom:
                gpus = 'voltpack_dra_devices{driver="gpu.nvidia.com",kind="gpu",state="%s"}'
                nics = 'voltpack_dra_devices{driver="dra.net",kind="nic",state="%s"}'
                for expr, count in [
                    (gpus % "allocated", 4),  # 2 by voltpack, 2 by the other scheduler
                    (gpus % "free", 12),
                    (nics % "allocated", 2),
                    (nics % "free", 6),
                ]:
                    prom.wait_for_query(expr, lambda r, c=count: _value(r) == c)
                # the answer is not read: the emulator answers a Status, the client expects a claim
                resource.delete_namespaced_resource_claim("other", "ml", _preload_content=False)
                prom.wait_for_query(gpus % "allocated", lambda r: _value(r) == 2)
                prom.wait_for_query(gpus % "free", lambda r: _value(r) == 14)
                exposition = httpx.get(f"http://{target}/metrics", timeout=10).content
            check = promtool_check_metrics(exposition)
            assert check.returncode == 0, f"promtool:\n{check.stdout}{check.stderr}"
        published = devices_of(resource)
        with admin_api(dra_cluster, tmp_path) as http:
            train = job(http, "train")
            by_pod = {w["pod"]: w for w in train["workers"]}
            assert set(by_pod) == {"ml/train-0", "ml/train-1"}
            for pod in pods:
                worker = by_pod[f"ml/{pod.metadata.name}"]
                claim = resource.read_namespaced_resource_claim(pod.metadata.name, "ml")
                results = claim.status.allocation.devices.results
                assert [(c["name"], c["allocated"], c["node"]) for c in worker["claims"]] == [
                    (f"ml/{pod.metadata.name}", True, pod.spec.node_name)
                ]
                assert worker["claims"][0]["devices"] == worker["devices"]
                shown = [
                    (d["request"], d["driver"], d["pool"], d["device"]) for d in worker["devices"]
                ]
                assert shown == [(r.request, r.driver, r.pool, r.device) for r in results]
                gpu, nic = worker["devices"]
                for device in (gpu, nic):
                    assert device["binding"] == "allocated"
                    assert device["claim"] == f"ml/{pod.metadata.name}"
                    assert device["node"] == pod.spec.node_name
                    key = (device["driver"], device["pool"], device["device"])
                    assert device["pcie_root"] == published[key][PCIE_ROOT]
                assert (gpu["kind"], nic["kind"]) == ("gpu", "nic")
                assert gpu["pcie_root"] == nic["pcie_root"]
                assert str(gpu["gpu_index"]) == pod.metadata.annotations["voltpack.io/gpu-indices"]
                assert nic["gpu_index"] is None
            # the list shows the same as the job itself
            listed = http.get("/api/v1/jobs").json()
            assert next(j for j in listed if j["name"] == "train") == train
            waiting = job(http, "wants-b200")["workers"][0]
            assert waiting["node"] is None
            assert waiting["devices"] == []
            assert [(c["name"], c["allocated"], c["devices"]) for c in waiting["claims"]] == [
                ("ml/b200", False, [])
            ]


def test_a_device_plugin_pod_shows_voltpacks_choice_as_advisory_devices(
    plugin_cluster: Cluster, tmp_path: Path
) -> None:
    with plugin_cluster.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod("ml", pod_manifest("plugin", gpus=2))
        config = replace(operator_config(), metrics_port=0)
        with operator_in_thread(plugin_cluster, config) as operator:

            def bound() -> Any:
                pod = core.read_namespaced_pod("plugin", "ml")
                chosen = "voltpack.io/gpu-indices" in (pod.metadata.annotations or {})
                return pod if pod.spec.node_name and chosen else None

            pod = wait_for(bound, timeout_s=30, what="the pod bound")
            assert operator.metrics is not None
            scraped = httpx.get(f"http://127.0.0.1:{operator.metrics.port}/metrics", timeout=10)
            # no ResourceSlices: the gauge is declared, with no series
            assert "# TYPE voltpack_dra_devices gauge" in scraped.text
            assert "voltpack_dra_devices{" not in scraped.text
        indices = [int(i) for i in pod.metadata.annotations["voltpack.io/gpu-indices"].split(",")]
        with admin_api(plugin_cluster, tmp_path) as http:
            worker = job(http, "plugin")["workers"][0]
    assert worker["claims"] == []
    assert [(d["binding"], d["kind"], d["gpu_index"], d["node"]) for d in worker["devices"]] == [
        ("advisory", "gpu", index, "plain-a") for index in indices
    ]
    assert all(d["driver"] is None and d["claim"] is None for d in worker["devices"])


def _value(result: list[dict[str, Any]]) -> float | None:
    return float(result[0]["value"][1]) if len(result) == 1 else None
