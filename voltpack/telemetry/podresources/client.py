"""Which pod holds which GPU, from the kubelet's pod-resources API (v1) on a Unix socket.

The kubelet serves `v1.PodResourcesLister` on /var/lib/kubelet/pod-resources/kubelet.sock;
the agent's DaemonSet mounts that directory read-only. `List` returns every pod on the node
with, per container, the device ids each device plugin assigned to it. The NVIDIA device
plugin reports GPU UUIDs (`GPU-...`), or `GPU-...::<n>` for a time-sliced replica, which is
read as the GPU itself; other plugins report what they report (AMD's, PCI addresses).

The kubelet being absent or down is normal (a node without the socket mounted, a kubelet
restart): the mapping is then empty and the failure is logged once until the kubelet answers
again. Nothing here raises into the agent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]

from voltpack.telemetry.exporter import PodRef
from voltpack.telemetry.podresources import DEFAULT_SOCKET, api_pb2, api_pb2_grpc

_log = logging.getLogger(__name__)

GPU_RESOURCE_NAMES: tuple[str, ...] = ("nvidia.com/gpu", "amd.com/gpu")
_REPLICA_SEPARATOR = "::"

_failing: set[str] = set()
_failing_lock = threading.Lock()


def _failed(socket_path: str, reason: str) -> None:
    with _failing_lock:
        first = socket_path not in _failing
        _failing.add(socket_path)
    if first:
        _log.warning(
            "pod attribution off: kubelet pod-resources API at %s: %s (GPU metrics carry no "
            "pod labels until it answers; mount /var/lib/kubelet/pod-resources into the agent)",
            socket_path,
            reason,
        )


def _recovered(socket_path: str) -> None:
    with _failing_lock:
        was_failing = socket_path in _failing
        _failing.discard(socket_path)
    if was_failing:
        _log.info("pod attribution on: kubelet pod-resources API at %s answers", socket_path)


def mapping_from_response(
    response: api_pb2.ListPodResourcesResponse, resource_names: Iterable[str] = GPU_RESOURCE_NAMES
) -> dict[str, PodRef]:
    """Device id -> the container it is assigned to, for the named resources.

    A device shared by several containers (time-slicing) goes to the first one listed.
    """
    wanted = set(resource_names)
    mapping: dict[str, PodRef] = {}
    for pod in response.pod_resources:
        for container in pod.containers:
            ref = PodRef(namespace=pod.namespace, pod=pod.name, container=container.name)
            for devices in container.devices:
                if devices.resource_name not in wanted:
                    continue
                for device_id in devices.device_ids:
                    key = device_id.split(_REPLICA_SEPARATOR, 1)[0]
                    mapping.setdefault(key, ref)
    return mapping


def _list(socket_path: str, timeout_s: float) -> api_pb2.ListPodResourcesResponse | None:
    if not Path(socket_path).exists():
        _failed(socket_path, "socket not found")
        return None
    try:
        with grpc.insecure_channel(f"unix://{socket_path}") as channel:
            stub: Any = api_pb2_grpc.PodResourcesListerStub(channel)  # type: ignore[no-untyped-call]
            response: api_pb2.ListPodResourcesResponse = stub.List(
                api_pb2.ListPodResourcesRequest(), timeout=timeout_s
            )
    except grpc.RpcError as exc:
        code = exc.code() if isinstance(exc, grpc.Call) else None
        detail = exc.details() if isinstance(exc, grpc.Call) else str(exc)
        _failed(socket_path, f"{getattr(code, 'name', 'error')}: {detail}")
        return None
    except Exception as exc:  # never let attribution take the agent down
        _log.debug("pod-resources List failed", exc_info=True)
        _failed(socket_path, f"{type(exc).__name__}: {exc}")
        return None
    _recovered(socket_path)
    return response


def pod_gpu_mapping(
    socket_path: str = DEFAULT_SOCKET,
    resource_names: Iterable[str] = GPU_RESOURCE_NAMES,
    timeout_s: float = 2,
) -> dict[str, PodRef]:
    """GPU device id (UUID for NVIDIA) -> the container it is assigned to; empty on failure."""
    response = _list(socket_path, timeout_s)
    if response is None:
        return {}
    return mapping_from_response(response, resource_names)


class CachedPodMapping:
    """A `PodMapping` for the exporter: asks the kubelet at most once every `refresh_s`.

    Called once per scrape; between refreshes it returns the last answer. When the kubelet
    does not answer, the mapping is empty (a stale one could name a pod that has since
    released the GPU). Thread-safe: concurrent scrapes share one request.
    """

    def __init__(
        self,
        socket_path: str = DEFAULT_SOCKET,
        resource_names: Iterable[str] = GPU_RESOURCE_NAMES,
        *,
        timeout_s: float = 2,
        refresh_s: float = 10,
        clock: Callable[[], float] = time.monotonic,
        fetch: Callable[[], Mapping[str, PodRef]] | None = None,
    ) -> None:
        names = tuple(resource_names)
        self._fetch: Callable[[], Mapping[str, PodRef]] = fetch or (
            lambda: pod_gpu_mapping(socket_path, names, timeout_s)
        )
        self._refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._mapping: Mapping[str, PodRef] = {}
        self._fetched_at: float | None = None

    def __call__(self) -> Mapping[str, PodRef]:
        with self._lock:
            now = self._clock()
            if self._fetched_at is None or now - self._fetched_at >= self._refresh_s:
                self._mapping = dict(self._fetch())
                self._fetched_at = now
            return self._mapping

    def invalidate(self) -> None:
        """Make the next call ask the kubelet again (e.g. after a pod event)."""
        with self._lock:
            self._fetched_at = None
