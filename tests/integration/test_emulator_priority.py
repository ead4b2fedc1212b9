"""The emulator's Priority admission, through the official client: what voltpack relies on
(its own pods carry their priority in an annotation because of it)."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.integration.conftest import pod_manifest


def test_a_pod_takes_its_class_priority_and_a_literal_one_is_refused(
    api_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    scheduling = client.SchedulingV1Api(api_client)
    scheduling.create_priority_class({"metadata": {"name": "serving"}, "value": 2000})
    classed = pod_manifest("serve")
    classed["spec"]["priorityClassName"] = "serving"
    created = core.create_namespaced_pod("default", classed)
    assert created.spec.priority == 2000
    assert created.spec.preemption_policy == "PreemptLowerPriority"
    assert core.create_namespaced_pod("default", pod_manifest("plain")).spec.priority == 0

    literal = pod_manifest("literal")
    literal["spec"]["priority"] = 5
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod("default", literal)
    assert refused.value.status == 403
    assert "the integer value of priority (5) must not be provided in pod spec" in str(
        refused.value.body
    )
    unknown = pod_manifest("lost")
    unknown["spec"]["priorityClassName"] = "nope"
    with pytest.raises(client.ApiException) as missing:
        core.create_namespaced_pod("default", unknown)
    assert missing.value.status == 403
    assert "no PriorityClass with name nope was found" in str(missing.value.body)
    with pytest.raises(client.ApiException) as too_high:
        scheduling.create_priority_class({"metadata": {"name": "max"}, "value": 2_000_000_000})
    assert too_high.value.status == 422
