"""The operator's queue translations: Queue objects, pods to gangs, conditions (no API calls)."""

from __future__ import annotations

from typing import Any

from tests.unit.builders import gpu_node, snapshot_of
from voltpack.model.resources import GpuJobSpec
from voltpack.operator.scheduling.cluster_view import pending_work
from voltpack.operator.scheduling.jobs import worker_pod
from voltpack.operator.scheduling.queues import (
    pending_queues,
    queue_conditions,
    queue_tree,
    running_gangs,
)
from voltpack.scheduler.queue_cycle import QueueReport


def queue_object(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def pod(
    name: str,
    *,
    node: str | None = None,
    gpus: str | None = None,
    group: str | None = None,
    queue: str | None = None,
    preemptible: bool = False,
    started: str | None = None,
    priority: int = 0,
) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if gpus is not None:
        annotations["voltpack.io/gpu-indices"] = gpus
    if group:
        annotations["voltpack.io/pod-group"] = group
    if queue:
        annotations["voltpack.io/queue"] = queue
    if preemptible:
        annotations["voltpack.io/preemptible"] = "true"
    count = len(gpus.split(",")) if gpus else 1
    spec: dict[str, Any] = {
        "schedulerName": "voltpack",
        "priority": priority,
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(count)}}}],
    }
    if node:
        spec["nodeName"] = node
    status = {"phase": "Running", "startTime": started} if started else {"phase": "Pending"}
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": spec,
        "status": status,
    }


def test_queue_objects_with_bad_specs_are_named_with_the_field() -> None:
    tree = queue_tree(
        [
            queue_object("ok", quotas=[{"gpuModel": "A100", "guaranteed": 2}]),
            queue_object("bad", quotas=[{"gpuModel": "A100", "guaranteed": 4, "limit": 1}]),
            queue_object("typo", wieght=2),
            queue_object("child-of-bad", parent="bad"),
        ]
    )
    assert set(tree.queues) == {"ok", "default"}
    assert tree.invalid["bad"].startswith("Queue bad: field spec.quotas.0: gpuModel A100: limit=1")
    assert "field spec.wieght" in tree.invalid["typo"]
    assert "parent 'bad' is invalid" in tree.invalid["child-of-bad"]


def test_running_gangs_group_pods_and_start_when_all_started() -> None:
    snapshot = snapshot_of(gpu_node("n0", 8, "A100"), gpu_node("n1", 8, "A100"))
    pods = [
        pod("g-0", node="n0", gpus="0,1", group="g", queue="q", preemptible=True,
            started="2025-01-01T00:00:10Z", priority=3),
        pod("g-1", node="n1", gpus="0,1", group="g", queue="q", preemptible=True,
            started="2025-01-01T00:00:20Z", priority=3),
        pod("lone", node="n1", gpus="2", started=None),
        pod("unrecorded", node="n1"),  # bound by someone else: no GPU indices
        pod("waiting"),
    ]  # fmt: skip
    gangs = {g.name: g for g in running_gangs(pods, snapshot)}
    assert set(gangs) == {"default/g", "default/lone"}
    gang = gangs["default/g"]
    assert (gang.queue, gang.priority, gang.preemptible) == ("q", 3, True)
    assert gang.started_s is not None and gang.started_s % 60 == 20  # the later start
    assert [(n, g) for _, n, g in gang.pods] == [(0, (0, 1)), (1, (0, 1))]
    assert gangs["default/lone"].queue == "default"
    assert gangs["default/lone"].started_s is None


def test_pending_gangs_take_the_queue_of_their_first_member() -> None:
    pods = [pod("a", group="g", queue="team"), pod("b", group="g", queue="team"), pod("c")]
    work = pending_work(pods)
    assert pending_queues(work, pods) == {
        "default/g": ("team", False),
        "default/c": ("default", False),
    }


def test_gpujob_workers_carry_the_queue_and_preemptibility() -> None:
    spec = GpuJobSpec.model_validate(
        {"workers": 1, "queue": "research", "preemptible": True, "template": {}}
    )
    job = {"metadata": {"name": "j", "namespace": "default", "uid": "u"}, "spec": {}}
    annotations = worker_pod(job, spec, 0)["metadata"]["annotations"]
    assert annotations["voltpack.io/queue"] == "research"
    assert annotations["voltpack.io/preemptible"] == "true"


def test_conditions_name_the_limit_and_the_borrowed_gpus() -> None:
    report = QueueReport(
        allocated_gpus={"A100": 8.0},
        borrowed_gpus={"A100": 2.0},
        pending_gangs=1,
        at_limit=["queue q: A100 8 of limit 8 GPUs"],
        held_by_limit=1,
    )
    at_limit, borrowing = queue_conditions(report)
    assert at_limit["type"] == "AtLimit" and at_limit["status"] == "True"
    assert at_limit["message"] == (
        "queue q: A100 8 of limit 8 GPUs; 1 gang(s) wait: they would exceed a limit"
    )
    assert borrowing["status"] == "True" and "A100 2" in borrowing["message"]
    calm = queue_conditions(QueueReport({}, {}, 0))
    assert [c["status"] for c in calm] == ["False", "False"]
