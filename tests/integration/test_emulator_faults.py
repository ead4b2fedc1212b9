"""Fault injection: errors, delays, dropped watches, compaction, as seen by real clients."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import Kubectl, pod_manifest
from voltpack.emulator import RunningEmulator


def test_a_500_then_success(core: client.CoreV1Api, emulator: RunningEmulator) -> None:
    emulator.faults.fail_next(1, status=500)
    with pytest.raises(ApiException) as failed:
        core.list_node()
    body = json.loads(failed.value.body)
    assert failed.value.status == 500
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "InternalError", 500)
    assert len(core.list_node().items) == 4
    assert emulator.faults.pending() == 0


def test_faults_only_hit_matching_requests(
    core: client.CoreV1Api, emulator: RunningEmulator
) -> None:
    rule = emulator.faults.fail_next(2, status=503, verb="create", path=r"/pods$")
    core.list_namespaced_pod("default")  # a list is not a create
    core.create_namespaced_config_map("default", {"metadata": {"name": "unaffected"}})
    statuses = []
    for _ in range(3):
        try:
            core.create_namespaced_pod("default", pod_manifest("retry-me"))
            statuses.append(201)
        except ApiException as exc:
            statuses.append(exc.status)
            assert exc.headers["Retry-After"] == "1"
    assert statuses == [503, 503, 201]
    assert rule.hits == 2 and emulator.faults.pending() == 0


def test_delayed_requests_still_succeed(core: client.CoreV1Api, emulator: RunningEmulator) -> None:
    rule = emulator.faults.delay_next(0.05, 2, method="GET")
    assert core.read_node("cpu-0").metadata.name == "cpu-0"
    assert core.read_node("gpu-a100-0").metadata.name == "gpu-a100-0"
    assert rule.hits == 2 and emulator.faults.pending() == 0


def test_cleared_faults_do_nothing(core: client.CoreV1Api, emulator: RunningEmulator) -> None:
    emulator.faults.fail_next(5)
    emulator.faults.clear()
    assert core.list_node().items


def test_kubectl_sees_an_injected_error(kubectl: Kubectl, emulator: RunningEmulator) -> None:
    emulator.faults.fail_next(1, status=500, verb="list", path="/nodes", message="etcd is down")
    failed = kubectl("get", "nodes", check=False)
    assert failed.returncode != 0 and "etcd is down" in failed.stderr
    assert "cpu-0" in kubectl("get", "nodes").stdout
