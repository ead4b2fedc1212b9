"""The operator's scenarios on both backends: voltpack's emulator and a real control plane
(kube-apiserver + etcd + kwok, built by `make k8s`), through the official client and kubectl.

Each scenario runs once per backend (`cluster` is parametrised). The real plane is started once
for the module and emptied between tests (`RealCluster.reset`); the emulator is fresh per test.
Without binaries the real half fails in CI and is skipped elsewhere, naming `make k8s`.

Found on the real apiserver: the Priority admission plugin refuses a pod whose `spec.priority`
its PriorityClass (none: 0) does not give (403), which the emulator accepts, so voltpack puts a
pod's priority in the `voltpack.io/priority` annotation; and etcd compaction alone never makes a
resumed watch expire while the watch cache is on (the default), hence `uncached_plane`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.fakes.nvml import STATE_ENV, FakeGpu, write_state
from tests.fakes.state_file import update_state
from tests.integration.backends import (
    Cluster,
    EmulatorCluster,
    RealCluster,
    operator_in_thread,
    settle,
    wait_gone,
)
from tests.integration.conftest import gpu_job_manifest, pod_manifest, serving, wait_for
from tests.integration.services import started_control_plane
from tests.integration.test_operator import bound, gpu_usage_is_consistent, pods_of
from tests.integration.test_power_loop import (
    BUDGET,
    BUDGET_W,
    HIGH,
    LOCK_MHZ,
    LOW,
    NODE,
    RACK_LABEL,
    Agent,
    FakeClock,
    power_budget,
)
from tests.integration.test_power_loop import POLICY as POWER_POLICY
from tests.k8s_control_plane import ControlPlane
from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import KubernetesAuth
from voltpack.emulator import EmulatorConfig, running_emulator
from voltpack.model import Node
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.operator.gpunode_sync import GpuNodeSync
from voltpack.operator.kube import cache
from voltpack.operator.runner import OperatorConfig
from voltpack.policies.schema import (
    example_policy_path,
    load_policy,
    parse_policy,
    policy_for_strategy,
)
from voltpack.telemetry.nvml import NvmlBackend

GROUP, VERSION = "voltpack.io", "v1alpha1"
EXAMPLE_ROLES = Path(__file__).resolve().parents[2] / "examples" / "rbac" / "voltpack-roles.yaml"
LEASE_NAMESPACE = "voltpack-system"
BACKENDS = ["emulator", "real"]
WAIT_S = 30.0
PREEMPTION_POLICY = """\
apiVersion: voltpack.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: preemption}
spec:
  scoring: {strategy: best-fit}
  queueing: {min_runtime_s: 0, priority_preemption: true}
