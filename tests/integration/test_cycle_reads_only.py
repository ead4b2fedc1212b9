"""A scheduling cycle reads the operator's cached objects and never changes one.

The cycle works on the cached objects themselves, not copies (copying every pod and node each
cycle cost about 0.1 s per 1,000 pods); this holds only while nothing in the cycle writes into
them. Bound pods, GPUJob workers, a faulty GPU and queues exercise the binding, recovery and
queue paths; each object is compared with its JSON from before the cycle."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kubernetes import client

from tests.integration.conftest import (
    FAIR_SHARE_POLICY,
    cycle_driven_operator,
    gpu_job_manifest,
    pod_manifest,
    wait_for,
)
from voltpack.emulator import EmulatorConfig, RunningEmulator
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import Operator

GROUP, VERSION = "voltpack.io", "v1alpha1"


@pytest.fixture
def emulator_config() -> EmulatorConfig:
    return EmulatorConfig(time_factor=0.001, bookmark_interval_s=3600)


def cached_objects(operator: Operator) -> list[dict[str, Any]]:
    caches = (
        operator.nodes, operator.pods, operator.jobs, operator.queues, operator.gpunodes,
        operator.topologies, operator.budgets, operator.inference_services,
    )  # fmt: skip
    return [obj for cache in caches for obj in cache.values()]


def run_cycle_checked(operator: Operator) -> None:
    """One cycle; fails naming the first cached object the cycle changed."""
    assert operator.elector.try_acquire_or_renew()
    objects = cached_objects(operator)
    before = [json.dumps(obj, sort_keys=True) for obj in objects]
    operator.run_cycle()
    for obj, text in zip(objects, before, strict=True):
        after = json.dumps(obj, sort_keys=True)
        assert after == text, f"the cycle changed {obj.get('kind')} {obj['metadata']['name']}"


def test_cycles_leave_every_cached_object_as_the_watch_delivered_it(
    emulator: RunningEmulator,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    extensions: client.ApiextensionsV1Api,
) -> None:
    core.create_namespace({"metadata": {"name": "voltpack-system"}})
    install_crds(extensions)
    queue = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": "team"}}
    custom.create_cluster_custom_object(GROUP, VERSION, "queues", {**queue, "spec": {}})
    job = gpu_job_manifest("train", 2, 2, queue="team", minWorkers=1)
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", job)
    group = {"voltpack.io/pod-group": "pair", "voltpack.io/min-members": "2"}
    for name in ("pair-0", "pair-1"):
        core.create_namespaced_pod("default", pod_manifest(name, gpus=1, annotations=group))
    core.create_namespaced_pod("default", pod_manifest("single", gpus=1))
    with cycle_driven_operator(emulator.url, FAIR_SHARE_POLICY, "op-reads") as operator:
        stop = threading.Event()
        for cache in (operator.gpunodes, operator.topologies, operator.budgets):
            cache.start(stop)
        try:
            for _ in range(3):  # the job controller creates the workers; then they are placed
                run_cycle_checked(operator)
                wait_for(operator.pods.values, what="pods cached")
            workers = lambda: [  # noqa: E731
                p for p in operator.pods.values() if p["metadata"]["name"].startswith("train-")
            ]
            wait_for(lambda: len(workers()) == 2, what="the job's workers cached")
            for _ in range(3):
                run_cycle_checked(operator)
            bound = wait_for(
                lambda: [p for p in core.list_namespaced_pod("default").items if p.spec.node_name],
                what="bound pods",
            )
            node = next(p.spec.node_name for p in bound if p.metadata.name.startswith("train-"))
            gpus = [
                {
                    "index": i, "uuid": f"GPU-{node}-{i}", "model": "A100", "memoryMib": 40_960,
                    "health": "Unhealthy" if i == 0 else "Healthy",
                    "faults": [{"signal": "xid", "code": 48, "action": "reset"}] if i == 0 else [],
                }
                for i in range(8)
            ]  # fmt: skip
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "GPUNode",
                "metadata": {"name": node},
            }
            custom.create_cluster_custom_object(GROUP, VERSION, "gpunodes", {**body, "spec": {}})
            custom.patch_cluster_custom_object_status(
                GROUP, VERSION, "gpunodes", node, {"status": {"gpus": gpus}}
            )
            wait_for(operator.gpunodes.values, what="the GPUNode cached")
            for _ in range(4):  # the fault's cycles: cordon, recovery, re-creation
                run_cycle_checked(operator)
            assert operator.stats.bound >= 3
        finally:
            stop.set()
