"""A Topology that leaves a level's oversubscription unsaid is refused, never taken as 1:1
(issue 32, item 5): the chart's CRD makes the field required, so the API server (here the
emulator, through the official client) answers 422 naming the field, and a Topology that states
it is stored as written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

ROOT = Path(__file__).resolve().parents[2]
CHART_CRD = ROOT / "helm" / "voltpack" / "crds" / "topologies.voltpack.io.yaml"
GROUP, VERSION = "voltpack.io", "v1alpha1"


def topology(levels: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Topology",
        "metadata": {"name": "fabric"},
        "spec": {"levels": levels},
    }


@pytest.fixture(autouse=True)
def chart_crd(extensions: client.ApiextensionsV1Api) -> None:
    """The Topology CRD exactly as the chart ships it."""
    extensions.create_custom_resource_definition(yaml.safe_load(CHART_CRD.read_text()))


def test_a_level_without_oversubscription_is_refused_naming_the_field(
    custom: client.CustomObjectsApi,
) -> None:
    unsaid = topology(
        [
            {"nodeLabel": "example.com/spine", "oversubscription": 4},
            {"nodeLabel": "example.com/leaf"},
        ]
    )
    with pytest.raises(ApiException) as refused:
        custom.create_cluster_custom_object(GROUP, VERSION, "topologies", unsaid)
    assert refused.value.status == 422
    causes = json.loads(refused.value.body)["details"]["causes"]
    assert [(c["field"], c["reason"]) for c in causes] == [
        ("spec.levels[1].oversubscription", "FieldValueRequired")
    ]
    with pytest.raises(ApiException):
        custom.get_cluster_custom_object(GROUP, VERSION, "topologies", "fabric")


def test_a_topology_that_states_it_is_stored_as_written(custom: client.CustomObjectsApi) -> None:
    levels = [
        {"nodeLabel": "example.com/spine", "oversubscription": 4},
        {"nodeLabel": "example.com/leaf", "oversubscription": 1},
    ]
    custom.create_cluster_custom_object(GROUP, VERSION, "topologies", topology(levels))
    stored = custom.get_cluster_custom_object(GROUP, VERSION, "topologies", "fabric")
    assert stored["spec"]["levels"] == levels
