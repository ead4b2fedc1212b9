"""Pod attribution against a real gRPC server speaking the kubelet's pod-resources API.

The server implements the generated `PodResourcesListerServicer` on a Unix socket in tmp_path,
as the kubelet does on /var/lib/kubelet/pod-resources/kubelet.sock.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest

from voltpack.telemetry.exporter import PodRef
from voltpack.telemetry.podresources import api_pb2, api_pb2_grpc
from voltpack.telemetry.podresources.client import (
    CachedPodMapping,
    mapping_from_response,
    pod_gpu_mapping,
)


def devices(resource: str, *ids: str, numa: int = 0) -> api_pb2.ContainerDevices:
    return api_pb2.ContainerDevices(
        resource_name=resource,
        device_ids=list(ids),
        topology=api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=numa)]),
    )


PODS = [
    api_pb2.PodResources(
        name="trainer-0",
        namespace="ml",
        containers=[
            api_pb2.ContainerResources(
                name="main",
                devices=[
                    devices("nvidia.com/gpu", "GPU-aaaa", "GPU-bbbb"),
                    devices("rdma/hca_shared_devices_a", "hca0"),
                ],
                cpu_ids=[2, 3],
            ),
            api_pb2.ContainerResources(name="sidecar"),
        ],
    ),
    api_pb2.PodResources(
        name="llm-server-7f9c",
        namespace="serving",
        containers=[
            api_pb2.ContainerResources(
                name="vllm",
                devices=[devices("nvidia.com/gpu", "GPU-cccc::0", "GPU-cccc::1", numa=1)],
                memory=[api_pb2.ContainerMemory(memory_type="memory", size=1 << 30)],
            ),
        ],
    ),
    api_pb2.PodResources(name="web", namespace="default", containers=[]),
]


class FakeKubelet(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, pods: list[api_pb2.PodResources]) -> None:
        self.pods = pods
        self.calls = 0

    def List(  # noqa: N802 - the gRPC method name
        self, request: api_pb2.ListPodResourcesRequest, context: Any
    ) -> api_pb2.ListPodResourcesResponse:
        self.calls += 1
        return api_pb2.ListPodResourcesResponse(pod_resources=self.pods)


@pytest.fixture
def socket_path(tmp_path: Path) -> str:
    return str(tmp_path / "pod-resources" / "kubelet.sock")


@contextmanager
def serving(socket_path: str, servicer: FakeKubelet) -> Iterator[FakeKubelet]:
    Path(socket_path).parent.mkdir(parents=True, exist_ok=True)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    assert server.add_insecure_port(f"unix://{socket_path}") == 1
    server.start()
    try:
        yield servicer
    finally:
        server.stop(grace=None).wait()


@pytest.fixture
def kubelet(socket_path: str) -> Iterator[FakeKubelet]:
    with serving(socket_path, FakeKubelet(list(PODS))) as servicer:
        yield servicer


EXPECTED = {
    "GPU-aaaa": PodRef(namespace="ml", pod="trainer-0", container="main"),
    "GPU-bbbb": PodRef(namespace="ml", pod="trainer-0", container="main"),
    "GPU-cccc": PodRef(namespace="serving", pod="llm-server-7f9c", container="vllm"),
}


def test_mapping_from_a_kubelet(kubelet: FakeKubelet, socket_path: str) -> None:
    assert pod_gpu_mapping(socket_path) == EXPECTED
    assert kubelet.calls == 1


def test_only_the_named_resources_count(kubelet: FakeKubelet, socket_path: str) -> None:
    assert pod_gpu_mapping(socket_path, resource_names=("rdma/hca_shared_devices_a",)) == {
        "hca0": PodRef(namespace="ml", pod="trainer-0", container="main")
    }
    assert pod_gpu_mapping(socket_path, resource_names=("amd.com/gpu",)) == {}


def test_missing_socket_gives_an_empty_mapping_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = str(tmp_path / "absent.sock")
    with caplog.at_level(logging.WARNING):
        assert pod_gpu_mapping(path) == {}
        assert pod_gpu_mapping(path) == {}
    warnings = [r for r in caplog.records if path in r.getMessage()]
    assert len(warnings) == 1
    assert "socket not found" in warnings[0].getMessage()


def test_dead_socket_gives_an_empty_mapping(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "stale.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.close()  # the file stays, nobody listens: a kubelet that went away
    with caplog.at_level(logging.WARNING):
        assert pod_gpu_mapping(str(path), timeout_s=5) == {}
        assert pod_gpu_mapping(str(path), timeout_s=5) == {}
    assert len([r for r in caplog.records if str(path) in r.getMessage()]) == 1


def test_kubelet_going_away_and_coming_back(
    socket_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO), serving(socket_path, FakeKubelet(list(PODS))) as kubelet:
        assert pod_gpu_mapping(socket_path) == EXPECTED
        kubelet.pods = []
        assert pod_gpu_mapping(socket_path) == {}  # answered: nothing assigned
    assert not caplog.records
    with caplog.at_level(logging.INFO):
        assert pod_gpu_mapping(socket_path) == {}  # down
        assert pod_gpu_mapping(socket_path) == {}
        with serving(socket_path, FakeKubelet(list(PODS))):
            assert pod_gpu_mapping(socket_path) == EXPECTED  # back
    levels = [r.levelname for r in caplog.records if socket_path in r.getMessage()]
    assert levels == ["WARNING", "INFO"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_cached_provider_asks_at_most_once_per_period(
    kubelet: FakeKubelet, socket_path: str
) -> None:
    clock = FakeClock()
    provider = CachedPodMapping(socket_path, refresh_s=10, clock=clock)
    assert provider() == EXPECTED
    kubelet.pods = PODS[1:]
    clock.now += 9.5
    assert provider() == EXPECTED  # cached
    assert kubelet.calls == 1
    clock.now += 0.5
    assert set(provider()) == {"GPU-cccc"}  # refreshed
    assert kubelet.calls == 2
    provider.invalidate()
    assert set(provider()) == {"GPU-cccc"}
    assert kubelet.calls == 3


def test_cached_provider_is_empty_while_the_kubelet_is_down(socket_path: str) -> None:
    clock = FakeClock()
    provider = CachedPodMapping(socket_path, refresh_s=10, clock=clock)
    assert provider() == {}
    clock.now += 10
    assert provider() == {}


def test_response_parsing_without_a_server() -> None:
    response = api_pb2.ListPodResourcesResponse(pod_resources=PODS)
    assert mapping_from_response(response) == EXPECTED
    # the wire format is the kubelet's: a round trip through bytes keeps everything
    again = api_pb2.ListPodResourcesResponse.FromString(response.SerializeToString())
    assert again.pod_resources[1].containers[0].devices[0].topology.nodes[0].ID == 1
