"""Status writes where two writers exist carry the object's resourceVersion: a stale write
gets 409 Conflict from the API server and is computed again on the object read fresh, so a
leader handover cannot lose an update (last-write-wins of a plain merge patch)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import gpu_job_manifest
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.scheduling.jobs import FINALIZER, JobController

GROUP, VERSION, PLURAL = "voltpack.io", "v1alpha1", "gpujobs"
RECOVERED = {
    "type": "Recovered",
    "status": "True",
    "reason": "Restarted",
    "message": "gang restarted off gpu-a100-0 GPU 3 (XID 79)",
}


@pytest.fixture(autouse=True)
def setup(extensions: client.ApiextensionsV1Api) -> None:
    install_crds(extensions)


def get_job(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)  # type: ignore[no-any-return]


def test_a_stale_status_merge_patch_with_its_resource_version_gets_409(
    custom: client.CustomObjectsApi,
) -> None:
    custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, gpu_job_manifest("rv", 1, 1)
    )
    stale = get_job(custom, "rv")
    version = stale["metadata"]["resourceVersion"]
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, "default", PLURAL, "rv", {"status": {"phase": "Pending"}}
    )
    body = {"metadata": {"resourceVersion": version}, "status": {"phase": "Running"}}
    with pytest.raises(ApiException) as refused:
        custom.patch_namespaced_custom_object_status(GROUP, VERSION, "default", PLURAL, "rv", body)
    assert refused.value.status == 409
    assert "the object has been modified" in str(refused.value.body)
    assert get_job(custom, "rv")["status"]["phase"] == "Pending"


def test_a_job_status_computed_from_a_stale_job_is_computed_again_and_loses_nothing(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    manifest = gpu_job_manifest("handover", 1, 1)
    manifest["metadata"]["finalizers"] = [FINALIZER]
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, manifest)
    stale = get_job(custom, "handover")  # what the old leader's cache holds
    # the new leader records a recovery meanwhile
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, "default", PLURAL, "handover",
        {"status": {"phase": "Pending", "conditions": [RECOVERED]}},
    )  # fmt: skip
    # the old leader, finishing its cycle, reconciles the job from its stale view
    JobController(core, custom).reconcile(stale, [], {})
    status = get_job(custom, "handover")["status"]
    assert RECOVERED in [{k: c.get(k) for k in RECOVERED} for c in status["conditions"]], (
        status
    )  # a plain merge patch would have replaced the conditions without it
    assert status["conditions"][0]["type"] == "Scheduled"
