"""The soak's fault proxy (tests/soak/proxy.py) on a real control plane, and the gang case it
found: a binding the apiserver accepted but whose answer the client lost (a 500 after the
fact) must not leave a gang partly bound.

Without the binaries (`make k8s`) it fails in CI and is skipped elsewhere, naming the target.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.integration.backends import RealCluster, settle
from tests.integration.conftest import operator_on, pod_manifest, wait_for
from tests.integration.services import missing_service
from tests.k8s_control_plane import bin_dir, missing_binaries
from tests.soak.plane import RestartablePlane, restartable_plane
from tests.soak.proxy import FaultProxy, running_proxy
from voltpack.model import Node
from voltpack.operator.runner import OperatorConfig
from voltpack.policies.schema import policy_for_strategy

WAIT_S = 30.0


@pytest.fixture(scope="module")
def plane() -> Iterator[RestartablePlane]:
    missing = missing_binaries(kwok=True)
    if missing:
        missing_service("kube-apiserver", f"{', '.join(missing)} not built in {bin_dir()}")
    with restartable_plane() as started:
        cluster = RealCluster(started.control_plane())
        cluster.ensure_namespace("voltpack-system")
        cluster.install_crds()
        cluster.add_gpu_nodes([Node.empty(f"a100-{i}", 64_000, 512_000, 8, "A100") for i in (0, 1)])
        yield started


@pytest.fixture
def proxy(plane: RestartablePlane) -> Iterator[FaultProxy]:
    with running_proxy(plane.url, plane.ca_file) as started:
        yield started


def through(proxy: FaultProxy, plane: RestartablePlane) -> client.ApiClient:
    configuration = client.Configuration(host=proxy.url)
    configuration.api_key = {"authorization": plane.token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(configuration)


def test_the_proxy_forwards_and_fails_bindings_and_expires_watches_on_command(
    plane: RestartablePlane, proxy: FaultProxy
) -> None:
    core = client.CoreV1Api(through(proxy, plane))
    core.create_namespaced_config_map("default", {"metadata": {"name": "via-proxy"}})
    assert core.read_namespaced_config_map("via-proxy", "default").metadata.name == "via-proxy"
    core.create_namespaced_pod("default", pod_manifest("lone", gpus=1))
    proxy.fail_bindings(1.0)
    body = {"metadata": {"name": "lone"}, "target": {"kind": "Node", "name": "a100-0"}}
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_binding("lone", "default", body, _preload_content=False)
    assert refused.value.status == 500
    assert core.read_namespaced_pod("lone", "default").spec.node_name is None  # not forwarded
    proxy.fail_bindings(0.0)

    listed = core.list_namespaced_config_map("default")
    stream = watch.Watch(return_type=object).stream(
        core.list_namespaced_config_map, "default",
        resource_version=listed.metadata.resource_version, timeout_seconds=20,
    )  # fmt: skip
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(next, stream)  # opens the watch and waits for an event
        wait_for(lambda: proxy.open_watches() >= 1, timeout_s=WAIT_S, what="the watch open")
        assert proxy.expire_watches() >= 1
        with pytest.raises(ApiException) as expired:
            first.result(timeout=WAIT_S)
    assert expired.value.status == 410
    core.delete_namespaced_pod("lone", "default", grace_period_seconds=0)


def test_a_binding_whose_answer_is_lost_does_not_leave_the_gang_partly_bound(
    plane: RestartablePlane, proxy: FaultProxy
) -> None:
    """The first member's binding goes through; the second is accepted by the apiserver but
    answered 500 (a lost response); then the proxy is quiet. Within a few cycles the gang must
    be whole or hold no GPU: the member the operator was told failed IS bound."""
    direct = client.CoreV1Api(RealCluster(plane.control_plane()).api_client())
    gang = {"voltpack.io/pod-group": "lost", "voltpack.io/min-members": "2"}
    for index in range(2):
        direct.create_namespaced_pod(
            "default", pod_manifest(f"lost-{index}", gpus=4, annotations=gang)
        )
    proxy.fail_bindings(0.0, 1.0, skip_first=1)
    config = OperatorConfig(
        policy=policy_for_strategy("best-fit"), identity="lost", namespace="voltpack-system",
        cycle_interval_s=0.05, lease_duration_s=2, power=False,
    )  # fmt: skip

    def bound() -> int:
        pods = direct.list_namespaced_pod("default").items
        return sum(1 for p in pods if p.metadata.name.startswith("lost-") and p.spec.node_name)

    with operator_on(through(proxy, plane), config):
        wait_for(lambda: proxy.stats.bindings_failed_after >= 1, timeout_s=WAIT_S,
                 what="a binding answered 500 after it took effect")  # fmt: skip
        proxy.fail_bindings(0.0, 0.0)
        settle(3.0)  # both members are bound now: let the operator act on the 500 it was told
        wait_for(
            lambda: bound() in (0, 2), timeout_s=WAIT_S,
            what="the gang whole or not bound at all",
            explain=lambda: f"{bound()} of 2 members bound",
        )  # fmt: skip
