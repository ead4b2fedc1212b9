"""The CRDs: generated from the models, structural, in sync with the files in the repo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from voltpack.model.resources import RESOURCE_KINDS, GpuJobSpec, PowerBudgetSpec
from voltpack.operator.kube.crds import crd_file_name, crd_manifest, render, structural_schema

CRD_DIR = Path(__file__).resolve().parents[2] / "helm" / "voltpack" / "crds"
KINDS = {kind.kind: kind for kind in RESOURCE_KINDS}


def walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, value in node.items():
            found += walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += walk(value, f"{path}/{index}")
    return found


def schema_of(kind: str) -> dict[str, Any]:
    manifest = crd_manifest(KINDS[kind])
    return manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_checked_in_crd_matches_the_models(kind: str) -> None:
    path = CRD_DIR / crd_file_name(KINDS[kind])
    assert path.read_text(encoding="utf-8") == render(KINDS[kind]), "run `make crds`"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_is_structural(kind: str) -> None:
    for path, node in walk(schema_of(kind)):
        assert not {"$ref", "anyOf", "title", "$defs"} & set(node), path
        if "properties" in node:
            assert node.get("type") == "object", path
            assert "additionalProperties" not in node, path


def test_expected_names_and_scopes() -> None:
    scopes = {k: crd_manifest(v)["spec"]["scope"] for k, v in KINDS.items()}
    assert scopes == {
        "GPUNode": "Cluster",
        "GPUJob": "Namespaced",
        "Queue": "Cluster",
        "PowerBudget": "Cluster",
        "Topology": "Cluster",
        "InferenceService": "Namespaced",
    }
    assert crd_manifest(KINDS["GPUJob"])["metadata"]["name"] == "gpujobs.voltpack.io"


GOOD_JOB = {
    "apiVersion": "voltpack.io/v1alpha1",
    "kind": "GPUJob",
    "metadata": {"name": "train", "namespace": "default"},
    "spec": {
        "workers": 8,
        "gpusPerWorker": 1,
        "queue": "research",
        "template": {"spec": {"containers": [{"name": "w", "image": "trainer:1"}]}},
    },
}


def test_a_good_job_validates_against_the_crd_and_parses_with_the_model() -> None:
    jsonschema.validate(GOOD_JOB, schema_of("GPUJob"))
    spec = GpuJobSpec.model_validate(GOOD_JOB["spec"])
    assert spec.workers == 8
    assert spec.gpus_per_worker == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"workers": 0}, "workers"),
        ({"workers": "eight"}, "workers"),
        ({"gpuMilli": 1500}, "gpuMilli"),
        ({"priority": 5000}, "priority"),
    ],
)
def test_a_bad_job_is_rejected_naming_the_field(change: dict[str, Any], field: str) -> None:
    job = {**GOOD_JOB, "spec": {**GOOD_JOB["spec"], **change}}
    with pytest.raises(jsonschema.ValidationError) as error:
        jsonschema.validate(job, schema_of("GPUJob"))
    assert list(error.value.absolute_path) == ["spec", field]
    with pytest.raises(ValidationError) as model_error:
        GpuJobSpec.model_validate(job["spec"])
    assert model_error.value.errors()[0]["loc"][0] == field


def test_cross_field_rules_are_checked_by_the_model_and_shipped_as_cel() -> None:
    with pytest.raises(ValidationError, match="minWorkers=9 exceeds workers=8"):
        GpuJobSpec.model_validate({**GOOD_JOB["spec"], "minWorkers": 9})
    rules = schema_of("GPUJob")["properties"]["spec"]["x-kubernetes-validations"]
    assert any("minWorkers" in rule["rule"] for rule in rules)


def test_missing_template_is_required() -> None:
    spec = {k: v for k, v in GOOD_JOB["spec"].items() if k != "template"}
    with pytest.raises(jsonschema.ValidationError, match="'template' is a required property"):
        jsonschema.validate({**GOOD_JOB, "spec": spec}, schema_of("GPUJob"))


def test_power_budget_units_in_names() -> None:
    spec = PowerBudgetSpec.model_validate(
        {"nodeSelector": {"matchLabels": {"rack": "r1"}}, "budgetW": 12000}
    )
    assert spec.budget_w == 12000
    assert spec.node_overhead_w == 0.0
    assert "budgetW" in schema_of("PowerBudget")["properties"]["spec"]["properties"]


def test_nullable_and_free_form_conversion() -> None:
    converted = structural_schema(
        {
            "type": "object",
            "properties": {
                "a": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
                "b": {"type": "object", "additionalProperties": True},
            },
            "additionalProperties": False,
        }
    )
    assert converted == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "nullable": True},
            "b": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }


def test_crd_files_are_valid_yaml_crds() -> None:
    for path in sorted(CRD_DIR.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert document["kind"] == "CustomResourceDefinition"
        assert document["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_a_job_with_a_topology_request_validates_and_a_bad_degree_is_refused() -> None:
    job = {
        **GOOD_JOB,
        "spec": {
            **GOOD_JOB["spec"],
            "rdmaPercent": 25,
            "topology": {"requiredLevel": "leaf", "model": "gpt-13b", "tensorParallel": 8},
        },
    }
    jsonschema.validate(job, schema_of("GPUJob"))
    assert GpuJobSpec.model_validate(job["spec"]).topology is not None
    bad = {**job, "spec": {**job["spec"], "topology": {"tensorParallel": 0}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema_of("GPUJob"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {**job, "spec": {**job["spec"], "rdmaPercent": 101}}, schema_of("GPUJob")
        )
