"""Fixtures of the integration suite: a real emulator on 127.0.0.1 and clients talking to it.

Each test gets a fresh emulator (in-memory, so starting one takes milliseconds) serving in a
background thread on a free port, the official `kubernetes` client configured for it, and a
`kubectl` runner pointed at it with its own discovery cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.fakes.nvml import build_fake_nvml, load_in_process
from voltpack.api.server import serving  # noqa: F401 - shared by the API tests
from voltpack.emulator import EmulatorConfig, RunningEmulator, running_emulator
from voltpack.model import Node
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.schema import parse_policy

TIME_FACTOR = 0.001
"""Wall seconds per simulated second: a pod asking for 100 s finishes after 0.1 s."""

NODES = (
    Node.empty("gpu-a100-0", cpu_milli=64000, memory_mib=512000, gpu_count=8, gpu_model="A100"),
    Node.empty("gpu-a100-1", cpu_milli=64000, memory_mib=512000, gpu_count=8, gpu_model="A100"),
    Node.empty("gpu-v100-0", cpu_milli=32000, memory_mib=256000, gpu_count=4, gpu_model="V100M16"),
    Node.empty("cpu-0", cpu_milli=16000, memory_mib=65536, gpu_count=0, gpu_model=None),
)


@pytest.fixture
def emulator_config() -> EmulatorConfig:
    """Override in a test module to run the emulator with other settings."""
    return EmulatorConfig(time_factor=TIME_FACTOR, bookmark_interval_s=0.2)


@pytest.fixture
def emulator(emulator_config: EmulatorConfig) -> Iterator[RunningEmulator]:
    """A running emulator with four nodes; `.url`, `.faults`, `.drop_watches()`, ..."""
    with running_emulator(nodes=NODES, config=emulator_config) as running:
        yield running


@pytest.fixture
def api_client(emulator: RunningEmulator) -> Iterator[client.ApiClient]:
    configuration = client.Configuration(host=emulator.url)
    with client.ApiClient(configuration) as api:
        yield api


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def extensions(api_client: client.ApiClient) -> client.ApiextensionsV1Api:
    return client.ApiextensionsV1Api(api_client)


@pytest.fixture
def coordination(api_client: client.ApiClient) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(api_client)


@dataclass
class Kubectl:
    """Runs `kubectl --server <emulator>` with an empty kubeconfig and a private cache."""

    server: str
    home: Path

    def __call__(
        self, *args: str, input_text: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        kubeconfig = self.home / "kubeconfig"
        kubeconfig.touch()
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(self.home)}
        command = [
            KUBECTL,
            "--server",
            self.server,
            "--cache-dir",
            str(self.home / "cache"),
            "--request-timeout",
            "20s",
            *args,
        ]
        result = subprocess.run(
            command,
            input=input_text,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        if check:
            assert result.returncode == 0, (
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout}\n{result.stderr}"
            )
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json").stdout)


KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


@pytest.fixture
def kubectl(emulator: RunningEmulator, tmp_path: Path) -> Kubectl:
    assert Path(KUBECTL).exists(), "kubectl is required by the integration suite"
    return Kubectl(emulator.url, tmp_path)


def wait_for(
    condition: Callable[[], Any],
    *,
    timeout_s: float = 10.0,
    what: str = "condition",
    explain: Callable[[], str] | None = None,
) -> Any:
    """Poll until `condition()` is truthy and return it; fail after a generous deadline
    (`explain`: what the failure message adds, e.g. the state the wait saw last)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            detail = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"timed out waiting for {what}{detail}")
        time.sleep(0.01)


def gpu_job_manifest(name: str, workers: int, gpus: int, **spec: Any) -> dict[str, Any]:
    """A GPUJob in `default` with `workers` workers of `gpus` GPUs; `spec` adds fields."""
    return {
        "apiVersion": "voltpack.io/v1alpha1",
        "kind": "GPUJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "workers": workers,
            "gpusPerWorker": gpus,
            "template": {"spec": {"containers": [{"name": "w", "image": "trainer:1"}]}},
            **spec,
        },
    }


