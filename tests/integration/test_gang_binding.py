"""A gang is bound whole or not at all on the API too (docs/gang-binding.md).

The emulator's fault rules fail a binding (or a rank-label patch, or an undo's delete) with a
5xx; the operator runs cycle by cycle against it through the official client. The invariant:
after a failed binding, within one cycle no GPU is held by a partly bound gang, and the gang
is then bound whole. A gang left partly bound by an operator that stopped between bindings is
undone by the next leader in its second cycle.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client

from tests.integration.conftest import (
    FAIR_SHARE_POLICY,
    binding,
    cycle_driven_operator,
    gpu_job_manifest,
    pod_manifest,
    wait_for,
)
from voltpack.emulator import EmulatorConfig, RunningEmulator
from voltpack.operator.kube.binder import UNDONE_REASON
from voltpack.operator.kube.conventions import GANG_BINDING_ANNOTATION, RANK_LABEL
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import Operator

GROUP, VERSION = "voltpack.io", "v1alpha1"
WORKERS = 4
GPUS = 4


@pytest.fixture
def emulator_config() -> EmulatorConfig:
    # pods never start or finish by themselves: what is bound stays bound until deleted
    return EmulatorConfig(time_factor=0.001, bookmark_interval_s=3600, lifecycle=False)


@pytest.fixture(autouse=True)
def setup(core: client.CoreV1Api, extensions: client.ApiextensionsV1Api) -> None:
    core.create_namespace({"metadata": {"name": "voltpack-system"}})
    install_crds(extensions)


class Driver:
    """An operator whose cycles the test runs, one at a time."""

    def __init__(self, operator: Operator, core: client.CoreV1Api) -> None:
        self.operator = operator
        self.core = core

    def cycle(self) -> None:
        assert self.operator.elector.try_acquire_or_renew()
        self.operator.run_cycle()

    def sees(self, condition: Any, what: str) -> None:
        wait_for(condition, timeout_s=20, what=what)

    def sees_workers(self, job: str, count: int, pending: bool = True) -> None:
        """Wait until the cache holds `count` workers of `job` (all pending if `pending`)."""

        def seen() -> bool:
            workers = [
                p
                for p in self.operator.pods.values()
                if p["metadata"]["name"].startswith(f"{job}-worker-")
            ]
            return len(workers) == count and (
                not pending or not any((p.get("spec") or {}).get("nodeName") for p in workers)
            )

        self.sees(seen, f"{count} workers of {job} in the cache")


@contextmanager
def driven(emulator: RunningEmulator, core: client.CoreV1Api) -> Iterator[Driver]:
    with cycle_driven_operator(emulator.url, FAIR_SHARE_POLICY, "op-gang") as operator:
        yield Driver(operator, core)


def pods(core: client.CoreV1Api, prefix: str) -> list[client.V1Pod]:
    return [
        p for p in core.list_namespaced_pod("default").items if p.metadata.name.startswith(prefix)
    ]


def gpus_held(core: client.CoreV1Api, prefix: str) -> int:
    """GPUs held by bound, not deleted pods whose names start with `prefix`."""
    return sum(
        GPUS for p in pods(core, prefix) if p.spec.node_name and not p.metadata.deletion_timestamp
    )


def events(core: client.CoreV1Api, reason: str) -> list[client.CoreV1Event]:
    return [e for e in core.list_namespaced_event("default").items if e.reason == reason]


def make_job(custom: client.CustomObjectsApi, name: str) -> None:
    job = gpu_job_manifest(name, WORKERS, GPUS, gpuModels=["A100"])
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", job)


def start_job(driver: Driver, custom: client.CustomObjectsApi, name: str) -> None:
    """The job created and its workers seen pending by the operator."""
    make_job(custom, name)
    driver.sees(driver.operator.jobs.items, "the job cache")
    driver.cycle()  # creates the workers
    driver.sees_workers(name, WORKERS)


def test_a_failed_binding_undoes_the_gang_within_the_cycle_and_it_is_bound_whole_later(
    emulator: RunningEmulator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    with driven(emulator, core) as driver:
        start_job(driver, custom, "train")
        rule = emulator.faults.fail_next(
            1, status=500, verb="create", path=r"/pods/train-worker-2/binding$", message="injected"
        )
        uids = {p.metadata.name: p.metadata.uid for p in pods(core, "train-worker-")}
        driver.cycle()  # binds 0 and 1, fails on 2: undone before the cycle ends
        assert rule.hits == 1
        assert gpus_held(core, "train-worker-") == 0
        assert driver.operator.stats.undone_gangs == 1
        undone = events(core, UNDONE_REASON)
        named = {e.involved_object.name for e in undone}
        assert named == {"train-worker-0", "train-worker-1", "train"}
        message = next(e.message for e in undone if e.involved_object.name == "train-worker-0")
        assert "binding of default/train-worker-2" in message and "injected" in message
        assert "its controller creates it again" in message

        # the controller creates the deleted workers again; the gang is then bound whole
        for _ in range(10):
            driver.cycle()
            if gpus_held(core, "train-worker-") == WORKERS * GPUS:
                break
            assert gpus_held(core, "train-worker-") in (0, WORKERS * GPUS)
        workers = pods(core, "train-worker-")
        assert len(workers) == WORKERS and all(p.spec.node_name for p in workers)
        again = {p.metadata.name: p.metadata.uid for p in workers}
        assert again["train-worker-0"] != uids["train-worker-0"]  # created again
        assert again["train-worker-2"] == uids["train-worker-2"]  # never bound: the same pod
        assert sorted(p.metadata.labels[RANK_LABEL] for p in workers) == ["0", "1", "2", "3"]


def test_a_rank_label_that_cannot_be_written_binds_no_member(
    emulator: RunningEmulator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    with driven(emulator, core) as driver:
        start_job(driver, custom, "label")
        rule = emulator.faults.fail_next(
            1, status=503, verb="patch", path=r"/pods/label-worker-3$", message="injected"
        )
        driver.cycle()
        assert rule.hits == 1
        assert gpus_held(core, "label-worker-") == 0  # the labels come before any binding
        assert not events(core, UNDONE_REASON)  # nothing was bound, nothing to undo
        driver.sees_workers("label", WORKERS)
        driver.cycle()
        assert gpus_held(core, "label-worker-") == WORKERS * GPUS


def test_bare_pods_of_a_gang_are_deleted_when_it_cannot_be_bound_and_their_event_says_so(
    emulator: RunningEmulator, core: client.CoreV1Api
) -> None:
    annotations = {"voltpack.io/pod-group": "bare", "voltpack.io/min-members": str(WORKERS)}
    for index in range(WORKERS):
        manifest = pod_manifest(f"bare-{index}", gpus=GPUS, annotations=annotations)
        core.create_namespaced_pod("default", manifest)
    with driven(emulator, core) as driver:
        driver.sees(lambda: len(driver.operator.pods.items()) == WORKERS, "the bare pods")
        emulator.faults.fail_next(
            1, status=500, verb="create", path=r"/pods/bare-3/binding$", message="injected"
        )
        driver.cycle()
        assert gpus_held(core, "bare-") == 0
        assert sorted(p.metadata.name for p in pods(core, "bare-")) == ["bare-3"]
        undone = events(core, UNDONE_REASON)
        assert {e.involved_object.name for e in undone} == {"bare-0", "bare-1", "bare-2"}
        assert all("no controller owns it, so it is not created again" in e.message for e in undone)


def test_an_undo_whose_delete_fails_is_finished_by_the_next_cycles(
    emulator: RunningEmulator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    with driven(emulator, core) as driver:
        start_job(driver, custom, "stuck")
        emulator.faults.fail_next(
            1, status=500, verb="create", path=r"/pods/stuck-worker-3/binding$", message="injected"
        )
        emulator.faults.fail_next(
            1, status=500, verb="delete", path=r"/pods/stuck-worker-1$", message="injected"
        )
        driver.cycle()  # 0, 1, 2 bound, 3 failed; 0 and 2 deleted, 1's delete failed
        assert gpus_held(core, "stuck-worker-") == GPUS
        driver.sees(
            lambda: (
                (driver.operator.pods.get("default/stuck-worker-1") or {})
                .get("spec", {})
                .get("nodeName")
            ),
            "the cache to see worker 1 bound",
        )
        driver.cycle()  # first sight of worker 1 bound with worker 3 pending: not yet
        assert gpus_held(core, "stuck-worker-") == GPUS
        driver.cycle()  # still partly bound a cycle later: undone
        assert gpus_held(core, "stuck-worker-") == 0
        for _ in range(10):
            driver.cycle()
            if gpus_held(core, "stuck-worker-") == WORKERS * GPUS:
                break
        assert gpus_held(core, "stuck-worker-") == WORKERS * GPUS


def partly_bind(core: client.CoreV1Api, job: str, bound: int) -> None:
    """What an operator stopped between bindings leaves: every worker marked with the attempt,
    the first `bound` of them bound."""
    attempt = f"crashed0001/{WORKERS}"
    for index in range(WORKERS):
        patch = {
            "metadata": {
                "labels": {RANK_LABEL: str(index)},
                "annotations": {GANG_BINDING_ANNOTATION: attempt},
            }
        }
        core.patch_namespaced_pod(f"{job}-worker-{index}", "default", patch)
    for index in range(bound):
        name = f"{job}-worker-{index}"
        body = binding(name, f"gpu-a100-{index // 2}")
        body["metadata"]["annotations"] = {GANG_BINDING_ANNOTATION: attempt}
        core.create_namespaced_pod_binding(name, "default", body, _preload_content=False)


def test_a_gang_left_partly_bound_by_a_stopped_operator_is_undone_by_the_next_leader(
    emulator: RunningEmulator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    make_job(custom, "crash")
    with driven(emulator, core) as first:
        first.sees(first.operator.jobs.items, "the job cache")
        first.cycle()  # creates the workers
        first.sees_workers("crash", WORKERS)
    partly_bind(core, "crash", 3)  # the old leader bound three, then stopped
    assert gpus_held(core, "crash-worker-") == 3 * GPUS
    with driven(emulator, core) as driver:
        driver.sees(driver.operator.jobs.items, "the job cache")
        driver.sees(
            lambda: (
                sum(
                    1
                    for p in driver.operator.pods.values()
                    if p["metadata"]["name"].startswith("crash-")
                    and (p.get("spec") or {}).get("nodeName")
                )
                == 3
            ),
            "the partly bound gang in the cache",
        )
        driver.cycle()  # first sight: a partial gang older than one cycle is not yet proven
        assert gpus_held(core, "crash-worker-") == 3 * GPUS
        driver.cycle()  # still partly bound a cycle later: undone
        assert gpus_held(core, "crash-worker-") == 0
        assert driver.operator.stats.undone_gangs == 1
        message = next(
            e.message for e in events(core, UNDONE_REASON) if e.involved_object.name == "crash"
        )
        assert "3 of 4 members bound" in message and "default/crash-worker-3 pending" in message
        for _ in range(10):
            driver.cycle()
            if gpus_held(core, "crash-worker-") == WORKERS * GPUS:
                break
        assert gpus_held(core, "crash-worker-") == WORKERS * GPUS


def test_a_gang_bound_whole_is_never_taken_for_a_partial_one(
    emulator: RunningEmulator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    with driven(emulator, core) as driver:
        start_job(driver, custom, "whole")
        for _ in range(4):
            driver.cycle()
        workers = pods(core, "whole-worker-")
        assert all(p.spec.node_name for p in workers)
        attempts = {p.metadata.annotations[GANG_BINDING_ANNOTATION] for p in workers}
        assert len(attempts) == 1 and attempts.pop().endswith(f"/{WORKERS}")
        assert not events(core, UNDONE_REASON)
        assert driver.operator.stats.undone_gangs == 0
