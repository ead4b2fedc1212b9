"""Queues through the operator and the emulator, with the official client.

The operator's cycles are run one at a time here (caches and Lease as in production), so a
test can say what one cycle does: reclaim and bind in the same cycle.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import (
    FAIR_SHARE_POLICY,
    Kubectl,
    cycle_driven_operator,
    gpu_job_manifest,
    pod_manifest,
    wait_for,
)
from voltpack.emulator import EmulatorConfig, RunningEmulator
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import Operator
from voltpack.scheduler.session import Plan

GROUP, VERSION = "voltpack.io", "v1alpha1"
LEASE_NAMESPACE = "voltpack-system"


@pytest.fixture
def emulator_config() -> EmulatorConfig:
    return EmulatorConfig(time_factor=0.001, bookmark_interval_s=3600)


@pytest.fixture(autouse=True)
def setup(core: client.CoreV1Api, extensions: client.ApiextensionsV1Api) -> None:
    core.create_namespace({"metadata": {"name": LEASE_NAMESPACE}})
    install_crds(extensions)


class Driver:
    """An operator whose cycles the test runs, one at a time."""

    def __init__(self, operator: Operator, core: client.CoreV1Api) -> None:
        self.operator = operator
        self.core = core

    def cycle(self) -> Plan:
        assert self.operator.elector.try_acquire_or_renew()
        return self.operator.run_cycle()

    def sees_pods(self, *names: str) -> None:
        """Wait until the operator's pod cache holds `names` (default namespace)."""
        wait_for(
            lambda: all(self.operator.pods.get(f"default/{n}") for n in names),
            timeout_s=20,
            what=f"the cache to see {names}",
        )

    def sees_queues(self, count: int) -> None:
        wait_for(lambda: len(self.operator.queues.items()) == count, timeout_s=20, what="queues")


@contextmanager
def driven_operator(emulator: RunningEmulator, core: client.CoreV1Api) -> Iterator[Driver]:
    with cycle_driven_operator(emulator.url, FAIR_SHARE_POLICY, "op-q") as operator:
        yield Driver(operator, core)


def make_queue(custom: client.CustomObjectsApi, name: str, **spec: Any) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": name}}
    custom.create_cluster_custom_object(GROUP, VERSION, "queues", {**body, "spec": spec})


