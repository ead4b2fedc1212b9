"""GPUJob worker pods and status, computed without a server."""

from __future__ import annotations

from typing import Any

from voltpack.model.resources import GpuJobSpec
from voltpack.operator.kube.translate import pod_from_k8s
from voltpack.operator.scheduling.jobs import job_status, worker_pod

JOB: dict[str, Any] = {
    "metadata": {"name": "train", "namespace": "ml", "uid": "u-1", "generation": 2},
    "spec": {
        "workers": 2,
        "gpusPerWorker": 4,
        "gpuModels": ["H100-SXM"],
        "template": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {
                "containers": [
                    {"name": "w", "image": "t:1", "resources": {"requests": {"cpu": "8"}}}
                ]
            },
        },
    },
}


def test_worker_pod_asks_voltpack_for_the_gang() -> None:
    pod = worker_pod(JOB, GpuJobSpec.model_validate(JOB["spec"]), 1)
    meta = pod["metadata"]
    assert meta["name"] == "train-worker-1"
    assert meta["labels"] == {"team": "a", "voltpack.io/job": "train"}
    assert meta["annotations"]["voltpack.io/pod-group"] == "train"
    assert meta["annotations"]["voltpack.io/min-members"] == "2"
    assert meta["ownerReferences"][0]["uid"] == "u-1"
    assert pod["spec"]["schedulerName"] == "voltpack"
    request = pod_from_k8s(pod)
    assert (request.num_gpu, request.gpu_milli, request.cpu_milli) == (4, 1000, 8000)
    assert request.gpu_models == ("H100-SXM",)


def test_worker_pod_with_a_gpu_share() -> None:
    spec = GpuJobSpec.model_validate({**JOB["spec"], "gpusPerWorker": 1, "gpuMilli": 250})
    request = pod_from_k8s(worker_pod(JOB, spec, 0))
    assert request.is_gpu_sharing and request.gpu_milli == 250


def worker(name: str, node: str | None, phase: str, gpus: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {"voltpack.io/gpu-indices": gpus}},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase},
    }


def test_status_pending_with_the_reason() -> None:
    status = job_status(
        JOB,
        [worker("train-worker-0", None, "Pending"), worker("train-worker-1", None, "Pending")],
        {"ml/train-worker-0": "gang ml/train: only 1 of min 2 pods fit"},
    )
    assert status["phase"] == "Pending"
    condition = status["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert "only 1 of min 2" in condition["message"]


def test_status_waits_while_its_workers_are_being_created() -> None:
    """The cache shows 1 of the 2 workers just created: the scheduler holds the gang, and the
    job is waiting, not unschedulable (no FailedScheduling Event for a transient state)."""
    held = {"ml/train-worker-0": "gang ml/train: 1 of 2 members exist; waiting"}
    status = job_status(JOB, [worker("train-worker-0", None, "Pending")], held)
    condition = status["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "Waiting")
    assert condition["message"] == "0/2 bound"


def test_status_running_with_placement() -> None:
    status = job_status(
        JOB,
        [
            worker("train-worker-1", "n2", "Running", "4,5,6,7"),
            worker("train-worker-0", "n1", "Running", "0,1,2,3"),
        ],
        {},
    )
    assert status["phase"] == "Running"
    assert status["placement"] == [
        {"pod": "train-worker-0", "node": "n1", "gpus": [0, 1, 2, 3]},
        {"pod": "train-worker-1", "node": "n2", "gpus": [4, 5, 6, 7]},
    ]
    assert status["conditions"][0]["status"] == "True"
    assert status["observedGeneration"] == 2


def test_status_failed_and_succeeded() -> None:
    assert (
        job_status(JOB, [worker("a", "n1", "Failed"), worker("b", "n1", "Running")], {})["phase"]
        == "Failed"
    )
    done = [worker("a", "n1", "Succeeded"), worker("b", "n1", "Succeeded")]
    assert job_status(JOB, done, {})["phase"] == "Succeeded"
