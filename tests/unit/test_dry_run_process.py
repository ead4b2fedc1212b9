"""A dry run's child process: the same answer as planning in this process, and a clear error
(never a hang, never a crash of the API) when the child fails or runs out of time."""

from __future__ import annotations

import time

import pytest
from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi

from voltpack.operator.admin.dry_run import DRY_RUN_KINDS, plan_dry_run
from voltpack.operator.admin.dry_run_process import DryRunProcessError, run_in_child
from voltpack.operator.kube.cache import ResourceCache
from voltpack.policies.schema import example_policy_path, load_policy


def node(name: str, gpus: int) -> dict[str, object]:
    quantities = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "A100"}},
        "status": {"allocatable": quantities, "capacity": quantities,
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }  # fmt: skip


def pod(
    name: str, gpus: int, node_name: str | None = None, scheduler: str = "voltpack"
) -> dict[str, object]:
    spec: dict[str, object] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                     "creationTimestamp": "2026-11-28T00:00:00Z"},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }  # fmt: skip


def cluster() -> dict[str, list[dict[str, object]]]:
    return {
        "nodes": [node(f"gpu-{i}", 8) for i in range(3)],
        "pods": [pod("running", 8, "gpu-0"), pod("fits", 4), pod("too-big", 16)],
    }


def test_the_child_answers_as_planning_here_would() -> None:
    policy = load_policy(example_policy_path("best-fit"))
    objects = cluster()
    caches = {k: ResourceCache.holding(k, objects.get(k, [])) for k in DRY_RUN_KINDS}
    unused = ApiClient()
    here = plan_dry_run(caches, policy, lambda: 1e9, CoreV1Api(unused), CustomObjectsApi(unused))
    there = run_in_child(objects, policy, 1e9)
    assert there == here
    assert there.binds == 1 and there.pending == 1
    assert {c.subject: c.action for c in there.changes} == {
        "default/fits": "bind",
        "default/too-big": "stay-pending",
    }


def test_the_dry_run_plans_the_pods_of_the_served_names() -> None:
    """voltpack in kube-scheduler's place: the dry run plans `default-scheduler` pods too, as
    the operator serving both names would, and leaves them to kube-scheduler otherwise."""
    policy = load_policy(example_policy_path("best-fit"))
    objects = cluster()
    objects["pods"].append(pod("kubes", 2, scheduler="default-scheduler"))
    caches = {k: ResourceCache.holding(k, objects.get(k, [])) for k in DRY_RUN_KINDS}
    unused = ApiClient()
    both = frozenset({"voltpack", "default-scheduler"})
    here = plan_dry_run(
        caches, policy, lambda: 1e9, CoreV1Api(unused), CustomObjectsApi(unused), both
    )
    there = run_in_child(objects, policy, 1e9, scheduler_names=both)
    assert there == here
    assert {c.subject: c.action for c in there.changes}["default/kubes"] == "bind"
    assert there.binds == 2
    alone = run_in_child(objects, policy, 1e9)
    assert "default/kubes" not in {c.subject for c in alone.changes} and alone.binds == 1


def test_a_child_that_fails_says_why() -> None:
    policy = load_policy(example_policy_path("best-fit"))
    with pytest.raises(DryRunProcessError, match=r"process failed \(1\): .*Error"):
        run_in_child({"nodes": [{"metadata": {}}]}, policy, 1e9)  # a node without a name


def test_a_child_that_runs_too_long_is_killed() -> None:
    policy = load_policy(example_policy_path("best-fit"))
    started = time.monotonic()
    with pytest.raises(DryRunProcessError, match="did not finish within"):
        run_in_child(cluster(), policy, 1e9, timeout_s=0.0)
    assert time.monotonic() - started < 30
