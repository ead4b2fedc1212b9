"""Core API through the official `kubernetes` client: discovery, CRUD, patch, errors, binding."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import binding, pod_manifest, wait_for
from voltpack.emulator import RunningEmulator


def status_body(error: ApiException) -> dict[str, Any]:
    body = json.loads(error.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"
    assert body["status"] == "Failure" and body["code"] == error.status
    return body


# --- discovery -----------------------------------------------------------------------------


def test_discovery_lists_core_and_group_resources(api_client: client.ApiClient) -> None:
    version = client.VersionApi(api_client).get_code()
    assert (version.major, version.minor) == ("1", "32")
    assert client.CoreApi(api_client).get_api_versions().versions == ["v1"]
    resources = {r.name: r for r in client.CoreV1Api(api_client).get_api_resources().resources}
    assert resources["pods"].short_names == ["po"] and resources["pods"].namespaced
    assert resources["nodes"].short_names == ["no"] and not resources["nodes"].namespaced
    assert resources["namespaces"].short_names == ["ns"]
    assert resources["configmaps"].short_names == ["cm"]
    assert resources["events"].short_names == ["ev"]
    assert resources["pods/binding"].verbs == ["create"]
    assert set(resources["pods/status"].verbs) == {"get", "patch", "update"}
    assert "watch" in resources["pods"].verbs
    groups = {g.name for g in client.ApisApi(api_client).get_api_versions().groups}
    assert {"apiextensions.k8s.io", "coordination.k8s.io", "events.k8s.io"} <= groups
    leases = client.CoordinationV1Api(api_client).get_api_resources().resources
    assert [r.name for r in leases] == ["leases"]


def get_raw(api_client: client.ApiClient, path: str) -> tuple[int, bytes]:
    response = api_client.call_api(*api_client.param_serialize(method="GET", resource_path=path))
    return response.status, response.read()


def test_trailing_slashes_and_legacy_watch_paths(
    api_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    status, body = get_raw(api_client, "/api/v1/")
    assert status == 200 and json.loads(body)["kind"] == "APIResourceList"
    status, body = get_raw(api_client, "/apis/coordination.k8s.io/v1/")
    assert status == 200 and json.loads(body)["groupVersion"] == "coordination.k8s.io/v1"
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "legacy"}})
    status, body = get_raw(api_client, "/api/v1/namespaces/default/configmaps/legacy/")
    assert status == 200 and json.loads(body)["metadata"]["name"] == "legacy"
    status, body = get_raw(
        api_client,
        f"/api/v1/watch/namespaces/default/configmaps?resourceVersion={start}&timeoutSeconds=1",
    )
    events = [json.loads(line) for line in body.splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "legacy")]
    status, body = get_raw(api_client, "/apis/no.such.group/v1")
    assert status == 404 and json.loads(body)["reason"] == "NotFound"


# --- nodes ---------------------------------------------------------------------------------


def test_preloaded_nodes_expose_gpus_labels_and_ready(core: client.CoreV1Api) -> None:
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert set(nodes) == {"gpu-a100-0", "gpu-a100-1", "gpu-v100-0", "cpu-0"}
    a100 = nodes["gpu-a100-0"]
    assert a100.status.capacity["nvidia.com/gpu"] == "8"
    assert a100.status.allocatable["nvidia.com/gpu"] == "8"
    assert a100.status.capacity["cpu"] == "64"
    assert a100.metadata.labels["voltpack.io/gpu-model"] == "A100"
    assert nodes["gpu-v100-0"].metadata.labels["voltpack.io/gpu-model"] == "V100M16"
    assert "nvidia.com/gpu" not in nodes["cpu-0"].status.capacity
    ready = {c.type: c.status for c in a100.status.conditions}
    assert ready["Ready"] == "True"


def test_node_create_get_patch_status_and_delete(core: client.CoreV1Api) -> None:
    created = core.create_node({"metadata": {"name": "extra", "labels": {"pool": "a"}}, "spec": {}})
    assert created.metadata.uid and created.metadata.resource_version
    core.patch_node("extra", {"metadata": {"labels": {"pool": "b"}}})
    core.patch_node_status(
        "extra",
        {
            "status": {
                "capacity": {"nvidia.com/gpu": "2"},
                "conditions": [{"type": "Ready", "status": "True"}],
            }
        },
    )
    node = core.read_node("extra")
    assert node.metadata.labels == {"pool": "b"}
    assert node.status.capacity == {"nvidia.com/gpu": "2"}
    # a write of the main resource cannot change status
    node.status.capacity = {"nvidia.com/gpu": "9"}
    node.spec.unschedulable = True
    updated = core.replace_node("extra", node)
    assert updated.spec.unschedulable is True
    assert updated.status.capacity == {"nvidia.com/gpu": "2"}
    core.delete_node("extra")
    with pytest.raises(ApiException) as missing:
        core.read_node("extra")
    assert missing.value.status == 404


# --- pods ----------------------------------------------------------------------------------


def test_pod_create_fills_system_metadata_and_defaults(core: client.CoreV1Api) -> None:
    pod = core.create_namespaced_pod("default", pod_manifest("train-0", gpus=2))
    assert pod.metadata.uid and pod.metadata.creation_timestamp
    assert int(pod.metadata.resource_version) > 0
    assert pod.metadata.generation == 1
    assert pod.metadata.namespace == "default"
    assert pod.status.phase == "Pending"
    assert pod.spec.scheduler_name == "voltpack"
    assert pod.spec.restart_policy == "Always"
    resources = pod.spec.containers[0].resources
    assert resources.limits["nvidia.com/gpu"] == "2"
    assert resources.requests["nvidia.com/gpu"] == "2"
    fetched = core.read_namespaced_pod("train-0", "default")
    assert fetched.metadata.uid == pod.metadata.uid


def test_generate_name(core: client.CoreV1Api) -> None:
    manifest = pod_manifest("")
    manifest["metadata"] = {"generateName": "worker-"}
    first = core.create_namespaced_pod("default", manifest)
    second = core.create_namespaced_pod("default", manifest)
    assert first.metadata.name.startswith("worker-") and len(first.metadata.name) == 12
    assert first.metadata.name != second.metadata.name


def test_errors_are_status_objects_with_reason_and_code(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_pod("nope", "default")
    body = status_body(missing.value)
    assert (missing.value.status, body["reason"]) == (404, "NotFound")
    assert body["message"] == 'pods "nope" not found'
    assert body["details"] == {"name": "nope", "kind": "pods"}

    core.create_namespaced_pod("default", pod_manifest("dup"))
    with pytest.raises(ApiException) as exists:
        core.create_namespaced_pod("default", pod_manifest("dup"))
    assert (exists.value.status, status_body(exists.value)["reason"]) == (409, "AlreadyExists")

    with pytest.raises(ApiException) as no_namespace:
        core.create_namespaced_pod("nowhere", pod_manifest("p"))
    assert no_namespace.value.status == 404
    assert status_body(no_namespace.value)["message"] == 'namespaces "nowhere" not found'

    with pytest.raises(ApiException) as bad_selector:
        core.list_namespaced_pod("default", label_selector="a in (b")
    assert (bad_selector.value.status, status_body(bad_selector.value)["reason"]) == (
        400,
        "BadRequest",
    )
    with pytest.raises(ApiException) as bad_field:
        core.list_namespaced_pod("default", field_selector="spec.unknown=x")
    assert bad_field.value.status == 400
    assert "field label not supported: spec.unknown" in status_body(bad_field.value)["message"]


def test_method_not_allowed_is_405(api_client: client.ApiClient) -> None:
    request = api_client.param_serialize(
        method="PUT", resource_path="/api/v1/namespaces/default/pods", body={}
    )
    response = api_client.call_api(*request)
    body = json.loads(response.read())
    assert response.status == 405
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "MethodNotAllowed", 405)


def test_invalid_pods_are_422_naming_the_fields(core: client.CoreV1Api) -> None:
    no_containers = pod_manifest("empty")
    no_containers["spec"]["containers"] = []
    with pytest.raises(ApiException) as empty:
        core.create_namespaced_pod("default", no_containers)
    body = status_body(empty.value)
    assert (empty.value.status, body["reason"]) == (422, "Invalid")
    assert body["details"]["kind"] == "Pod" and body["details"]["name"] == "empty"
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.containers"]
    assert body["message"] == 'Pod "empty" is invalid: spec.containers: Required value'

    with pytest.raises(ApiException) as bad_name:
        core.create_namespaced_pod("default", pod_manifest("Bad_Name"))
    causes = status_body(bad_name.value)["details"]["causes"]
    assert causes[0]["field"] == "metadata.name"
    assert "RFC 1123" in causes[0]["message"]

    unequal = pod_manifest("gpu-mismatch", gpus=2)
    unequal["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    with pytest.raises(ApiException) as gpu:
        core.create_namespaced_pod("default", unequal)
    fields = [c["field"] for c in status_body(gpu.value)["details"]["causes"]]
    assert fields == ["spec.containers[0].resources.requests[nvidia.com/gpu]"]


def test_pod_spec_is_immutable_except_images(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("fixed"))
    core.patch_namespaced_pod(
        "fixed", "default", {"spec": {"containers": [{"name": "main", "image": "x:2"}]}}
    )
    pod = core.read_namespaced_pod("fixed", "default")
    assert pod.spec.containers[0].image == "x:2"
    assert pod.metadata.generation == 2
    with pytest.raises(ApiException) as forbidden:
        core.patch_namespaced_pod("fixed", "default", {"spec": {"nodeName": "gpu-a100-0"}})
    assert forbidden.value.status == 422
    assert status_body(forbidden.value)["details"]["causes"][0]["field"] == "spec"


# --- patch types ---------------------------------------------------------------------------


def test_three_patch_types_on_a_configmap(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cfg", "labels": {"a": "1"}}, "data": {"x": "1", "y": "2"}}
    )
    core.patch_namespaced_config_map(
        "cfg",
        "default",
        {"data": {"y": None, "z": "3"}},
        _content_type="application/merge-patch+json",
    )
    assert core.read_namespaced_config_map("cfg", "default").data == {"x": "1", "z": "3"}
    core.patch_namespaced_config_map(
        "cfg",
        "default",
        [
            {"op": "test", "path": "/data/x", "value": "1"},
            {"op": "replace", "path": "/data/x", "value": "10"},
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "remove", "path": "/data/z"},
        ],
    )
    cfg = core.read_namespaced_config_map("cfg", "default")
    assert cfg.data == {"x": "10"} and cfg.metadata.labels == {"a": "1", "b": "2"}
    core.patch_namespaced_config_map("cfg", "default", {"data": {"w": "4"}})  # strategic
    assert core.read_namespaced_config_map("cfg", "default").data == {"x": "10", "w": "4"}
    with pytest.raises(ApiException) as failed_test:
        core.patch_namespaced_config_map(
            "cfg", "default", [{"op": "test", "path": "/data/x", "value": "nope"}]
        )
    assert failed_test.value.status == 422


def test_strategic_merge_merges_containers_by_name(core: client.CoreV1Api) -> None:
    manifest = pod_manifest("multi")
    manifest["spec"]["containers"].append({"name": "sidecar", "image": "side:1"})
    core.create_namespaced_pod("default", manifest)
    core.patch_namespaced_pod(
        "multi",
        "default",
        {
            "metadata": {"finalizers": ["example.io/keep"]},
            "spec": {"containers": [{"name": "sidecar", "image": "side:2"}]},
        },
    )
    pod = core.read_namespaced_pod("multi", "default")
    assert [(c.name, c.image) for c in pod.spec.containers] == [
        ("main", "registry.example/train:1.0"),
        ("sidecar", "side:2"),
    ]
    core.patch_namespaced_pod(
        "multi",
        "default",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.io/keep"]}},
    )
    assert core.read_namespaced_pod("multi", "default").metadata.finalizers is None


def test_patch_of_a_missing_object_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        core.patch_namespaced_config_map("ghost", "default", {"data": {"a": "b"}})
    assert missing.value.status == 404


# --- concurrency, generation, status -------------------------------------------------------


def test_stale_update_is_409_conflict(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "occ"}, "data": {"v": "0"}})
    first = core.read_namespaced_config_map("occ", "default")
    second = core.read_namespaced_config_map("occ", "default")
    first.data = {"v": "1"}
    core.replace_namespaced_config_map("occ", "default", first)
    second.data = {"v": "2"}
    with pytest.raises(ApiException) as stale:
        core.replace_namespaced_config_map("occ", "default", second)
    body = status_body(stale.value)
    assert (stale.value.status, body["reason"]) == (409, "Conflict")
    assert "the object has been modified" in body["message"]
    assert core.read_namespaced_config_map("occ", "default").data == {"v": "1"}


def test_resource_version_is_one_global_counter(core: client.CoreV1Api) -> None:
    before = int(core.list_namespaced_config_map("default").metadata.resource_version)
    a = core.create_namespaced_config_map("default", {"metadata": {"name": "rv-a"}})
    b = core.create_namespaced_config_map("kube-system", {"metadata": {"name": "rv-b"}})
    assert before < int(a.metadata.resource_version) < int(b.metadata.resource_version)
    listed = core.list_namespaced_config_map("default")
    assert int(listed.metadata.resource_version) == int(b.metadata.resource_version)
    unchanged = core.patch_namespaced_config_map("rv-a", "default", {"metadata": {}})
    assert unchanged.metadata.resource_version == a.metadata.resource_version


def test_pod_status_subresource_writes_only_status(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("st", labels={"v": "1"}))
    pod = core.read_namespaced_pod("st", "default")
    pod.status.phase = "Failed"
    pod.metadata.labels = {"v": "2"}
    core.replace_namespaced_pod_status("st", "default", pod)
    after = core.read_namespaced_pod("st", "default")
    assert after.status.phase == "Failed"
    assert after.metadata.labels == {"v": "1"}
    assert after.metadata.generation == 1
    after.status.phase = "Pending"
    after.metadata.labels = {"v": "3"}
    core.replace_namespaced_pod("st", "default", after)
    final = core.read_namespaced_pod("st", "default")
    assert final.status.phase == "Failed" and final.metadata.labels == {"v": "3"}


# --- delete and finalizers -----------------------------------------------------------------


def test_finalizers_keep_the_object_until_removed(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "held", "finalizers": ["voltpack.io/cleanup"]}}
    )
    core.delete_namespaced_config_map("held", "default")
    held = core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.finalizers == ["voltpack.io/cleanup"]
    with pytest.raises(ApiException) as no_new:
        core.patch_namespaced_config_map(
            "held",
            "default",
            {"metadata": {"finalizers": ["voltpack.io/cleanup", "x.io/more"]}},
            _content_type="application/merge-patch+json",
        )
    assert no_new.value.status == 422
    core.patch_namespaced_config_map(
        "held",
        "default",
        {"metadata": {"finalizers": None}},
        _content_type="application/merge-patch+json",
    )
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("held", "default")
    assert gone.value.status == 404


def test_delete_answers_and_second_delete_is_404(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "bye"}})
    result = core.delete_namespaced_config_map("bye", "default")
    assert result["status"] == "Success" and result["details"]["name"] == "bye"
    assert result["details"]["kind"] == "configmaps"
    with pytest.raises(ApiException) as again:
        core.delete_namespaced_config_map("bye", "default")
    assert again.value.status == 404
    core.create_namespaced_pod("default", pod_manifest("unbound"))
    deleted = core.delete_namespaced_pod("unbound", "default", _preload_content=False)
    assert json.loads(deleted.data)["kind"] == "Pod"


def test_deleting_an_owner_collects_its_dependents(core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner.metadata.uid,
    }
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "child", "ownerReferences": [reference]}}
    )
    core.delete_namespaced_config_map("owner", "default")
    with pytest.raises(ApiException) as collected:
        core.read_namespaced_config_map("child", "default")
    assert collected.value.status == 404


def test_deleting_a_namespace_deletes_its_content(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "team-a"}})
    assert core.read_namespace("team-a").status.phase == "Active"
    core.create_namespaced_config_map("team-a", {"metadata": {"name": "c"}})
    core.create_namespaced_pod("team-a", pod_manifest("p"))
    core.delete_namespace("team-a")
    with pytest.raises(ApiException) as gone:
        core.read_namespace("team-a")
    assert gone.value.status == 404
    assert (
        core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=team-a").items
        == []
    )
    with pytest.raises(ApiException) as protected:
        core.delete_namespace("default")
    assert protected.value.status == 403


# --- selectors and paging ------------------------------------------------------------------


def test_label_and_field_selectors(core: client.CoreV1Api) -> None:
    specs = {
        "a": ({"app": "train", "tier": "gold"}, "gpu-a100-0"),
        "b": ({"app": "train", "tier": "silver"}, "gpu-a100-1"),
        "c": ({"app": "serve"}, None),
        "d": ({}, None),
    }
    for name, (labels, node) in specs.items():
        core.create_namespaced_pod("default", pod_manifest(name, labels=labels, node_name=node))

    def names(**kwargs: str) -> list[str]:
        return sorted(p.metadata.name for p in core.list_namespaced_pod("default", **kwargs).items)

    assert names(label_selector="app=train") == ["a", "b"]
    assert names(label_selector="app==train,tier!=gold") == ["b"]
    assert names(label_selector="tier in (gold, silver)") == ["a", "b"]
    assert names(label_selector="app notin (train)") == ["c", "d"]
    assert names(label_selector="tier") == ["a", "b"]
    assert names(label_selector="!tier") == ["c", "d"]
    assert names(label_selector="app,!tier") == ["c"]
    assert names(field_selector="spec.nodeName=gpu-a100-0") == ["a"]
    assert names(field_selector="spec.nodeName=") == ["c", "d"]
    assert names(field_selector="spec.nodeName!=,metadata.name!=a") == ["b"]
    assert names(field_selector="spec.schedulerName==voltpack,metadata.name=c") == ["c"]
    assert names(field_selector="status.phase=Pending,spec.nodeName=") == ["c", "d"]
    all_ns = core.list_pod_for_all_namespaces(field_selector="metadata.namespace=default")
    assert len(all_ns.items) == 4
    assert [
        n.metadata.name
        for n in core.list_node(label_selector="voltpack.io/gpu-model=V100M16").items
    ] == ["gpu-v100-0"]


def test_list_paging_with_limit_and_continue(core: client.CoreV1Api) -> None:
    for index in range(5):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"page-{index}"}})
    first = core.list_namespaced_config_map("default", limit=2)
    assert [c.metadata.name for c in first.items] == ["page-0", "page-1"]
    assert first.metadata.remaining_item_count == 3
    second = core.list_namespaced_config_map("default", limit=2, _continue=first.metadata._continue)
    assert [c.metadata.name for c in second.items] == ["page-2", "page-3"]
    third = core.list_namespaced_config_map("default", limit=2, _continue=second.metadata._continue)
    assert [c.metadata.name for c in third.items] == ["page-4"]
    assert not third.metadata._continue


# --- leases and events ---------------------------------------------------------------------


def test_lease_lifecycle(coordination: client.CoordinationV1Api) -> None:
    lease = coordination.create_namespaced_lease(
        "kube-system",
        {
            "metadata": {"name": "voltpack-leader"},
            "spec": {
                "holderIdentity": "operator-0",
                "leaseDurationSeconds": 15,
                "acquireTime": "2025-01-01T00:00:00.000000Z",
                "renewTime": "2025-01-01T00:00:00.000000Z",
            },
        },
    )
    assert lease.spec.holder_identity == "operator-0"
    lease.spec.renew_time = "2025-01-01T00:00:10.000000Z"
    renewed = coordination.replace_namespaced_lease("voltpack-leader", "kube-system", lease)
    assert renewed.spec.renew_time.second == 10
    coordination.patch_namespaced_lease(
        "voltpack-leader",
        "kube-system",
        {"spec": {"holderIdentity": "operator-1"}},
        _content_type="application/merge-patch+json",
    )
    coordination.patch_namespaced_lease(
        "voltpack-leader",
        "kube-system",
        [{"op": "add", "path": "/spec/leaseTransitions", "value": 1}],
    )
    current = coordination.read_namespaced_lease("voltpack-leader", "kube-system")
    assert (current.spec.holder_identity, current.spec.lease_transitions) == ("operator-1", 1)
    with pytest.raises(ApiException) as stale:
        coordination.replace_namespaced_lease("voltpack-leader", "kube-system", lease)
    assert stale.value.status == 409
    listed = coordination.list_namespaced_lease("kube-system")
    assert [item.metadata.name for item in listed.items] == ["voltpack-leader"]
    coordination.delete_namespaced_lease("voltpack-leader", "kube-system")
    assert coordination.list_namespaced_lease("kube-system").items == []


def test_core_events(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("ev-pod"))
    core.create_namespaced_event(
        "default",
        {
            "metadata": {"generateName": "ev-pod."},
            "involvedObject": {"kind": "Pod", "name": "ev-pod", "namespace": "default"},
            "reason": "Scheduled",
            "message": "node gpu-a100-0: 8 of 8 GPUs free, needs 1",
            "type": "Normal",
            "source": {"component": "voltpack"},
        },
    )
    events = core.list_namespaced_event(
        "default", field_selector="involvedObject.name=ev-pod,reason=Scheduled,source=voltpack"
    ).items
    assert len(events) == 1 and events[0].message.startswith("node gpu-a100-0")


# --- binding and the lifecycle simulator ---------------------------------------------------


def test_binding_returns_201_status_and_rebinding_is_409(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("bind-me", gpus=1))
    response = core.create_namespaced_binding(
        "default", binding("bind-me", "gpu-a100-0"), _preload_content=False
    )
    assert response.status == 201
    assert json.loads(response.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    pod = core.read_namespaced_pod("bind-me", "default")
    assert pod.spec.node_name == "gpu-a100-0"
    scheduled = [c for c in pod.status.conditions if c.type == "PodScheduled"]
    assert scheduled[0].status == "True"
    with pytest.raises(ApiException) as again:
        core.create_namespaced_binding(
            "default", binding("bind-me", "gpu-a100-1"), _preload_content=False
        )
    body = status_body(again.value)
    assert (again.value.status, body["reason"]) == (409, "Conflict")
    assert 'already assigned to node "gpu-a100-0"' in body["message"]
    with pytest.raises(ApiException) as missing:
        core.create_namespaced_binding(
            "default", binding("ghost", "gpu-a100-1"), _preload_content=False
        )
    assert missing.value.status == 404


def test_binding_a_pod_with_scheduling_gates_is_refused(core: client.CoreV1Api) -> None:
    manifest = pod_manifest("gated", gpus=1)
    manifest["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    core.create_namespaced_pod("default", manifest)
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_binding(
            "default", binding("gated", "gpu-a100-0"), _preload_content=False
        )
    body = status_body(refused.value)
    assert refused.value.status == 409
    assert "pod gated has non-empty .spec.schedulingGates" in body["message"]
    assert core.read_namespaced_pod("gated", "default").spec.node_name is None


def test_pod_binding_subresource(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("sub-bind"))
    response = core.create_namespaced_pod_binding(
        "sub-bind", "default", binding("sub-bind", "cpu-0"), _preload_content=False
    )
    assert response.status == 201
    assert core.read_namespaced_pod("sub-bind", "default").spec.node_name == "cpu-0"


def test_bound_pod_runs_and_finishes_after_its_duration(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(
        "default",
        pod_manifest("job-0", gpus=8, annotations={"voltpack.io/duration-seconds": "100"}),
    )
    core.create_namespaced_pod("default", pod_manifest("server-0", gpus=1))
    core.create_namespaced_binding(
        "default", binding("job-0", "gpu-a100-1"), _preload_content=False
    )
    core.create_namespaced_binding(
        "default", binding("server-0", "gpu-a100-1"), _preload_content=False
    )

    def phase(name: str) -> str:
        return str(core.read_namespaced_pod(name, "default").status.phase)

    wait_for(lambda: phase("job-0") == "Succeeded", what="job-0 to succeed")
    job = core.read_namespaced_pod("job-0", "default")
    assert job.status.start_time is not None
    terminated = job.status.container_statuses[0].state.terminated
    assert terminated.exit_code == 0 and terminated.reason == "Completed"
    wait_for(lambda: phase("server-0") == "Running", what="server-0 to run")
    server = core.read_namespaced_pod("server-0", "default")
    conditions = {c.type: c.status for c in server.status.conditions}
    assert conditions["Ready"] == "True" and conditions["PodScheduled"] == "True"
    assert server.status.container_statuses[0].ready is True
    assert server.status.pod_ip and server.status.host_ip
    assert phase("server-0") == "Running"  # no duration: runs until deleted


def test_unbound_pods_stay_pending(core: client.CoreV1Api, emulator: RunningEmulator) -> None:
    core.create_namespaced_pod("default", pod_manifest("waiting"))
    core.create_namespaced_pod("default", pod_manifest("lost", node_name="no-such-node"))
    emulator.call(lambda: None)  # let any pending lifecycle step run
    assert core.read_namespaced_pod("waiting", "default").status.phase == "Pending"
    assert core.read_namespaced_pod("lost", "default").status.phase == "Pending"


def test_deleting_a_running_pod_is_graceful(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("graceful", node_name="gpu-v100-0"))
    wait_for(
        lambda: core.read_namespaced_pod("graceful", "default").status.phase == "Running",
        what="pod to run",
    )
    response = core.delete_namespaced_pod("graceful", "default", _preload_content=False)
    assert json.loads(response.data)["metadata"]["deletionTimestamp"]

    def gone() -> bool:
        try:
            core.read_namespaced_pod("graceful", "default")
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, what="pod to be removed")


def test_delete_collection_and_dry_run(core: client.CoreV1Api) -> None:
    for name, team in (("c1", "a"), ("c2", "a"), ("c3", "b")):
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": name, "labels": {"team": team}}}
        )
    dry = core.create_namespaced_config_map("default", {"metadata": {"name": "dry"}}, dry_run="All")
    assert dry.metadata.uid and dry.metadata.resource_version is None
    core.delete_namespaced_config_map("c3", "default", dry_run="All")
    core.delete_collection_namespaced_config_map("default", label_selector="team=a")
    remaining = [c.metadata.name for c in core.list_namespaced_config_map("default").items]
    assert remaining == ["c3"]