def get_queue(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return custom.get_cluster_custom_object(GROUP, VERSION, "queues", name)  # type: ignore[no-any-return]


def condition(queue: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in (queue.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    assert found, f"no {kind} condition in {queue.get('status')}"
    return found[0]


def gpu_job(name: str, queue: str, workers: int, gpus: int, **extra: Any) -> dict[str, Any]:
    return gpu_job_manifest(name, workers, gpus, gpuModels=["A100"], queue=queue, **extra)


def node_of(core: client.CoreV1Api, name: str) -> str | None:
    try:
        return core.read_namespaced_pod(name, "default").spec.node_name  # type: ignore[no-any-return]
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def queued_pod(name: str, queue: str, gpus: int) -> dict[str, Any]:
    annotations = {"voltpack.io/queue": queue, "voltpack.io/gpu-models": "A100"}
    return pod_manifest(name, gpus=gpus, annotations=annotations)


def test_a_queue_under_its_guarantee_reclaims_a_borrowing_gang_whole_in_one_cycle_then_binds(
    emulator: RunningEmulator,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    kubectl: Kubectl,
) -> None:
    make_queue(custom, "spot")  # no guarantee: everything it holds is borrowed
    make_queue(custom, "research", quotas=[{"gpuModel": "A100", "guaranteed": 8}])
    borrower = gpu_job("spot-job", "spot", workers=2, gpus=8, priority=-5, preemptible=True)
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", borrower)
    with driven_operator(emulator, core) as driver:
        driver.sees_queues(2)
        wait_for(driver.operator.jobs.items, timeout_s=20, what="the job cache")
        driver.cycle()  # creates the workers
        driver.sees_pods("spot-job-worker-0", "spot-job-worker-1")
        first = driver.cycle()
        assert len(first.gangs) == 1 and len(first.gangs[0]) == 2  # all 16 A100 GPUs
        assert get_queue(custom, "spot")["status"]["allocatedGpus"] == {"A100": 16}
        assert condition(get_queue(custom, "spot"), "Borrowing")["status"] == "True"
        wait_for(
            lambda: all(
                pod.status.phase == "Running" for pod in core.list_namespaced_pod("default").items
            ),
            timeout_s=20,
            what="the borrower to run",
        )

        claim = gpu_job("research-job", "research", workers=1, gpus=8)
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", claim)
        wait_for(lambda: len(driver.operator.jobs.items()) == 2, timeout_s=20, what="2 jobs")
        driver.cycle()  # creates the research worker
        driver.sees_pods("research-job-worker-0")
        reclaim = driver.cycle()

        assert [e.gang.name for e in reclaim.evictions] == ["default/spot-job"]
        # the borrower's pods terminate gracefully first: the research worker is nominated to
        # the node they free, and bound once they are gone (as kube-scheduler preempts)
        assert [[p.pod for p in gang] for gang in reclaim.gangs] == [
            ["default/research-job-worker-0"]
        ]
        assert node_of(core, "research-job-worker-0") is None
        nominee = core.read_namespaced_pod("research-job-worker-0", "default")
        assert nominee.status.nominated_node_name is not None
        wait_for(
            lambda: (
                (driver.operator.pods.get("default/research-job-worker-0") or {}).get("status")
                or {}
            ).get("nominatedNodeName"),
            timeout_s=20,
            what="the cache to see the nomination",
        )

        def bound_after_a_cycle() -> bool:
            driver.cycle()
            return node_of(core, "research-job-worker-0") is not None

        wait_for(bound_after_a_cycle, timeout_s=30, what="the research worker bound")
        assert node_of(core, "research-job-worker-0") == nominee.status.nominated_node_name
        # evicted whole: neither worker of the borrower runs any more (re-created pending)
        for index in range(2):
            assert node_of(core, f"spot-job-worker-{index}") is None
        events = kubectl.json("get", "events", "-n", "default")["items"]
        preempted = [e for e in events if e["reason"] == "Preempted"]
        assert {e["involvedObject"]["name"] for e in preempted} >= {
            "spot-job-worker-0",
            "spot-job-worker-1",
            "spot-job",
        }
        message = preempted[0]["message"]
        assert "preempted for gang default/research-job (queue research" in message
        assert "reclaim: queue spot: A100 16 of guaranteed 0 GPUs (borrowed)" in message

        research = get_queue(custom, "research")
        assert research["status"]["allocatedGpus"] == {"A100": 8}
        assert condition(research, "Borrowing")["status"] == "False"
        # the borrower's workers come back pending and cannot take the GPUs back
        driver.cycle()
        driver.sees_pods("spot-job-worker-0", "spot-job-worker-1")
        again = driver.cycle()
        assert again.evictions == [] and again.gangs == []
        assert node_of(core, "research-job-worker-0") is not None


def test_a_queue_at_its_limit_says_so_and_its_extra_gang_waits(
    emulator: RunningEmulator,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    kubectl: Kubectl,
) -> None:
    make_queue(custom, "capped", quotas=[{"gpuModel": "A100", "limit": 8}])
    core.create_namespaced_pod("default", queued_pod("first", "capped", gpus=8))
    core.create_namespaced_pod("default", queued_pod("second", "capped", gpus=4))
    with driven_operator(emulator, core) as driver:
        driver.sees_queues(1)
        driver.sees_pods("first", "second")
        plan = driver.cycle()
    assert node_of(core, "first") is not None, plan
    assert node_of(core, "second") is None
    assert "queue capped: A100 12 of limit 8 GPUs" in plan.unplaced["default/second"]
    capped = get_queue(custom, "capped")
    at_limit = condition(capped, "AtLimit")
    assert at_limit["status"] == "True"
    assert at_limit["reason"] == "LimitReached"
    assert "queue capped: A100 8 of limit 8 GPUs" in at_limit["message"]
    assert "1 gang(s) wait" in at_limit["message"]
    assert capped["status"]["pendingJobs"] == 1
    events = kubectl.json("get", "events", "-n", "default")["items"]
    failed = [e for e in events if e["involvedObject"]["name"] == "second"]
    assert failed and "limit" in failed[0]["message"]


def test_bad_queues_are_named_and_the_good_ones_keep_working(
    emulator: RunningEmulator,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    kubectl: Kubectl,
) -> None:
    with pytest.raises(ApiException) as error:
        make_queue(custom, "negative", quotas=[{"gpuModel": "A100", "guaranteed": -2}])
    assert error.value.status == 422
    assert "guaranteed" in error.value.body
    make_queue(custom, "good")
    make_queue(custom, "orphan", parent="nowhere")
    make_queue(custom, "loop-a", parent="loop-b")
    make_queue(custom, "loop-b", parent="loop-a")
    # passes the schema, fails the model's cross-field rule
    make_queue(custom, "upside-down", quotas=[{"gpuModel": "A100", "guaranteed": 4, "limit": 2}])
    core.create_namespaced_pod("default", queued_pod("ok", "good", gpus=1))
    core.create_namespaced_pod("default", queued_pod("lost", "orphan", gpus=1))
    core.create_namespaced_pod("default", queued_pod("nobody", "ghost", gpus=1))
    with driven_operator(emulator, core) as driver:
        driver.sees_queues(5)
        driver.sees_pods("ok", "lost", "nobody")
        plan = driver.cycle()
    assert node_of(core, "ok") is not None
    assert node_of(core, "lost") is None
    assert "queue orphan is invalid" in plan.unplaced["default/lost"]
    assert "queue 'ghost' does not exist" in plan.unplaced["default/nobody"]
    orphan = condition(get_queue(custom, "orphan"), "Valid")
    assert orphan["status"] == "False"
    assert "parent 'nowhere' is not a queue" in orphan["message"]
    loop = condition(get_queue(custom, "loop-a"), "Valid")
    assert "cycle: loop-a -> loop-b -> loop-a" in loop["message"]
    upside_down = condition(get_queue(custom, "upside-down"), "Valid")
    assert "limit=2 is below guaranteed=4" in upside_down["message"]
    assert condition(get_queue(custom, "good"), "Valid")["status"] == "True"
    assert get_queue(custom, "good")["status"]["allocatedGpus"] == {"A100": 1}
    warnings = [
        e for e in kubectl.json("get", "events", "-A")["items"] if e["reason"] == "InvalidQueue"
    ]
    assert {e["involvedObject"]["name"] for e in warnings} == {
        "orphan",
        "loop-a",
        "loop-b",
        "upside-down",
    }
