"""Heterogeneity-aware training in the operator, through the emulator and the official client.

A cluster of one K80 node and one V100 node (4 GPUs each). The operator runs with an
allocation policy (`spec.allocation`); its cycles are run one at a time by the test (caches and
Lease as in production). The tie-break of the scoring strategy favours the K80 node, so a job
that lands on the V100 node got there because of the allocation.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client

from tests.integration.conftest import cycle_driven_operator, wait_for
from voltpack.emulator import EmulatorConfig, RunningEmulator, running_emulator
from voltpack.model import Node
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import Operator
from voltpack.scheduler.session import Plan

GROUP, VERSION = "voltpack.io", "v1alpha1"
LEASE_NAMESPACE = "voltpack-system"
RESNET = "ResNet-18 (batch size 256)"
RECOMMENDATION = "Recommendation (batch size 1024)"
MEASURED = "voltpack.io/measured-steps-per-second"
NODES = (
    Node.empty("gpu-k80-0", cpu_milli=32000, memory_mib=256000, gpu_count=4, gpu_model="K80"),
    Node.empty("gpu-v100-0", cpu_milli=32000, memory_mib=256000, gpu_count=4, gpu_model="V100M16"),
)
POLICY = """\
apiVersion: voltpack.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: hetero}
spec:
  scoring: {strategy: best-fit}
  allocation: {policy: max_min_fairness_perf, round_s: 3600, min_runtime_s: 0}
