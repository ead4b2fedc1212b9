"""One queue scenario, run by the queue simulator (`voltpack/sim/queues.py`) and by the operator
over the emulator, gives the same placements (pods, nodes, GPU indices) and the same evictions.

4 nodes of 8 A100s; `research` and `production` are guaranteed 16 GPUs each. Research's gangs
arrive first and borrow the whole cluster; production's gangs then reclaim within their
guarantee; the evicted research gangs come back pending (the test re-creates their pods, as a
job controller does) and wait; one production gang finishes and a research gang takes its GPUs.
Both sides use the same policy and seed (tie-break ranks and decision generator); the gangs
have distinct priorities so that victims are chosen by priority, never by start times (the
operator reads those from the pods, at one-second resolution).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.integration.conftest import FAIR_SHARE_POLICY, cycle_driven_operator, wait_for
from voltpack.emulator import EmulatorConfig, RunningEmulator, running_emulator
from voltpack.model import Node
from voltpack.model.resources.queue import QueueSpec
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.kube.translate import pod_to_k8s
from voltpack.policies.schema import parse_policy
from voltpack.scheduler.session import Plan
from voltpack.sim.queues import QueueJob, QueueSimResult, QueueSimulator

GROUP, VERSION = "voltpack.io", "v1alpha1"
NODES = tuple(
    Node.empty(f"gpu-{i}", cpu_milli=64000, memory_mib=512000, gpu_count=8, gpu_model="A100")
    for i in range(4)
)
GUARANTEE = {"quotas": [{"gpuModel": "A100", "guaranteed": 16}]}
QUEUES = {"research": GUARANTEE, "production": GUARANTEE}
ROUND_S = 10.0
LAST_ROUND_S = 40.0
"""The operator's side runs the rounds up to here (the rest waits for research's 10,000 s)."""
A100 = ("A100",)
# name, queue, workers, GPUs per worker, priority, arrival (s), duration (s)
JOBS = [
    QueueJob.gang("r0", "research", 2, 4, 10_000, A100, arrival_s=0, priority=40),
    QueueJob.gang("r1", "research", 1, 8, 10_000, A100, arrival_s=0, priority=30),
    QueueJob.gang("r2", "research", 1, 8, 10_000, A100, arrival_s=0, priority=20),
    QueueJob.gang("r3", "research", 2, 4, 10_000, A100, arrival_s=0, priority=10),
    QueueJob.gang("p0", "production", 2, 4, 10_000, A100, arrival_s=5, priority=20),
    QueueJob.gang("p1", "production", 1, 8, 25, A100, arrival_s=5, priority=10),
]
Round = tuple[list[tuple[str, str, tuple[int, ...]]], list[str]]
"""Placements (pod, node, GPU indices) and evicted gangs of one round that did something."""


@pytest.fixture
def emulator() -> Iterator[RunningEmulator]:
    config = EmulatorConfig(time_factor=0.001, bookmark_interval_s=3600)
    with running_emulator(nodes=NODES, config=config) as running:
        yield running


def simulated() -> tuple[QueueSimResult, dict[float, Round]]:
    specs = {name: QueueSpec.model_validate(spec) for name, spec in QUEUES.items()}
    sim = QueueSimulator(NODES, specs, parse_policy(FAIR_SHARE_POLICY), seed=0, round_s=ROUND_S)
    result = sim.run(JOBS)
    rounds: dict[float, Round] = {}
    for placed in result.placements:
        entry = rounds.setdefault(placed.time_s, ([], []))
        entry[0].append((placed.pod, placed.node, placed.gpu_indices))
    for evicted in result.evictions:
        rounds.setdefault(evicted.time_s, ([], []))[1].append(evicted.job)
    return result, {t: rounds[t] for t in sorted(rounds) if t <= LAST_ROUND_S}


def manifest(job: QueueJob, index: int) -> dict[str, Any]:
    pod = job.pods[index]
    body = pod_to_k8s(pod, pod.name)
    body["metadata"]["annotations"].update(
        {"voltpack.io/pod-group": job.name, "voltpack.io/queue": job.queue}
    )
    body["spec"]["priorityClassName"] = f"prio-{job.priority}"
    return body


def operator_round(plan: Plan, core: client.CoreV1Api) -> Round:
    """What a cycle decided. A gang placed by preempting others is not bound in that cycle:
    its pods are nominated to their nodes (checked here) and bound once the victims are gone
    (`bound_nominees`); the round is the decision, as the simulator's."""
    placed = []
    preempting = {e.by for e in plan.evictions}
    for decision in plan.decisions:
        if not decision.placed:
            continue
        for p in decision.placements:
            name = p.pod.removeprefix("default/")
            pod = core.read_namespaced_pod(name, "default")
            if decision.subject in preempting:
                assert (pod.spec.node_name, pod.status.nominated_node_name) == (None, p.node)
            else:
                written = pod.metadata.annotations["voltpack.io/gpu-indices"]
                assert pod.spec.node_name == p.node
                assert tuple(int(i) for i in written.split(",")) == p.gpu_indices
            placed.append((name, p.node, p.gpu_indices))
    return placed, [e.gang.name.removeprefix("default/") for e in plan.evictions]


