"""The operator against the emulator, driven only through the official client and kubectl."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import (
    Kubectl,
    gpu_job_manifest,
    operator_thread,
    pod_manifest,
    wait_for,
)
from voltpack.emulator import EmulatorConfig, RunningEmulator, running_emulator
from voltpack.model import Node
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.schema import policy_for_strategy

LEASE_NAMESPACE = "voltpack-system"


@contextmanager
def running_operator(
    emulator: RunningEmulator, identity: str = "op-a", strategy: str = "best-fit"
) -> Iterator[Operator]:
    """An operator replica in a thread, with its own API client; stopped on exit."""
    config = OperatorConfig(
        policy=policy_for_strategy(strategy),
        identity=identity,
        namespace=LEASE_NAMESPACE,
        cycle_interval_s=0.05,
        lease_duration_s=2,
    )
    with operator_thread(emulator.url, config) as operator:
        yield operator


@pytest.fixture
def emulator_config() -> EmulatorConfig:
    """No periodic bookmarks: a bookmark sent between the compaction and the dropped watch
    would legitimately carry the cache past the compaction, and the 410 test would see none."""
    return EmulatorConfig(time_factor=0.001, bookmark_interval_s=3600)


@pytest.fixture(autouse=True)
def lease_namespace(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": LEASE_NAMESPACE}})


def pods_of(core: client.CoreV1Api, prefix: str) -> list[Any]:
    return [
        p for p in core.list_namespaced_pod("default").items if p.metadata.name.startswith(prefix)
    ]


def bound(core: client.CoreV1Api, prefix: str) -> list[Any]:
    return [p for p in pods_of(core, prefix) if p.spec.node_name]


def gpu_usage_is_consistent(core: client.CoreV1Api) -> None:
    """No GPU index is given twice on a node, and no node gives more GPUs than it has."""
    capacity = {
        n.metadata.name: int(n.status.capacity.get("nvidia.com/gpu", "0"))
        for n in core.list_node().items
    }
    used: Counter[tuple[str, int]] = Counter()
    for pod in core.list_pod_for_all_namespaces().items:
        if not pod.spec.node_name or pod.status.phase in ("Succeeded", "Failed"):
            continue
        indices = (pod.metadata.annotations or {}).get("voltpack.io/gpu-indices") or ""
        for index in filter(None, indices.split(",")):
            used[(pod.spec.node_name, int(index))] += 1
            assert int(index) < capacity[pod.spec.node_name]
    assert all(count == 1 for count in used.values()), used


def test_a_gang_of_eight_binds_together(emulator: RunningEmulator, core: client.CoreV1Api) -> None:
    gang = {"voltpack.io/pod-group": "train", "voltpack.io/min-members": "8"}
    for index in range(8):
        core.create_namespaced_pod(
            "default", pod_manifest(f"train-{index}", gpus=2, annotations=gang)
        )
    with running_operator(emulator):
        wait_for(lambda: len(bound(core, "train-")) == 8, timeout_s=30, what="the gang to bind")
    gpu_usage_is_consistent(core)


def test_a_gang_that_cannot_fit_binds_nothing_and_says_why(
    emulator: RunningEmulator, core: client.CoreV1Api, kubectl: Kubectl
) -> None:
    gang = {"voltpack.io/pod-group": "huge"}
    for index in range(8):
        core.create_namespaced_pod(
            "default", pod_manifest(f"huge-{index}", gpus=3, annotations=gang)
        )
    core.create_namespaced_pod("default", pod_manifest("small", gpus=1))
    with running_operator(emulator) as operator:
        wait_for(lambda: len(bound(core, "small")) == 1, timeout_s=30, what="the small pod")
        wait_for(lambda: operator.stats.events >= 8, timeout_s=30, what="events for the gang")
    assert bound(core, "huge-") == []
    events = kubectl.json("get", "events", "-n", "default")["items"]
    reasons = {e["involvedObject"]["name"]: e for e in events if e["reason"] == "FailedScheduling"}
    assert set(reasons) >= {f"huge-{i}" for i in range(8)}
    assert "gang default/huge" in reasons["huge-0"]["message"]
    assert reasons["huge-0"]["source"]["component"] == "voltpack"


def test_restarting_the_operator_loses_and_double_binds_nothing(
    emulator: RunningEmulator, core: client.CoreV1Api
) -> None:
    for index in range(30):
        core.create_namespaced_pod("default", pod_manifest(f"job-{index:02d}", gpus=1))
    with running_operator(emulator, "op-a") as first:
        wait_for(lambda: first.stats.bound >= 5, timeout_s=30, what="some bindings")
    # a crash-like stop mid-run; a new replica rebuilds everything from the cluster
    for index in range(30, 40):
        core.create_namespaced_pod("default", pod_manifest(f"job-{index:02d}", gpus=1))
    with running_operator(emulator, "op-b") as second:
        wait_for(lambda: len(bound(core, "job-")) == 20, timeout_s=20, what="20 GPUs filled")
        wait_for(lambda: second.stats.cycles > 3, timeout_s=30, what="more cycles")
    assert first.stats.bind_failures == 0 and second.stats.bind_failures == 0
    assert len(bound(core, "job-")) == 20  # 2 x 8 A100 + 4 V100 GPUs, one pod each
    gpu_usage_is_consistent(core)


def test_two_replicas_never_both_lead(
    emulator: RunningEmulator, core: client.CoreV1Api, coordination: client.CoordinationV1Api
) -> None:
    for index in range(12):
        core.create_namespaced_pod("default", pod_manifest(f"r-{index:02d}", gpus=1))
    with running_operator(emulator, "op-a") as a, running_operator(emulator, "op-b") as b:
        both = 0
        for _ in range(200):
            both += a.elector.is_leader() and b.elector.is_leader()
            threading.Event().wait(0.005)
        wait_for(lambda: len(bound(core, "r-")) == 12, timeout_s=30, what="all pods bound")
        lease = coordination.read_namespaced_lease("voltpack-scheduler", LEASE_NAMESPACE)
        leader = a if a.elector.is_leader() else b
        assert lease.spec.holder_identity == leader.config.identity
    assert both == 0
    assert a.stats.bound + b.stats.bound == 12
    assert min(a.stats.bound, b.stats.bound) == 0
    gpu_usage_is_consistent(core)


def test_a_watch_ended_with_410_is_recovered(
    emulator: RunningEmulator, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod("default", pod_manifest("before", gpus=1))
    with running_operator(emulator) as operator:
        wait_for(lambda: len(bound(core, "before")) == 1, timeout_s=30, what="first pod")
        relists = operator.pods.relists
        emulator.compact_history()
        emulator.drop_watches()
        # the dropped watch is re-opened from an expired resourceVersion (410) at once; at the
        # latest the watch's own 30 s timeout re-opens it, so a loaded machine still passes
        wait_for(lambda: operator.pods.relists > relists, timeout_s=45, what="a re-list after 410")
        core.create_namespaced_pod("default", pod_manifest("after", gpus=1))
        wait_for(
            lambda: len(bound(core, "after")) == 1, timeout_s=30, what="a pod after the re-list"
        )


def test_a_gpujob_that_violates_its_schema_is_rejected_naming_the_field(
    emulator: RunningEmulator,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
) -> None:
    install_crds(extensions)
    with pytest.raises(ApiException) as error:
        custom.create_namespaced_custom_object(
            "voltpack.io",
            "v1alpha1",
            "default",
            "gpujobs",
            gpu_job_manifest("bad", workers=0, gpus=1),
        )
    assert error.value.status == 422
    assert "spec.workers" in error.value.body


def test_gpujobs_run_and_an_unplaceable_one_reports_why(
    emulator: RunningEmulator,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
    kubectl: Kubectl,
) -> None:
    install_crds(extensions)
    custom.create_namespaced_custom_object(
        "voltpack.io", "v1alpha1", "default", "gpujobs", gpu_job_manifest("fits", workers=4, gpus=4)
    )
    custom.create_namespaced_custom_object(
        "voltpack.io",
        "v1alpha1",
        "default",
        "gpujobs",
        gpu_job_manifest("never", workers=3, gpus=8),
    )

    def job(name: str) -> dict[str, Any]:
        return custom.get_namespaced_custom_object(  # type: ignore[no-any-return]
            "voltpack.io", "v1alpha1", "default", "gpujobs", name
        )

    with running_operator(emulator):
        wait_for(
            lambda: job("fits").get("status", {}).get("phase") in ("Scheduled", "Running"),
            timeout_s=20,
            what="job 'fits' scheduled",
        )
        wait_for(
            lambda: (
                (job("never").get("status", {}).get("conditions") or [{}])[0].get("reason")
                == "Unschedulable"
            ),
            timeout_s=20,
            what="job 'never' to report why",
        )
    fits = job("fits")["status"]
    assert len(fits["placement"]) == 4
    assert sum(len(p["gpus"]) for p in fits["placement"]) == 16
    condition = job("never")["status"]["conditions"][0]
    assert condition["status"] == "False"
    assert "gang default/never" in condition["message"]
    listed = kubectl("get", "gpujobs", "-n", "default").stdout
    assert "fits" in listed and "never" in listed
    events = kubectl.json("get", "events", "-n", "default")["items"]
    job_events = [e for e in events if e["involvedObject"]["kind"] == "GPUJob"]
    assert job_events and job_events[0]["involvedObject"]["name"] == "never"
    assert "gang default/never" in job_events[0]["message"]
    gpu_usage_is_consistent(core)


def test_a_killed_operator_process_loses_nothing(tmp_path: Path) -> None:
    """SIGKILL an operator process mid-run; a new one finishes the work once the Lease expires."""
    nodes = [Node.empty(f"n{i:02d}", 64_000, 512_000, 8, "A100") for i in range(40)]
    with running_emulator(nodes=nodes, config=EmulatorConfig(lifecycle=False)) as emulator:
        api = client.ApiClient(client.Configuration(host=emulator.url))
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": LEASE_NAMESPACE}})
        for index in range(300):
            core.create_namespaced_pod("default", pod_manifest(f"k-{index:03d}", gpus=1))

        def operator_process(identity: str) -> subprocess.Popen[bytes]:
            command = [
                sys.executable, "-m", "voltpack", "operator", "--server", emulator.url,
                "--policy", "best-fit", "--identity", identity, "--lease-seconds", "2",
                "--metrics-port", "0",
            ]  # fmt: skip
            return subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"{identity}.log", "w")
            )

        first = operator_process("victim")
        try:
            wait_for(lambda: len(bound(core, "k-")) >= 20, timeout_s=60, what="first bindings")
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=10)
        finally:
            first.kill()
        after_kill = len(bound(core, "k-"))
        assert after_kill < 300, "the victim finished before it could be killed"
        second = operator_process("successor")
        try:
            wait_for(lambda: len(bound(core, "k-")) == 300, timeout_s=90, what="all 300 bound")
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=20)
        lease = client.CoordinationV1Api(api).read_namespaced_lease(
            "voltpack-scheduler", LEASE_NAMESPACE
        )
        assert lease.spec.holder_identity in (None, "successor")  # released on SIGTERM
        gpu_usage_is_consistent(core)
        api.close()


def test_deleting_a_gpujob_removes_its_workers_through_the_finalizer(
    emulator: RunningEmulator,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
) -> None:
    install_crds(extensions)
    custom.create_namespaced_custom_object(
        "voltpack.io",
        "v1alpha1",
        "default",
        "gpujobs",
        gpu_job_manifest("short", workers=2, gpus=1),
    )
    with running_operator(emulator):
        wait_for(lambda: len(bound(core, "short-worker-")) == 2, timeout_s=30, what="workers bound")
        job = custom.get_namespaced_custom_object(
            "voltpack.io", "v1alpha1", "default", "gpujobs", "short"
        )
        assert "voltpack.io/worker-cleanup" in job["metadata"]["finalizers"]
        custom.delete_namespaced_custom_object(
            "voltpack.io", "v1alpha1", "default", "gpujobs", "short"
        )

        def gone() -> bool:
            try:
                custom.get_namespaced_custom_object(
                    "voltpack.io", "v1alpha1", "default", "gpujobs", "short"
                )
            except ApiException as error:
                return error.status == 404
            return False

        wait_for(gone, timeout_s=20, what="the job to be deleted")
        wait_for(lambda: pods_of(core, "short-worker-") == [], timeout_s=20, what="workers gone")


def test_the_emulator_answers_a_binding_as_a_real_server_does(
    emulator: RunningEmulator, core: client.CoreV1Api
) -> None:
    """kubernetes-client/python#825: the client cannot parse the Status a binding returns.

    voltpack reads the reply raw; this pins the server behaviour that makes that necessary, so
    a regression in either place shows.
    """
    core.create_namespaced_pod("default", pod_manifest("parsed", gpus=1))
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "parsed"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-a100-0"},
    }
    with pytest.raises(ValueError, match="target"):
        core.create_namespaced_binding("default", body)
    assert core.read_namespaced_pod("parsed", "default").spec.node_name == "gpu-a100-0"