"""


@pytest.fixture
def emulator() -> Iterator[RunningEmulator]:
    # real time: a job's runtime (minimum runtime before a move) is read from its pods' startTime
    config = EmulatorConfig(time_factor=1.0, bookmark_interval_s=3600)
    with running_emulator(nodes=NODES, config=config) as running:
        yield running


@pytest.fixture(autouse=True)
def setup(core: client.CoreV1Api, extensions: client.ApiextensionsV1Api) -> None:
    core.create_namespace({"metadata": {"name": LEASE_NAMESPACE}})
    install_crds(extensions)


class Driver:
    """An operator whose cycles the test runs, one at a time."""

    def __init__(self, operator: Operator) -> None:
        self.operator = operator

    def cycle(self) -> Plan:
        assert self.operator.elector.try_acquire_or_renew()
        return self.operator.run_cycle()

    def sees(self, what: str, check: Any) -> None:
        wait_for(check, timeout_s=20, what=f"the caches to see {what}")

    def sees_workers(self, job: str, count: int) -> None:
        self.sees(
            f"{count} workers of {job}",
            lambda: all(self.operator.pods.get(f"default/{job}-worker-{i}") for i in range(count)),
        )

    def sees_bound(self, job: str, count: int) -> None:
        def bound() -> bool:
            pods = [self.operator.pods.get(f"default/{job}-worker-{i}") for i in range(count)]
            return all(p and (p.get("spec") or {}).get("nodeName") for p in pods)

        self.sees(f"{job} bound", bound)

    def run_until(self, condition: Any, what: str) -> None:
        """Run cycles until `condition()` holds (the caches catch up between cycles)."""

        def step() -> Any:
            self.cycle()
            return condition()

        wait_for(step, timeout_s=30, what=what)


@contextmanager
def driven_operator(emulator: RunningEmulator, policy: str = POLICY) -> Iterator[Driver]:
    with cycle_driven_operator(emulator.url, policy, "op-h") as operator:
        yield Driver(operator)


def training_job(
    name: str,
    workers: int,
    job_type: str | None,
    *,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    notes = dict(annotations or {})
    if job_type is not None:
        notes["voltpack.io/job-type"] = job_type
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GPUJob",
        "metadata": {"name": name, "namespace": "default", "annotations": notes},
        "spec": {
            "workers": workers,
            "gpusPerWorker": 1,
            "template": {"spec": {"containers": [{"name": "w", "image": "trainer:1"}]}},
            **spec,
        },
    }


def create_job(custom: client.CustomObjectsApi, body: dict[str, Any]) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", body)


def get_job(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", name)  # type: ignore[no-any-return]


def nodes_of(core: client.CoreV1Api, job: str) -> set[str]:
    pods = core.list_namespaced_pod("default", label_selector=f"voltpack.io/job={job}").items
    return {p.spec.node_name for p in pods if p.spec.node_name}


def job_events(core: client.CoreV1Api, job: str, reason: str) -> list[Any]:
    return [
        e
        for e in core.list_namespaced_event("default").items
        if e.involved_object.kind == "GPUJob"
        and e.involved_object.name == job
        and e.reason == reason
    ]


def scheduled_condition(custom: client.CustomObjectsApi, job: str) -> dict[str, Any] | None:
    conditions = (get_job(custom, job).get("status") or {}).get("conditions") or []
    found = [c for c in conditions if c["type"] == "Scheduled" and c["status"] == "True"]
    return found[0] if found else None


def test_each_job_type_lands_on_its_fast_model_and_the_job_says_why(
    emulator: RunningEmulator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    create_job(custom, training_job("resnet", 2, RESNET))
    create_job(custom, training_job("rec", 2, RECOMMENDATION))
    create_job(custom, training_job("plain", 1, None))  # no job type: today's behaviour
    with driven_operator(emulator) as driver:
        driver.sees("the jobs", lambda: len(driver.operator.jobs.items()) == 3)
        driver.cycle()  # creates the workers
        driver.sees_workers("resnet", 2)
        driver.sees_workers("rec", 2)
        driver.sees_workers("plain", 1)
        plan = driver.cycle()
        reasons = {d.subject: d.reason for d in plan.decisions if d.placed}
        driver.sees_bound("resnet", 2)
        why = "V100M16 (allocation 1.00, 9.5x the throughput of K80)"
        driver.run_until(
            lambda: why in (scheduled_condition(custom, "resnet") or {}).get("message", ""),
            "resnet's Scheduled condition with the reason",
        )
    # ResNet-18 runs faster on a V100, the recommendation model on a K80
    assert nodes_of(core, "resnet") == {"gpu-v100-0"}
    assert nodes_of(core, "rec") == {"gpu-k80-0"}
    assert len(nodes_of(core, "plain")) == 1
    # Gavel's table, 2 workers: ResNet-18 15.9 steps/s on a V100, 1.7 on a K80; the
    # recommendation model (measured on 1 GPU, 20.0 vs 13.3, scaled alike) 1.5x on a K80
    assert reasons["default/resnet"].startswith(f"job default/resnet: {why}")
    assert reasons["default/rec"].startswith("job default/rec: K80 (allocation 1.00, 1.5x")
    assert "allocation" not in reasons["default/plain"]
    condition = scheduled_condition(custom, "resnet")
    assert condition is not None
    assert why in condition["message"]
    events = job_events(core, "resnet", "Scheduled")
    assert [e.type for e in events] == ["Normal"]
    assert why in events[0].message


def test_a_reported_throughput_refines_the_table_and_moves_the_next_decision(
    emulator: RunningEmulator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    create_job(custom, training_job("rec-a", 1, RECOMMENDATION))
    with driven_operator(emulator) as driver:
        driver.sees("rec-a", lambda: driver.operator.jobs.get("default/rec-a"))
        driver.cycle()
        driver.sees_workers("rec-a", 1)
        driver.cycle()
        driver.sees_bound("rec-a", 1)
        assert nodes_of(core, "rec-a") == {"gpu-k80-0"}  # the table: 20.0 steps/s vs 13.3
        # the job measures 2 steps/s on its K80: the moving average makes it 11.0, below the V100
        patch = {"metadata": {"annotations": {MEASURED: "2.0"}}}
        custom.patch_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", "rec-a", patch)
        driver.sees(
            "the report",
            lambda: (
                (driver.operator.jobs.get("default/rec-a") or {})["metadata"]
                .get("annotations", {})
                .get(MEASURED)
            ),
        )
        driver.cycle()
        create_job(custom, training_job("rec-b", 1, RECOMMENDATION))
        driver.sees("rec-b", lambda: driver.operator.jobs.get("default/rec-b"))
        driver.cycle()
        driver.sees_workers("rec-b", 1)
        plan = driver.cycle()
        driver.sees_bound("rec-b", 1)
    assert nodes_of(core, "rec-b") == {"gpu-v100-0"}
    reason = next(d.reason for d in plan.decisions if d.subject == "default/rec-b")
    assert reason.startswith("job default/rec-b: V100M16 (allocation 1.00, 1.2x the throughput")


def test_a_malformed_annotation_gets_a_warning_and_the_job_is_still_scheduled(
    emulator: RunningEmulator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    create_job(custom, training_job("bad", 2, RESNET, annotations={MEASURED: "fast"}))
    create_job(custom, training_job("odd", 1, "Quantum GAN"))
    with driven_operator(emulator) as driver:
        driver.sees("the jobs", lambda: len(driver.operator.jobs.items()) == 2)
        driver.cycle()
        driver.sees_workers("bad", 2)
        driver.sees_workers("odd", 1)
        driver.cycle()
        driver.sees_bound("bad", 2)
        driver.sees_bound("odd", 1)
        driver.cycle()
    assert nodes_of(core, "bad") == {"gpu-v100-0"}  # the type still counts
    warnings = job_events(core, "bad", "MalformedAnnotation")
    assert len(warnings) == 1  # once per value, not once per cycle
    assert warnings[0].type == "Warning"
    assert f"annotation {MEASURED}: 'fast' is not a throughput" in warnings[0].message
    unknown = job_events(core, "odd", "UnknownJobType")
    assert len(unknown) == 1
    assert "annotation voltpack.io/job-type: 'Quantum GAN'" in unknown[0].message
    assert nodes_of(core, "odd")  # scheduled without heterogeneity awareness


def worker_uid(core: client.CoreV1Api, job: str) -> str:
    return core.read_namespaced_pod(f"{job}-worker-0", "default").metadata.uid  # type: ignore[no-any-return]


def test_a_preemptible_job_is_moved_at_a_round_boundary_and_recreated(
    emulator: RunningEmulator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    # short rounds; a job may move as soon as it runs
    policy = POLICY.replace("round_s: 3600, min_runtime_s: 0", "round_s: 0.2, min_runtime_s: 0")
    # the K80s are taken, so both recommendation jobs start on the V100 (their slower model)
    create_job(custom, training_job("hold", 4, None, gpuModels=["K80"]))
    create_job(custom, training_job("mover", 1, RECOMMENDATION, preemptible=True))
    create_job(custom, training_job("stayer", 1, RECOMMENDATION))
    with driven_operator(emulator, policy) as driver:
        driver.sees("the jobs", lambda: len(driver.operator.jobs.items()) == 3)
        driver.cycle()
        driver.sees_workers("hold", 4)
        driver.sees_workers("mover", 1)
        driver.sees_workers("stayer", 1)
        plan = driver.cycle()
        driver.sees_bound("mover", 1)
        driver.sees_bound("stayer", 1)
        first = {d.subject: d.reason for d in plan.decisions}
        assert nodes_of(core, "mover") == {"gpu-v100-0"}
        assert "K80 had no room for the whole gang now" in first["default/mover"]
        before = {job: worker_uid(core, job) for job in ("mover", "stayer")}
        # the K80s free up: at the next round boundary the mover goes where it runs faster
        custom.delete_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", "hold")
        driver.run_until(
            lambda: nodes_of(core, "mover") == {"gpu-k80-0"}, "the mover on the K80 node"
        )
    assert worker_uid(core, "mover") != before["mover"]  # preempted and recreated
    assert worker_uid(core, "stayer") == before["stayer"]  # not preemptible: placed once
    assert nodes_of(core, "stayer") == {"gpu-v100-0"}
    assert driver.operator.stats.moved_jobs == 1
    preempted = job_events(core, "mover", "Preempted")
    assert len(preempted) == 1
    assert re.match(
        r"round \d+: job default/mover moves from V100M16 to K80 \(allocation 1\.00 on K80, "
        r"0\.00 on V100M16; 1\.5x the throughput, worth the 0 s restart\)$",
        preempted[0].message,
    ), preempted[0].message
    pod_events = [
        e
        for e in core.list_namespaced_event("default").items
        if e.reason == "Preempted" and e.involved_object.name == "mover-worker-0"
    ]
    assert [e.message for e in pod_events] == [preempted[0].message]
    assert job_events(core, "stayer", "Preempted") == []
