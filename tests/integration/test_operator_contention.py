"""The operator prices a gang's step with the running gangs' traffic (issue 32, item 6).

Emulated cluster: three leaves of two 8-GPU hosts (4 x 200 Gbit/s InfiniBand each) under one
spine, leaf uplinks 4:1. Two GPUJobs of three 8-GPU workers (megatron-18.4b, tensor 8, data 3)
cannot fit in one leaf, so each spans two, and the second must share the first's leaf uplink
(the cluster has exactly the room for both). The second's `Scheduled` prediction and the first's
slowdown gauge must both show the shared uplink.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.integration.conftest import (
    emulated_gpu_hosts,
    gpu_job_manifest,
    report_host_topology,
    wait_for,
)
from tests.integration.test_operator_topology import (
    LEAF,
    NICS,
    SPINE,
    TOPOLOGY,
    bound_pods,
    metric,
    running_operator,
)
from voltpack.emulator import RunningEmulator
from voltpack.operator.kube.conventions import IDEAL_STEP_ANNOTATION, PREDICTED_STEP_ANNOTATION
from voltpack.operator.kube.crds import install_crds

GROUP, VERSION = "voltpack.io", "v1alpha1"
LEAF_OF = {f"gpu-{i}": f"leaf-{i // 2}" for i in range(6)}
JOB_TOPOLOGY = {"model": "megatron-18.4b", "tensorParallel": 8}


@pytest.fixture
def emulator() -> Iterator[RunningEmulator]:
    with emulated_gpu_hosts(LEAF_OF, "A100-80GB") as running:
        yield running


@pytest.fixture(autouse=True)
def cluster(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, extensions: client.ApiextensionsV1Api
) -> None:
    core.create_namespace({"metadata": {"name": "voltpack-system"}})
    install_crds(extensions)
    custom.create_cluster_custom_object(GROUP, VERSION, "topologies", TOPOLOGY)
    for name, leaf in LEAF_OF.items():
        core.patch_node(name, {"metadata": {"labels": {SPINE: "spine-1", LEAF: leaf}}})
    report_host_topology(custom, LEAF_OF, {"nvlinkDomains": [list(range(8))], "nics": NICS})
    # the Topology: leaf uplinks 4:1 under one non-blocking spine


def step_seconds(pods: list[Any]) -> tuple[float, float]:
    """(predicted, ideal) step seconds voltpack wrote on a gang's pods at binding."""
    annotations = pods[0].metadata.annotations
    return float(annotations[PREDICTED_STEP_ANNOTATION]), float(annotations[IDEAL_STEP_ANNOTATION])


def test_a_gang_sharing_an_uplink_is_predicted_slower_and_slows_the_running_one(
    emulator: RunningEmulator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    first = gpu_job_manifest("first", 3, 8, topology=JOB_TOPOLOGY)
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", first)
    with running_operator(emulator) as operator:
        first_pods = bound_pods(core, "first-worker-", 3)
        first_alone_s, ideal_s = step_seconds(first_pods)
        assert len({LEAF_OF[p.spec.node_name] for p in first_pods}) == 2
        gauge = wait_for(
            lambda: metric(operator, "voltpack_job_predicted_step_slowdown_ratio") or None,
            timeout_s=20,
            what="the slowdown gauge",
        )
        alone_ratio = gauge['{gang="default/first"}']
        assert alone_ratio == pytest.approx(
            first_alone_s / ideal_s, rel=1e-3
        )  # annotations are rounded

        second = gpu_job_manifest("second", 3, 8, topology=JOB_TOPOLOGY)
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", second)
        second_pods = bound_pods(core, "second-worker-", 3)
        second_s, second_ideal_s = step_seconds(second_pods)
        assert second_ideal_s == pytest.approx(ideal_s)
        # the same job shape on the same kind of placement, but its uplink is shared now
        assert second_s > first_alone_s * 1.01
        shared_leaf = {LEAF_OF[p.spec.node_name] for p in first_pods} & {
            LEAF_OF[p.spec.node_name] for p in second_pods
        }
        assert len(shared_leaf) == 1

        def first_slowed() -> float | None:
            ratio = metric(operator, "voltpack_job_predicted_step_slowdown_ratio").get(
                '{gang="default/first"}'
            )
            return ratio if ratio is not None and ratio > alone_ratio * 1.01 else None

        wait_for(first_slowed, timeout_s=20, what="the first gang's gauge to show the neighbour")
