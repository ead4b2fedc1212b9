"""CustomResourceDefinitions and custom resources through the official client."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.integration.conftest import wait_for, watcher_count
from voltpack.emulator import RunningEmulator

GROUP = "example.voltpack.io"
VERSION = "v1"
PLURAL = "widgets"

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Ready", "type": "boolean", "jsonPath": ".status.ready"},
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1},
                                    "color": {
                                        "type": "string",
                                        "enum": ["red", "blue"],
                                        "default": "blue",
                                    },
                                    "port": {"x-kubernetes-int-or-string": True},
                                    "extra": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {"ready": {"type": "boolean"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


def widget(name: str, size: Any = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size, **spec},
    }


@pytest.fixture
def widgets(extensions: client.ApiextensionsV1Api) -> str:
    extensions.create_custom_resource_definition(WIDGET_CRD)
    return f"{PLURAL}.{GROUP}"


def test_crd_becomes_established_and_discoverable(
    extensions: client.ApiextensionsV1Api, api_client: client.ApiClient, widgets: str
) -> None:
    crd = extensions.read_custom_resource_definition(widgets)
    conditions = {c.type: c.status for c in crd.status.conditions}
    assert conditions["Established"] == "True" and conditions["NamesAccepted"] == "True"
    assert crd.status.accepted_names.kind == "Widget"
    assert crd.status.stored_versions == [VERSION]
    groups = {g.name: g for g in client.ApisApi(api_client).get_api_versions().groups}
    assert groups[GROUP].preferred_version.group_version == f"{GROUP}/{VERSION}"
    resources = client.CustomObjectsApi(api_client).get_api_resources(GROUP, VERSION).resources
    names = {r.name: r for r in resources}
    assert names[PLURAL].kind == "Widget" and names[PLURAL].short_names == ["wd"]
    assert f"{PLURAL}/status" in names


def test_custom_resource_crud_and_status_subresource(
    custom: client.CustomObjectsApi, widgets: str
) -> None:
    created = custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, widget("w1", 3)
    )
    assert created["metadata"]["generation"] == 1 and created["metadata"]["uid"]
    assert created["spec"] == {"size": 3, "color": "blue"}  # defaulted
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
    assert listed["kind"] == "WidgetList" and [i["metadata"]["name"] for i in listed["items"]] == [
        "w1"
    ]
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "w1", {"spec": {"size": 4}}
    )
    custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "w1",
        [{"op": "replace", "path": "/spec/color", "value": "red"}],
        _content_type="application/json-patch+json",
    )
    patched = custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "w1")
    assert patched["spec"] == {"size": 4, "color": "red"}
    assert patched["metadata"]["generation"] == 3
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, "default", PLURAL, "w1", {"status": {"ready": True}, "spec": {"size": 99}}
    )
    after_status = custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "w1")
    assert after_status["status"] == {"ready": True}
    assert after_status["spec"]["size"] == 4  # a status write leaves spec alone
    assert after_status["metadata"]["generation"] == 3  # and does not bump generation
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "w1", {"status": {"ready": False}}
    )
    assert custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "w1")[
        "status"
    ] == {"ready": True}  # the main resource cannot write status
    custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "w1")
    with pytest.raises(ApiException) as gone:
        custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "w1")
    assert gone.value.status == 404
    body = json.loads(gone.value.body)
    assert body["message"] == f'{PLURAL}.{GROUP} "w1" not found'


def test_invalid_custom_resource_is_422_naming_the_field(
    custom: client.CustomObjectsApi, widgets: str
) -> None:
    with pytest.raises(ApiException) as too_small:
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, widget("bad", 0))
    body = json.loads(too_small.value.body)
    assert (too_small.value.status, body["reason"]) == (422, "Invalid")
    assert body["details"]["kind"] == "Widget" and body["details"]["group"] == GROUP
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.size"]
    assert "spec.size" in body["message"] and "greater than or equal to 1" in body["message"]
    with pytest.raises(ApiException) as wrong_type:
        custom.create_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, widget("bad", "three", color="green")
        )
    causes = json.loads(wrong_type.value.body)["details"]["causes"]
    assert {c["field"] for c in causes} == {"spec.size", "spec.color"}
    missing = widget("bad")
    del missing["spec"]["size"]
    with pytest.raises(ApiException) as required:
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, missing)
    cause = json.loads(required.value.body)["details"]["causes"][0]
    assert (cause["field"], cause["reason"]) == ("spec.size", "FieldValueRequired")
    ok = custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, widget("port", 1, port="http")
    )
    assert ok["spec"]["port"] == "http"


def test_unknown_fields_are_pruned_or_rejected_when_strict(
    api_client: client.ApiClient, custom: client.CustomObjectsApi, widgets: str
) -> None:
    body = widget("pruned", 2, unknown="x", extra={"anything": {"goes": 1}})
    body["topLevel"] = True
    created = custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)
    assert "unknown" not in created["spec"] and "topLevel" not in created
    assert created["spec"]["extra"] == {"anything": {"goes": 1}}
    with pytest.raises(ApiException) as strict:
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            "default",
            PLURAL,
            widget("strict", 2, unknown="x"),
            field_validation="Strict",
        )
    assert strict.value.status == 400
    assert 'unknown field "spec.unknown"' in json.loads(strict.value.body)["message"]


def test_custom_resources_need_a_resource_version_to_update(
    custom: client.CustomObjectsApi, widgets: str
) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, widget("occ", 1))
    current = custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "occ")
    current["spec"]["size"] = 2
    custom.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "occ", current)
    current["spec"]["size"] = 3
    with pytest.raises(ApiException) as stale:
        custom.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "occ", current)
    assert stale.value.status == 409
    del current["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as unconditional:
        custom.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "occ", current)
    assert unconditional.value.status == 422
    with pytest.raises(ApiException) as strategic:
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "default",
            PLURAL,
            "occ",
            {"spec": {"size": 5}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert strategic.value.status == 415


def test_watch_custom_resources(
    custom: client.CustomObjectsApi, emulator: RunningEmulator, widgets: str
) -> None:
    received: list[tuple[str, str, Any]] = []
    watcher = watch.Watch()

    def consume() -> None:
        for event in watcher.stream(
            custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            "default",
            PLURAL,
            timeout_seconds=20,
        ):
            obj = event["object"]
            received.append((event["type"], obj["metadata"]["name"], obj.get("status")))
            if event["type"] == "DELETED":
                watcher.stop()

    thread = threading.Thread(target=consume)
    thread.start()
    wait_for(lambda: watcher_count(emulator) == 1, what="the watch to open")
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, widget("watched", 1))
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, "default", PLURAL, "watched", {"status": {"ready": True}}
    )
    custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "watched")
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert received == [
        ("ADDED", "watched", None),
        ("MODIFIED", "watched", {"ready": True}),
        ("DELETED", "watched", {"ready": True}),
    ]


def test_cluster_scoped_crd_and_deletion_removes_the_resources(
    extensions: client.ApiextensionsV1Api, custom: client.CustomObjectsApi
) -> None:
    crd = json.loads(json.dumps(WIDGET_CRD))
    crd["metadata"]["name"] = f"gadgets.{GROUP}"
    crd["spec"]["scope"] = "Cluster"
    crd["spec"]["names"] = {"plural": "gadgets", "kind": "Gadget"}
    extensions.create_custom_resource_definition(crd)
    gadget = widget("g1", 2)
    gadget["kind"] = "Gadget"
    custom.create_cluster_custom_object(GROUP, VERSION, "gadgets", gadget)
    assert custom.get_cluster_custom_object(GROUP, VERSION, "gadgets", "g1")["spec"]["size"] == 2
    extensions.delete_custom_resource_definition(f"gadgets.{GROUP}")
    with pytest.raises(ApiException) as unserved:
        custom.list_cluster_custom_object(GROUP, VERSION, "gadgets")
    assert unserved.value.status == 404


def test_invalid_crd_is_rejected(extensions: client.ApiextensionsV1Api) -> None:
    crd = json.loads(json.dumps(WIDGET_CRD))
    crd["metadata"]["name"] = "wrong.example.voltpack.io"
    del crd["spec"]["versions"][0]["schema"]
    with pytest.raises(ApiException) as rejected:
        extensions.create_custom_resource_definition(crd)
    assert rejected.value.status == 422
    fields = {c["field"] for c in json.loads(rejected.value.body)["details"]["causes"]}
    assert fields == {"metadata.name", "spec.versions[0].schema.openAPIV3Schema"}