"""


def a100s(count: int, prefix: str = "a100") -> list[Node]:
    return [Node.empty(f"{prefix}-{i}", 64_000, 512_000, 8, "A100") for i in range(count)]


def _real_plane(*apiserver_args: str) -> Iterator[ControlPlane]:
    yield from started_control_plane(kwok=True, extra_apiserver_args=apiserver_args)


@pytest.fixture(scope="module")
def real_plane() -> Iterator[ControlPlane]:
    """One real control plane for the whole module (the launcher's apiserver settings)."""
    yield from _real_plane()


@pytest.fixture(scope="module")
def uncached_plane() -> Iterator[ControlPlane]:
    """A real plane whose apiserver sends watches to etcd (no watch cache): the only way
    etcd compaction reaches a resumed watch as 410 (the watch cache serves its own window)."""
    yield from _real_plane("--watch-cache=false")


def _cluster(
    kind: str, plane_fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Cluster]:
    """A fresh emulator, or the module's real plane emptied; voltpack-system and the CRDs."""
    if kind == "emulator":
        config = EmulatorConfig(time_factor=0.001, bookmark_interval_s=3600)
        with running_emulator(nodes=[], config=config) as emulator:
            cluster: Cluster = EmulatorCluster(emulator, tmp_path)
            cluster.ensure_namespace(LEASE_NAMESPACE)
            cluster.install_crds()
            yield cluster
        return
    real = RealCluster(request.getfixturevalue(plane_fixture))
    real.reset()
    real.ensure_namespace(LEASE_NAMESPACE)
    real.install_crds()
    try:
        yield real
    finally:
        real.reset()


@pytest.fixture(params=BACKENDS)
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    yield from _cluster(request.param, "real_plane", request, tmp_path)


@pytest.fixture(params=BACKENDS)
def expiring_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    yield from _cluster(request.param, "uncached_plane", request, tmp_path)


@pytest.fixture
def api(cluster: Cluster) -> Iterator[client.ApiClient]:
    with cluster.api_client() as api_client:
        yield api_client


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def operator_config(
    identity: str = "op-a", policy: str = "best-fit", **extra: Any
) -> OperatorConfig:
    parsed = parse_policy(policy) if "\n" in policy else policy_for_strategy(policy)
    settings: dict[str, Any] = {"cycle_interval_s": 0.05, "lease_duration_s": 2, "power": False}
    return OperatorConfig(policy=parsed, identity=identity, namespace=LEASE_NAMESPACE,
                          **{**settings, **extra})  # fmt: skip


def events(core: client.CoreV1Api, reason: str, namespace: str = "default") -> list[Any]:
    return [e for e in core.list_namespaced_event(namespace).items if e.reason == reason]


def failed_scheduling(core: client.CoreV1Api, pod: str) -> list[Any]:
    """The pod's FailedScheduling Events, once there is one."""
    found: list[Any] = wait_for(
        lambda: [e for e in events(core, "FailedScheduling") if e.involved_object.name == pod],
        timeout_s=WAIT_S,
        what=f"a FailedScheduling Event on {pod}",
    )
    return found


def get_job(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", name)  # type: ignore[no-any-return]


def create_job(custom: client.CustomObjectsApi, body: dict[str, Any]) -> dict[str, Any]:
    return custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", body)  # type: ignore[no-any-return]


def test_chart_crds_are_served_and_validate_gpujobs(
    cluster: Cluster, custom: client.CustomObjectsApi
) -> None:
    names = cluster.install_crds()  # again: existing CRDs are kept
    assert "gpujobs.voltpack.io" in names and "gpunodes.voltpack.io" in names
    with pytest.raises(ApiException) as refused:
        create_job(custom, gpu_job_manifest("bad", workers=0, gpus=1))
    assert refused.value.status == 422
    assert "spec.workers" in refused.value.body
    created = create_job(custom, gpu_job_manifest("good", workers=2, gpus=1))
    assert get_job(custom, "good")["metadata"]["uid"] == created["metadata"]["uid"]
    if isinstance(cluster, RealCluster):  # the emulator does not evaluate CEL rules
        with pytest.raises(ApiException) as cel:
            create_job(custom, gpu_job_manifest("cel", workers=2, gpus=1, minWorkers=3))
        assert cel.value.status == 422
        assert "minWorkers must not exceed workers" in cel.value.body


def test_a_gang_binds_whole_and_one_that_cannot_fit_binds_nothing(
    cluster: Cluster, core: client.CoreV1Api, tmp_path: Path
) -> None:
    cluster.add_gpu_nodes(a100s(2))
    for index in range(4):
        gang = {"voltpack.io/pod-group": "train", "voltpack.io/min-members": "4"}
        core.create_namespaced_pod(
            "default", pod_manifest(f"train-{index}", gpus=2, annotations=gang)
        )
    for index in range(8):  # 24 GPUs: more than the 16 there are
        gang = {"voltpack.io/pod-group": "huge"}
        core.create_namespaced_pod(
            "default", pod_manifest(f"huge-{index}", gpus=3, annotations=gang)
        )
    with operator_in_thread(cluster, operator_config()) as operator:
        wait_for(lambda: len(bound(core, "train-")) == 4, timeout_s=WAIT_S, what="the gang bound")
        wait_for(
            lambda: (
                {e.involved_object.name for e in events(core, "FailedScheduling")}
                >= {f"huge-{i}" for i in range(8)}
            ),
            timeout_s=WAIT_S,
            what="a FailedScheduling Event on every pod of the gang that cannot fit",
        )
        wait_for(
            lambda: all(p.status.phase == "Running" for p in pods_of(core, "train-")),
            timeout_s=WAIT_S,
            what="the gang running",
        )
    assert operator.stats.bind_failures == 0
    assert bound(core, "huge-") == []
    listed = cluster.kubectl(tmp_path / "kubectl").json("get", "events", "-n", "default")["items"]
    failed = {e["involvedObject"]["name"]: e for e in listed if e["reason"] == "FailedScheduling"}
    assert set(failed) >= {f"huge-{i}" for i in range(8)}
    assert "gang default/huge" in failed["huge-0"]["message"]
    assert failed["huge-0"]["source"]["component"] == "voltpack"
    assert failed["huge-0"]["type"] == "Warning"
    # kube-scheduler's Normal Scheduled Event on each bound pod (posted raw, without the client)
    scheduled = {e["involvedObject"]["name"]: e for e in listed if e["reason"] == "Scheduled"}
    assert set(scheduled) == {f"train-{i}" for i in range(4)}
    first = core.read_namespaced_pod("train-0", "default")
    assert scheduled["train-0"]["message"] == (
        f"Successfully assigned default/train-0 to {first.spec.node_name}"
    )
    assert scheduled["train-0"]["type"] == "Normal"
    assert scheduled["train-0"]["involvedObject"]["uid"] == first.metadata.uid
    # PodScheduled=False on the pods that wait (what cluster-autoscaler reads)
    waiting = core.read_namespaced_pod("huge-0", "default").status.conditions or []
    [condition] = [c for c in waiting if c.type == "PodScheduled"]
    assert (condition.status, condition.reason) == ("False", "Unschedulable")
    # the newest reason (an Event of an earlier cycle may say fewer fitted pods)
    assert condition.message.startswith("gang default/huge: only ")
    assert "nodes are available" in condition.message
    gpu_usage_is_consistent(core)


def test_gpujobs_get_conditions_owned_workers_and_a_finalizer_that_cleans_up(
    cluster: Cluster, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    cluster.add_gpu_nodes(a100s(2))
    fits = create_job(custom, gpu_job_manifest("fits", workers=2, gpus=4))
    create_job(custom, gpu_job_manifest("never", workers=3, gpus=8))
    with operator_in_thread(cluster, operator_config()):
        wait_for(
            lambda: (
                get_job(custom, "fits").get("status", {}).get("phase") in ("Scheduled", "Running")
            ),
            timeout_s=WAIT_S,
            what="job 'fits' scheduled",
        )
        never = wait_for(
            lambda: next(
                (c for c in get_job(custom, "never").get("status", {}).get("conditions") or []
                 if c.get("reason") == "Unschedulable"),
                None,
            ),
            timeout_s=WAIT_S,
            what="job 'never' to say why",
        )  # fmt: skip
        assert never["status"] == "False" and "gang default/never" in never["message"]
        job_events = wait_for(
            lambda: [
                e for e in events(core, "FailedScheduling") if e.involved_object.kind == "GPUJob"
            ],
            timeout_s=WAIT_S,
            what="a FailedScheduling Event on a GPUJob",
        )
        assert {e.involved_object.name for e in job_events} == {"never"}
        assert "gang default/never" in job_events[0].message

        workers = bound(core, "fits-worker-")
        assert len(workers) == 2
        for worker in workers:
            (owner,) = worker.metadata.owner_references
            assert (owner.kind, owner.name, owner.uid) == (
                "GPUJob",
                "fits",
                fits["metadata"]["uid"],
            )
            assert owner.controller is True
        assert "voltpack.io/worker-cleanup" in get_job(custom, "fits")["metadata"]["finalizers"]

        # no garbage collector runs on the real plane: the operator itself removes the workers
        for name in ("fits", "never"):
            custom.delete_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", name)
        for name in ("fits", "never"):
            wait_gone(custom.get_namespaced_custom_object, GROUP, VERSION, "default", "gpujobs",
                      name, what=f"GPUJob {name} deleted")  # fmt: skip
        wait_for(lambda: pods_of(core, "fits-") == [] and pods_of(core, "never-") == [],
                 timeout_s=WAIT_S, what="the workers deleted")  # fmt: skip


def test_two_replicas_one_leads_and_the_other_takes_over(
    cluster: Cluster, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    cluster.add_gpu_nodes(a100s(1))
    for index in range(4):
        core.create_namespaced_pod("default", pod_manifest(f"r-{index}", gpus=1))
    with ExitStack() as stack_a, ExitStack() as stack_b:
        a = stack_a.enter_context(operator_in_thread(cluster, operator_config("op-a")))
        b = stack_b.enter_context(operator_in_thread(cluster, operator_config("op-b")))
        both = 0
        for _ in range(200):
            both += a.elector.is_leader() and b.elector.is_leader()
            threading.Event().wait(0.005)
        wait_for(lambda: len(bound(core, "r-")) == 4, timeout_s=WAIT_S, what="4 pods bound")
        leader, follower, leader_stack = (
            (a, b, stack_a) if a.elector.is_leader() else (b, a, stack_b)
        )
        lease = client.CoordinationV1Api(api).read_namespaced_lease(
            "voltpack-scheduler", LEASE_NAMESPACE
        )
        assert lease.spec.holder_identity == leader.config.identity
        assert both == 0
        # a binding is in the API server a moment before the replica counts it
        wait_for(lambda: leader.stats.bound == 4, timeout_s=WAIT_S, what="the leader's count")
        assert follower.stats.bound == 0

        leader_stack.close()  # the leader stops; the follower takes the Lease and the work
        wait_for(follower.elector.is_leader, timeout_s=WAIT_S, what="the follower to lead")
        for index in range(4, 6):
            core.create_namespaced_pod("default", pod_manifest(f"r-{index}", gpus=1))
        wait_for(lambda: len(bound(core, "r-")) == 6, timeout_s=WAIT_S, what="6 pods bound")
        wait_for(lambda: follower.stats.bound == 2, timeout_s=WAIT_S, what="the follower's count")
        assert leader.stats.bound == 4
        lease = client.CoordinationV1Api(api).read_namespaced_lease(
            "voltpack-scheduler", LEASE_NAMESPACE
        )
        assert lease.spec.holder_identity == follower.config.identity
    gpu_usage_is_consistent(core)


def test_a_killed_operator_process_is_replaced_without_double_binding(
    cluster: Cluster, core: client.CoreV1Api, tmp_path: Path
) -> None:
    cluster.add_gpu_nodes(a100s(4))  # 32 GPUs

    def operator_process(identity: str) -> subprocess.Popen[bytes]:
        command = [
            sys.executable, "-m", "voltpack", "operator", "--policy", "best-fit",
            "--identity", identity, "--lease-seconds", "2", "--metrics-port", "-1", "--no-power",
        ]  # fmt: skip
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}  # no --server: kubeconfig
        log = (tmp_path / f"{identity}.log").open("w")
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=env)

    for index in range(24):
        core.create_namespaced_pod("default", pod_manifest(f"k-{index:02d}", gpus=1))
    victim = operator_process("victim")
    try:
        wait_for(lambda: len(bound(core, "k-")) >= 4, timeout_s=60, what="the victim to bind")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)
    finally:
        victim.kill()
    for index in range(24, 40):  # 40 pods for 32 GPUs: 8 must stay pending
        core.create_namespaced_pod("default", pod_manifest(f"k-{index:02d}", gpus=1))
    successor = operator_process("successor")
    try:
        wait_for(lambda: len(bound(core, "k-")) == 32, timeout_s=60, what="all 32 GPUs taken")
        settle(1.0)  # the successor keeps cycling; nothing more may be bound
        assert len(bound(core, "k-")) == 32
    finally:
        successor.send_signal(signal.SIGTERM)
        successor.wait(timeout=20)
    assert successor.returncode == 0, (tmp_path / "successor.log").read_text()[-2000:]
    lease = client.CoordinationV1Api(core.api_client).read_namespaced_lease(
        "voltpack-scheduler", LEASE_NAMESPACE
    )
    assert lease.spec.holder_identity in (None, "successor")  # released on SIGTERM
    gpu_usage_is_consistent(core)
    log = (tmp_path / "successor.log").read_text()
    assert "Traceback" not in log, log[-2000:]


def test_a_watch_that_expires_is_relisted_and_scheduling_goes_on(
    expiring_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = expiring_cluster
    monkeypatch.setattr(cache, "WATCH_TIMEOUT_S", 2)  # watches end (and resume) every 2 s
    cluster.add_gpu_nodes(a100s(1))
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod("default", pod_manifest("before", gpus=1))
        with operator_in_thread(cluster, operator_config()) as operator:
            wait_for(
                lambda: (
                    ((operator.pods.get("default/before") or {}).get("status") or {}).get("phase")
                    == "Running"
                ),
                timeout_s=WAIT_S,
                what="the operator's cache to see the first pod running",
            )  # no pod event is still to come: the cache's resourceVersion stays where it is
            relists = operator.pods.relists
            for name in ("later-0", "later-1"):  # etcd keeps the revision it compacts at
                core.create_namespaced_config_map("default", {"metadata": {"name": name}})
            cluster.compact()  # the pods cache's resourceVersion is now history
            wait_for(lambda: operator.pods.relists > relists, timeout_s=WAIT_S, what="a relist")
            if isinstance(cluster, RealCluster):  # the watch was refused: 410 Expired from etcd
                error = operator.pods.last_error
                assert isinstance(error, ApiException) and error.status == 410, error
            core.create_namespaced_pod("default", pod_manifest("after", gpus=1))
            wait_for(lambda: len(bound(core, "after")) == 1, timeout_s=WAIT_S, what="next pod")
        gpu_usage_is_consistent(core)


def test_a_high_priority_gang_preempts_a_low_priority_one_when_full(
    cluster: Cluster, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    cluster.add_gpu_nodes(a100s(2))
    low = gpu_job_manifest("low", workers=2, gpus=8, priority=-5, preemptible=True)
    create_job(custom, low)
    with operator_in_thread(cluster, operator_config(policy=PREEMPTION_POLICY)) as operator:
        wait_for(lambda: len(bound(core, "low-worker-")) == 2, timeout_s=WAIT_S, what="low bound")
        create_job(custom, gpu_job_manifest("high", workers=1, gpus=8, priority=10))
        wait_for(lambda: len(bound(core, "high-worker-")) == 1, timeout_s=WAIT_S, what="high bound")
        wait_for(lambda: operator.stats.evicted_gangs >= 1, timeout_s=WAIT_S, what="an eviction")
    preempted = {e.involved_object.name: e for e in events(core, "Preempted")}
    assert {"low-worker-0", "low-worker-1", "low"} <= set(preempted)
    assert "preempted for gang default/high" in preempted["low-worker-0"].message
    # the low job lost its gang whole: at most its workers re-created and pending
    assert len(bound(core, "low-worker-")) == 0
    gpu_usage_is_consistent(core)


def test_a_gated_pod_stays_scheduling_gated_and_binds_once_its_gates_are_gone(
    cluster: Cluster, core: client.CoreV1Api
) -> None:
    cluster.add_gpu_nodes(a100s(1))
    gated = pod_manifest("gated", gpus=1)
    gated["spec"]["schedulingGates"] = [{"name": "example.com/foo"}, {"name": "example.com/bar"}]
    core.create_namespaced_pod("default", gated)

    def scheduled() -> tuple[str, str] | None:
        conditions = core.read_namespaced_pod("gated", "default").status.conditions or []
        found = [(c.status, c.reason) for c in conditions if c.type == "PodScheduled"]
        return found[0] if found else None

    with operator_in_thread(cluster, operator_config()) as operator:
        wait_for(lambda: scheduled() == ("False", "SchedulingGated"), timeout_s=WAIT_S,
                 what="PodScheduled=False SchedulingGated")  # fmt: skip
        core.patch_namespaced_pod("gated", "default", {"spec": {"schedulingGates": [
            {"name": "example.com/bar"}]}})  # fmt: skip
        cycles = operator.stats.cycles
        wait_for(lambda: operator.stats.cycles > cycles + 2, timeout_s=WAIT_S, what="cycles")
        assert scheduled() == ("False", "SchedulingGated")
        assert bound(core, "gated") == []
        core.patch_namespaced_pod("gated", "default", {"spec": {"schedulingGates": None}})
        wait_for(lambda: len(bound(core, "gated")) == 1, timeout_s=WAIT_S, what="gated bound")
    assert [e for e in events(core, "FailedScheduling") if e.involved_object.name == "gated"] == []


HOLD = "example.com/hold"
"""A finalizer that keeps a deleted pod Terminating, as a slow checkpoint on SIGTERM would."""


def test_preemption_is_graceful_and_the_preemptor_waits_nominated(
    cluster: Cluster, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    """As kube-scheduler preempts: the victim gets `DisruptionTarget` (PreemptionByScheduler) and
    a graceful deletion with its own grace period; its GPUs stay in use while it terminates, so
    the preemptor is not bound but nominated to the node, and preempts no one else; once the
    victim is gone, the preemptor is bound there."""
    cluster.add_gpu_nodes(a100s(1))
    create_job(custom, gpu_job_manifest("low", workers=1, gpus=8, priority=-5, preemptible=True))
    with operator_in_thread(cluster, operator_config(policy=PREEMPTION_POLICY)) as operator:
        wait_for(lambda: len(bound(core, "low-worker-")) == 1, timeout_s=WAIT_S, what="low bound")
        core.patch_namespaced_pod("low-worker-0", "default", {"metadata": {"finalizers": [HOLD]}})
        create_job(custom, gpu_job_manifest("high", workers=1, gpus=8, priority=10))

        def victim() -> Any:
            return core.read_namespaced_pod("low-worker-0", "default")

        wait_for(lambda: victim().metadata.deletion_timestamp is not None, timeout_s=WAIT_S,
                 what="the victim's graceful deletion")  # fmt: skip
        held = victim()
        # (its grace period is not checked here: kwok, standing in for the kubelet, deletes a
        # terminating pod at once, and so does the emulator without its simulated kubelets)
        [target] = [c for c in held.status.conditions or [] if c.type == "DisruptionTarget"]
        assert (target.status, target.reason) == ("True", "PreemptionByScheduler")
        assert "preempting to accommodate a higher priority pod" in target.message

        def nominated() -> str | None:
            pods = pods_of(core, "high-worker-")
            return pods[0].status.nominated_node_name if pods else None

        wait_for(lambda: nominated() == "a100-0", timeout_s=WAIT_S, what="the nomination")
        evicted = operator.stats.evicted_gangs
        for _ in range(3):  # cycles pass: the preemptor waits, binds nothing, evicts no one more
            cycles = operator.stats.cycles
            wait_for(lambda c=cycles: operator.stats.cycles > c, timeout_s=WAIT_S, what="a cycle")
        assert bound(core, "high-worker-") == []
        assert operator.stats.evicted_gangs == evicted
        core.patch_namespaced_pod("low-worker-0", "default", {"metadata": {"finalizers": None}})
        wait_for(lambda: len(bound(core, "high-worker-")) == 1, timeout_s=WAIT_S, what="high bound")
        assert bound(core, "high-worker-")[0].spec.node_name == "a100-0"
    gpu_usage_is_consistent(core)


KUBE_PREEMPTION_POLICY = """\
apiVersion: voltpack.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: kube-preemption}
spec:
  scoring: {strategy: best-fit}
  queueing: {min_runtime_s: 0, priority_preemption: true, priority_victims: any}
"""


def test_with_kube_rules_a_plain_pod_preempts_a_lower_priority_one_for_cpu(
    cluster: Cluster, core: client.CoreV1Api
) -> None:
    """`priority_victims: any`, as kube-scheduler preempts: a pod of a higher PriorityClass
    that needs no GPU preempts a plain lower-priority pod (no voltpack annotation) whose CPU it
    needs; a pod with `preemptionPolicy: Never` waits instead."""
    cluster.add_gpu_nodes(a100s(1))  # 64 CPUs
    scheduling = client.SchedulingV1Api(core.api_client)
    classes = {"e2e-low": (1, None), "e2e-high": (1000, None), "e2e-polite": (1000, "Never")}
    for name, (value, policy) in classes.items():
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value}  # fmt: skip
        scheduling.create_priority_class(body | ({"preemptionPolicy": policy} if policy else {}))

    def cpu_pod(name: str, priority_class: str) -> dict[str, Any]:
        manifest = pod_manifest(name)
        manifest["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "40"}}
        manifest["spec"]["priorityClassName"] = priority_class
        return manifest

    try:
        core.create_namespaced_pod("default", cpu_pod("low", "e2e-low"))
        with operator_in_thread(cluster, operator_config(policy=KUBE_PREEMPTION_POLICY)):
            wait_for(lambda: len(bound(core, "low")) == 1, timeout_s=WAIT_S, what="low bound")
            core.create_namespaced_pod("default", cpu_pod("polite", "e2e-polite"))
            polite = failed_scheduling(core, "polite")
            assert "preemptionPolicy is Never" in polite[-1].message
            assert (
                bound(core, "low")
                and not core.read_namespaced_pod("low", "default").metadata.deletion_timestamp
            )
            core.delete_namespaced_pod("polite", "default")
            core.create_namespaced_pod("default", cpu_pod("high", "e2e-high"))
            wait_for(lambda: len(bound(core, "high")) == 1, timeout_s=WAIT_S, what="high bound")
        preempted = [e for e in events(core, "Preempted") if e.involved_object.name == "low"]
        assert preempted and "priority: 1000 over 1 in queue default" in preempted[0].message
    finally:
        for name in classes:
            scheduling.delete_priority_class(name)


def test_a_queue_at_its_limit_says_so_and_its_extra_gang_waits(
    cluster: Cluster, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    cluster.add_gpu_nodes(a100s(2))
    queue = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": "capped"},
             "spec": {"quotas": [{"gpuModel": "A100", "limit": 8}]}}  # fmt: skip
    custom.create_cluster_custom_object(GROUP, VERSION, "queues", queue)
    create_job(custom, gpu_job_manifest("first", workers=1, gpus=8, queue="capped"))
    create_job(custom, gpu_job_manifest("second", workers=1, gpus=4, queue="capped"))

    def at_limit() -> dict[str, Any] | None:
        status = custom.get_cluster_custom_object(GROUP, VERSION, "queues", "capped").get("status")
        found = [c for c in (status or {}).get("conditions") or [] if c["type"] == "AtLimit"]
        return found[0] if found and found[0]["status"] == "True" else None

    with operator_in_thread(cluster, operator_config(policy=PREEMPTION_POLICY)):
        wait_for(lambda: len(bound(core, "first-worker-")) == 1, timeout_s=WAIT_S, what="first")
        condition = wait_for(at_limit, timeout_s=WAIT_S, what="the AtLimit condition")
        waiting = failed_scheduling(core, "second-worker-0")
    assert condition["reason"] == "LimitReached"
    assert "queue capped: A100 8 of limit 8 GPUs" in condition["message"]
    assert "limit" in waiting[0].message
    assert bound(core, "second-worker-") == []
    allocated = custom.get_cluster_custom_object(GROUP, VERSION, "queues", "capped")["status"]
    assert allocated["allocatedGpus"] == {"A100": 8}


def test_the_power_loop_locks_low_priority_gpus_in_the_gpunode_spec(
    cluster: Cluster,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    fake_nvml_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster.add_gpu_nodes([Node.empty(NODE, 128_000, 1_048_576, 8, "H100-SXM")])
    core.patch_node(NODE, {"metadata": {"labels": {RACK_LABEL: "r1"}}})
    custom.create_cluster_custom_object(
        GROUP, VERSION, "powerbudgets", power_budget(BUDGET, BUDGET_W)
    )
    # priority as an annotation (a real apiserver refuses `spec.priority` without a
    # PriorityClass), which counts on a pod an InferenceService controls, as a replica would be
    for name, gpus, priority in (("serve", HIGH, 2000), ("train", LOW, 0)):
        annotations = {"voltpack.io/gpu-indices": ",".join(map(str, gpus)),
                       "voltpack.io/priority": str(priority)}  # fmt: skip
        pod = pod_manifest(name, gpus=len(gpus), node_name=NODE, annotations=annotations)
        pod["metadata"]["ownerReferences"] = [
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "InferenceService", "name": name,
             "uid": f"uid-{name}", "controller": True}
        ]  # fmt: skip
        core.create_namespaced_pod("default", pod)
    state = tmp_path / "nvml-state"
    write_state(state, [FakeGpu(power_mw=100_000) for _ in range(8)])
    monkeypatch.setenv(STATE_ENV, str(state))
    clock = FakeClock()
    backend = NvmlBackend()
    agent = Agent(GpuNodeSync(custom, NODE, backend, clock=clock.rfc3339))
    agent.start()
    config = operator_config("power", POWER_POLICY, power=True, power_interval_s=0.05)
    try:
        with operator_in_thread(cluster, config, power_clock=clock):

            def budget_status() -> dict[str, Any]:
                budget = custom.get_cluster_custom_object(GROUP, VERSION, "powerbudgets", BUDGET)
                return budget.get("status") or {}  # type: ignore[no-any-return]

            wait_for(lambda: budget_status().get("powerW") == 800, timeout_s=WAIT_S, what="800 W")
            with agent.lock:
                update_state(state, {f"gpu.{i}.power_mw": "350000" for i in range(8)})

            def spec_gpus() -> dict[int, Any]:
                node = custom.get_cluster_custom_object(GROUP, VERSION, "gpunodes", NODE)
                return {g["index"]: g for g in (node.get("spec") or {}).get("gpus") or []}

            locked = wait_for(
                lambda: (s := spec_gpus()) and sorted(s) == list(LOW) and s,
                timeout_s=WAIT_S,
                what="the GPUNode spec to lock the low-priority GPUs",
            )
            assert all(locked[i]["lockedClocks"]["maxMhz"] == LOCK_MHZ for i in LOW)
            status = wait_for(
                lambda: (s := budget_status()).get("lockedGpus") == 4 and s,
                timeout_s=WAIT_S,
                what="the budget to count 4 locked GPUs",
            )
            assert (status["level"], status["powerW"]) == ("stage-1", 2800)

            def reported_locks() -> dict[int, int | None]:
                node = custom.get_cluster_custom_object(GROUP, VERSION, "gpunodes", NODE)
                gpus = (node.get("status") or {}).get("gpus") or []
                return {g["index"]: (g.get("lockedClocks") or {}).get("maxMhz") for g in gpus}

            locks = wait_for(
                lambda: (r := reported_locks()) and all(r[i] == LOCK_MHZ for i in LOW) and r,
                timeout_s=WAIT_S,
                what="the agent to report the locks applied",
            )
            assert sorted(locks) == list(range(8))
            assert all(locks[i] is None for i in HIGH)
    finally:
        agent.halt()
        backend.close()


def test_the_admin_api_asks_the_cluster_who_may_do_what(
    cluster: Cluster, api: client.ApiClient, core: client.CoreV1Api, tmp_path: Path
) -> None:
    """TokenReview and SubjectAccessReview: ServiceAccount tokens from the TokenRequest API,
    bound to the example roles (applied with kubectl)."""
    cluster.kubectl(tmp_path / "kubectl")("apply", "-f", str(EXAMPLE_ROLES))
    rbac = client.RbacAuthorizationV1Api(api)
    tokens = {}
    for who in ("viewer", "operator", "admin"):
        core.create_namespaced_service_account(LEASE_NAMESPACE, {"metadata": {"name": who}})
        rbac.create_cluster_role_binding({
            "metadata": {"name": f"test-{who}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": f"voltpack-{who}"},
            "subjects": [{"kind": "ServiceAccount", "name": who, "namespace": LEASE_NAMESPACE}],
        })  # fmt: skip
        request = {"spec": {"expirationSeconds": 600}}
        answer = core.create_namespaced_service_account_token(who, LEASE_NAMESPACE, request)
        tokens[who] = answer.status.token
    path = example_policy_path("best-fit")
    source = KubeAdminSource(api, load_policy(path), path.read_text())
    auth = KubernetesAuth(api)
    app = create_app(
        ApiDependencies(cluster=source, policies=source, authenticator=auth, authorizer=auth)
    )
    text = path.read_text()
    routes = {
        "get": ("GET", "/api/v1/cluster", None),
        "dryrun": ("POST", "/api/v1/policy/dry-runs", {"text": text}),
        "apply": ("PUT", "/api/v1/policy", {"text": text}),
    }
    allowed = {"viewer": {"get"}, "operator": {"get", "dryrun"}, "admin": set(routes)}
    with serving(app) as url:

        def status(token: str | None, method: str, route: str, body: object = None) -> int:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            reply = httpx.request(method, url + route, headers=headers, json=body, timeout=30)
            return reply.status_code

        for who, verbs in allowed.items():
            for verb, (method, route, body) in routes.items():
                code = status(tokens[who], method, route, body)
                if verb in verbs:
                    assert code not in (401, 403), (who, verb, code)
                else:
                    assert code == 403, (who, verb, code)
        assert status(None, "GET", "/api/v1/cluster") == 401
        assert status("forged", "GET", "/api/v1/cluster") == 401
