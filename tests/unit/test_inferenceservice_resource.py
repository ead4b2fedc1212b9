"""The InferenceService resource: its model, its CRD, and bad specs refused naming the field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from voltpack.model.errors import InvalidRequestError
from voltpack.model.resources import RESOURCE_KINDS, InferenceServiceSpec, InferenceServiceStatus
from voltpack.operator.inference.plans import check_spec
from voltpack.operator.inference.services import describe_invalid
from voltpack.operator.kube.crds import crd_file_name, crd_manifest, render

REPO = Path(__file__).resolve().parents[2]
KIND = next(kind for kind in RESOURCE_KINDS if kind.kind == "InferenceService")
SPEC: dict[str, Any] = {
    "model": "llama3-8b",
    "slo": {"ttftMs": 1000, "tpotMs": 100},
    "ratePerSecond": 2,
    "requestSizes": [
        {"promptTokens": 512, "outputTokens": 256, "share": 0.7},
        {"promptTokens": 2000, "outputTokens": 64, "share": 0.3},
    ],
    "gpuTypes": ["A10", "L4"],
    "container": {"image": "vllm/vllm-openai:v0.6.3"},
}


def schema() -> dict[str, Any]:
    manifest = crd_manifest(KIND)
    return manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def resource(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "voltpack.io/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "default"},
        "spec": spec,
    }


def with_changes(**changes: Any) -> dict[str, Any]:
    spec = copy.deepcopy(SPEC)
    spec.update(changes)
    return spec


def test_a_good_spec_parses_with_its_defaults() -> None:
    spec = InferenceServiceSpec.model_validate(SPEC)
    assert spec.split == "auto" and spec.priority == "high"
    assert spec.scaling.mode == "forecast" and spec.scaling.quantile == 0.9
    assert spec.scaling.replan_rate_change == 0.1
    assert spec.prices == {} and spec.slo.tpot_ms == 100
    check_spec(spec)  # a known model, both types priced in the example list
    jsonschema.Draft4Validator(schema()).validate(resource(SPEC))


def test_the_example_parses_and_matches_the_crd() -> None:
    doc = yaml.safe_load((REPO / "examples" / "inferenceservice.yaml").read_text())
    jsonschema.Draft4Validator(schema()).validate(doc)
    spec = InferenceServiceSpec.model_validate(doc["spec"])
    check_spec(spec)
    assert spec.gpu_types == ["T4", "V100-32GB"]


def test_the_crd_is_namespaced_with_printer_columns_and_a_status() -> None:
    manifest = crd_manifest(KIND)
    assert manifest["metadata"]["name"] == "inferenceservices.voltpack.io"
    assert manifest["spec"]["scope"] == "Namespaced"
    version = manifest["spec"]["versions"][0]
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == [
        "Model",
        "Rate/s",
        "Replicas",
        "Ready",
        "Cost $/h",
        "Pred. SLO",
        "Phase",
        "Age",
    ]
    assert version["subresources"] == {"status": {}}
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert {"plan", "predictedCostPerHour", "planningRatePerSecond", "rateSource"} <= set(status)
    assert status["predictedSloAttainment"]["maximum"] == 1


def test_the_checked_in_crd_is_the_generated_one() -> None:
    path = REPO / "helm" / "voltpack" / "crds" / crd_file_name(KIND)
    assert path.read_text(encoding="utf-8") == render(KIND), "run `make crds`"


# (change to the good spec, the field the message must name, a word of the explanation)
BAD_SPECS: list[tuple[dict[str, Any], str, str]] = [
    ({"slo": {"ttftMs": 1000, "tpotMs": -5}}, "spec.slo.tpotMs", "greater than 0"),
    ({"slo": {"ttftMs": 1000}}, "spec.slo.tpotMs", "required"),
    ({"ratePerSecond": 0}, "spec.ratePerSecond", "greater than 0"),
    ({"split": "sometimes"}, "spec.split", "'auto' or 'never'"),
    ({"priority": "urgent"}, "spec.priority", "'high'"),
    ({"requestSizes": []}, "spec.requestSizes", "at least 1"),
    (
        {"requestSizes": [{"promptTokens": 0, "outputTokens": 8, "share": 1}]},
        "spec.requestSizes[0].promptTokens",
        "greater than or equal to 1",
    ),
    (
        {"requestSizes": [{"promptTokens": 64, "outputTokens": 8, "share": 0.5}]},
        "spec.requestSizes",
        "sum to 1",
    ),
    ({"gpuTypes": ["A10", "Z80"]}, "spec.gpuTypes[1]", "unknown GPU model 'Z80'"),
    ({"gpuTypes": ["A10", "NVIDIA-A10"]}, "spec.gpuTypes", "names A10 twice"),
    ({"prices": {"A10": 1.0, "Z80": 2.0}}, "spec.prices.Z80", "unknown GPU model"),
    ({"prices": {"A10": -1.0}}, "spec.prices.A10", "greater than 0"),
    ({"prices": {"A10": 1.0}}, "spec.gpuTypes[1]", "no price"),
    ({"scaling": {"quantile": 0.2}}, "spec.scaling.quantile", "greater than or equal to 0.5"),
    ({"scaling": {"mode": "psychic"}}, "spec.scaling.mode", "'forecast', 'reactive' or 'burst'"),
    ({"scaling": {"forecaster": "oracle"}}, "spec.scaling.forecaster", "'naive'"),
    ({"container": {"image": ""}}, "spec.container.image", "at least 1"),
    (
        {"container": {"image": "x", "env": [{"name": "1BAD", "value": "v"}]}},
        "spec.container.env[0].name",
        "pattern",
    ),
    ({"replicas": 3}, "spec.replicas", "Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("change", "field", "words"), BAD_SPECS, ids=[b[1] for b in BAD_SPECS])
def test_a_bad_spec_is_refused_naming_the_field(
    change: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        InferenceServiceSpec.model_validate(with_changes(**change))
    message = describe_invalid(caught.value)
    assert message.startswith(field + ":") or message.startswith(field + " "), message
    assert words in message, message


SCHEMA_REFUSALS = [
    ({"slo": {"ttftMs": 1000, "tpotMs": -5}}, ["spec", "slo", "tpotMs"]),
    ({"split": "sometimes"}, ["spec", "split"]),
    ({"requestSizes": []}, ["spec", "requestSizes"]),
    ({"prices": {"A10": -1.0}}, ["spec", "prices", "A10"]),
    ({"scaling": {"quantile": 1.5}}, ["spec", "scaling", "quantile"]),
]


@pytest.mark.parametrize(
    ("change", "path"), SCHEMA_REFUSALS, ids=[".".join(p) for _, p in SCHEMA_REFUSALS]
)
def test_the_crd_schema_refuses_what_it_can_check_at_admission(
    change: dict[str, Any], path: list[str]
) -> None:
    errors = list(
        jsonschema.Draft4Validator(schema()).iter_errors(resource(with_changes(**change)))
    )
    assert errors, change
    assert [list(e.absolute_path) for e in errors] == [path]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model": "llama9-1t"}, "spec.model"),
        ({"gpuTypes": ["T4"]}, "spec.gpuTypes[0]"),  # T4 has no price in the example list
    ],
)
def test_what_only_the_operator_can_check_names_the_field_too(
    change: dict[str, Any], field: str
) -> None:
    spec = InferenceServiceSpec.model_validate(with_changes(**change))
    with pytest.raises(InvalidRequestError, match=field.replace("[", r"\[").replace("]", r"\]")):
        check_spec(spec)


def test_status_round_trips_through_camel_case() -> None:
    status = InferenceServiceStatus.model_validate(
        {
            "phase": "Ready",
            "plan": [
                {
                    "gpuType": "A10",
                    "tensorParallel": 4,
                    "role": "unified",
                    "replicas": 1,
                    "costPerHour": 4.0,
                    "extrapolated": True,
                    "buckets": [{"bucket": "prompt 512-1024, output 256-384", "ratePerSecond": 2}],
                }
            ],
            "predictedCostPerHour": 4.0,
            "planningRatePerSecond": 2.0,
            "rateSource": "spec.ratePerSecond",
        }
    )
    dumped = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped["plan"][0]["tensorParallel"] == 4
    assert InferenceServiceStatus.model_validate(dumped) == status