def pod_manifest(
    name: str,
    *,
    gpus: int = 0,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_name: str | None = None,
) -> dict[str, Any]:
    """A one-container pod, optionally asking for whole GPUs (`nvidia.com/gpu`)."""
    resources: dict[str, Any] = {"requests": {"cpu": "500m", "memory": "1Gi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": "registry.example/train:1.0", "resources": resources}
        ],
        "schedulerName": "voltpack",
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": spec,
    }


def binding(pod: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def watcher_count(emulator: RunningEmulator) -> int:
    """Open watch streams on the server (read on its loop)."""
    return emulator.call(lambda: len(emulator.state.store.watchers()))


@pytest.fixture(scope="session")
def fake_nvml_dir() -> Path:
    """The fake libnvidia-ml.so, built once and loaded into this process."""
    lib_dir = build_fake_nvml()
    load_in_process(lib_dir)
    return lib_dir


@contextmanager
def operator_thread(url: str, config: OperatorConfig) -> Iterator[Operator]:
    """An operator replica with its own API client, running in a thread; stopped on exit."""
    with operator_on(client.ApiClient(client.Configuration(host=url)), config) as operator:
        yield operator


@contextmanager
def operator_on(api: client.ApiClient, config: OperatorConfig, **kwargs: Any) -> Iterator[Operator]:
    """An operator replica on `api` (closed on exit), running in a thread; stopped on exit
    (`kwargs`: e.g. `power_clock`)."""
    operator = Operator(api, config, **kwargs)
    stop = threading.Event()
    thread = threading.Thread(target=operator.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield operator
    finally:
        stop.set()
        thread.join(timeout=15)
        api.close()


FAIR_SHARE_POLICY = """\
apiVersion: voltpack.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: fair-share}
spec:
  scoring: {strategy: best-fit}
  queueing: {ordering: fair-share, min_runtime_s: 0}
"""
"""Best-fit with fair-share queues and no minimum runtime: the cycle-driven tests' policy."""


@contextmanager
def cycle_driven_operator(url: str, policy_text: str, identity: str) -> Iterator[Operator]:
    """An operator whose caches watch the cluster while the test runs its cycles by hand
    (no loop thread, power off): deterministic cycle-by-cycle tests."""
    api = client.ApiClient(client.Configuration(host=url))
    config = OperatorConfig(
        policy=parse_policy(policy_text),
        identity=identity,
        namespace="voltpack-system",
        lease_duration_s=30,
        power=False,
    )
    operator = Operator(api, config)
    stop = threading.Event()
    for cache in (operator.nodes, operator.pods, operator.jobs, operator.queues):
        cache.start(stop)
    operator.nodes.wait_synced(20)
    operator.pods.wait_synced(20)
    try:
        yield operator
    finally:
        stop.set()
        operator.elector.release()
        api.close()


@contextmanager
def emulated_gpu_hosts(names: Iterable[str], gpu_model: str) -> Iterator[RunningEmulator]:
    """An emulator of 8-GPU hosts named `names` (fast clock, rare bookmarks)."""
    nodes = [
        Node.empty(name, cpu_milli=64000, memory_mib=512000, gpu_count=8, gpu_model=gpu_model)
        for name in names
    ]
    config = EmulatorConfig(time_factor=0.001, bookmark_interval_s=3600)
    with running_emulator(nodes=nodes, config=config) as running:
        yield running


def report_host_topology(
    custom: client.CustomObjectsApi, names: Iterable[str], topology: dict[str, Any]
) -> None:
    """A GPUNode per host whose status reports `topology` (NVLink domains, NUMA, NICs)."""
    for name in names:
        gpunode = {
            "apiVersion": "voltpack.io/v1alpha1",
            "kind": "GPUNode",
            "metadata": {"name": name},
            "spec": {"gpus": []},
        }
        custom.create_cluster_custom_object("voltpack.io", "v1alpha1", "gpunodes", gpunode)
        custom.patch_cluster_custom_object_status(
            "voltpack.io", "v1alpha1", "gpunodes", name, {"status": {"topology": topology}}
        )