def bound_nominees(
    plan: Plan, nominated: list[tuple[str, str, tuple[int, ...]]], core: client.CoreV1Api
) -> None:
    """The cycle after the victims left binds the nominated pods where they were nominated."""
    bound = sorted(
        (p.pod.removeprefix("default/"), p.node, p.gpu_indices) for gang in plan.gangs for p in gang
    )
    assert bound == sorted(nominated)
    for name, node, gpus in nominated:
        pod = core.read_namespaced_pod(name, "default")
        assert pod.spec.node_name == node
        assert pod.metadata.annotations["voltpack.io/gpu-indices"] == ",".join(map(str, gpus))


def test_the_queue_simulator_places_and_evicts_as_the_operator_does(
    emulator: RunningEmulator,
) -> None:
    result, by_time = simulated()
    # the scenario does what it says, in the simulator: borrow, reclaim, wait, take a departure
    assert list(by_time) == [0.0, 10.0, 40.0]
    assert by_time[10.0][1] == ["r3", "r2"]
    assert [(e.time_s, e.kind) for e in result.evictions] == [(10.0, "reclaim")] * 2
    assert [pod for pod, _, _ in by_time[40.0][0]] == ["r2-0"]
    expected = list(by_time.values())

    api = client.ApiClient(client.Configuration(host=emulator.url))
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": "voltpack-system"}})
    install_crds(client.ApiextensionsV1Api(api))
    for priority in sorted({job.priority for job in JOBS}):
        client.SchedulingV1Api(api).create_priority_class(
            {"metadata": {"name": f"prio-{priority}"}, "value": priority}
        )
    for name, spec in QUEUES.items():
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": name}}
        custom.create_cluster_custom_object(GROUP, VERSION, "queues", {**body, "spec": spec})
    jobs = {job.name: job for job in JOBS}
    actual: list[Round] = []
    with cycle_driven_operator(emulator.url, FAIR_SHARE_POLICY, "op-qsim") as operator:
        wait_for(lambda: len(operator.queues.items()) == 2, timeout_s=20, what="the queues")

        def submit(names: list[str]) -> None:
            pods = [pod for n in names for pod in jobs[n].pods]
            for n in names:
                for index in range(len(jobs[n].pods)):
                    core.create_namespaced_pod("default", manifest(jobs[n], index))
            wait_for(
                lambda: all(
                    (cached := operator.pods.get(f"default/{p.name}")) is not None
                    and not (cached.get("spec") or {}).get("nodeName")
                    for p in pods
                ),
                timeout_s=20,
                what=f"the cache to see {names} pending",
            )

        def cycle() -> Round:
            assert operator.elector.try_acquire_or_renew()
            found = operator_round(operator.run_cycle(), core)
            if found != ([], []):
                actual.append(found)
            return found

        submit(["r0", "r1", "r2", "r3"])  # t=0: research borrows the cluster
        cycle()
        submit(["p0", "p1"])  # t=5: production arrives within its guarantee
        nominated, evicted = cycle()  # t=10
        wait_for(
            lambda: all(
                operator.pods.get(f"default/{p.name}") is None
                for n in evicted
                for p in jobs[n].pods
            ),
            timeout_s=20,
            what="the evicted pods to go",
        )
        assert operator.elector.try_acquire_or_renew()
        bound_nominees(operator.run_cycle(), nominated, core)  # the victims gone: bound
        submit(sorted(evicted))  # re-created pending, as a job controller does
        cycle()  # t=20: nothing fits
        cycle()  # t=30
        for pod in jobs["p1"].pods:  # t=35: p1 finishes
            core.delete_namespaced_pod(pod.name, "default", grace_period_seconds=0)
        wait_for(
            lambda: all(operator.pods.get(f"default/{p.name}") is None for p in jobs["p1"].pods),
            timeout_s=20,
            what="p1 to go",
        )
        cycle()  # t=40: a research gang takes p1's GPUs
    api.close()
    assert actual == expected
