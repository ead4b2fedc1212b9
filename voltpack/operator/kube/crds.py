"""CustomResourceDefinitions generated from the pydantic resource models (`make crds`).

A Kubernetes *structural* schema differs from the JSON Schema pydantic emits: no `$ref`, no
`anyOf` with `null` (use `nullable`), no `title`, `properties` and `additionalProperties`
never together, and free-form objects marked `x-kubernetes-preserve-unknown-fields`. This
module converts one into the other, so the models stay the only source of truth.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from voltpack.model.resources import API_GROUP, API_VERSION, RESOURCE_KINDS, ResourceKind
from voltpack.operator.kube.client import call_json, status_code

PRINTER_COLUMNS: dict[str, list[dict[str, str]]] = {
    "GPUJob": [
        {"name": "Workers", "type": "integer", "jsonPath": ".spec.workers"},
        {"name": "Queue", "type": "string", "jsonPath": ".spec.queue"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    ],
    "Queue": [{"name": "Weight", "type": "number", "jsonPath": ".spec.weight"}],
    "PowerBudget": [
        {"name": "Budget W", "type": "number", "jsonPath": ".spec.budgetW"},
        {"name": "Power W", "type": "number", "jsonPath": ".status.powerW"},
    ],
    "GPUNode": [],
    "InferenceService": [
        {"name": "Model", "type": "string", "jsonPath": ".spec.model"},
        {"name": "Rate/s", "type": "number", "jsonPath": ".status.planningRatePerSecond"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".status.replicas"},
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {"name": "Cost $/h", "type": "number", "jsonPath": ".status.predictedCostPerHour"},
        {"name": "Pred. SLO", "type": "number", "jsonPath": ".status.predictedSloAttainment"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    ],
}

CEL_RULES: dict[str, list[dict[str, str]]] = {
    "GPUJob": [
        {
            "rule": "!has(self.minWorkers) || self.minWorkers <= self.workers",
            "message": "minWorkers must not exceed workers",
        },
        {
            "rule": "!has(self.gpuMilli) || self.gpusPerWorker == 1",
            "message": "gpuMilli (a GPU share) needs gpusPerWorker: 1",
        },
    ],
}
"""Cross-field rules the models check in Python, as CEL for a real API server."""

_DROPPED_KEYS = {"title", "$defs"}


def structural_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Convert a pydantic JSON schema (with its `$defs`) into a Kubernetes structural schema."""
    definitions = schema.get("$defs", {})

    def convert(node: Any) -> Any:
        if isinstance(node, list):
            return [convert(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = definitions[node["$ref"].rsplit("/", 1)[-1]]
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return convert(merged)
        if "anyOf" in node:
            options = [o for o in node["anyOf"] if o.get("type") != "null"]
            nullable = len(options) < len(node["anyOf"])
            if len(options) == 1:
                rest = {k: v for k, v in node.items() if k != "anyOf"}
                converted = convert({**options[0], **rest})
                if nullable:
                    converted["nullable"] = True
                return converted
        result: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED_KEYS or (key == "default" and value is None):
                continue
            if key == "const":
                result["enum"] = [value]
            elif key in ("exclusiveMinimum", "exclusiveMaximum"):
                # JSON Schema 2020 bounds become OpenAPI 3.0's boolean form
                bound = "minimum" if key == "exclusiveMinimum" else "maximum"
                result[bound] = value
                result[key] = True
            elif key == "properties":
                result[key] = {name: convert(sub) for name, sub in value.items()}
            else:
                result[key] = convert(value)
        if "properties" in result:
            result.pop("additionalProperties", None)
        elif result.get("additionalProperties") is True:
            result.pop("additionalProperties")
            result["x-kubernetes-preserve-unknown-fields"] = True
        return result

    return convert({k: v for k, v in schema.items() if k != "$defs"})  # type: ignore[no-any-return]


def crd_manifest(kind: ResourceKind) -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of one kind."""
    spec_schema = structural_schema(kind.spec.model_json_schema(by_alias=True))
    if kind.kind in CEL_RULES:
        spec_schema["x-kubernetes-validations"] = CEL_RULES[kind.kind]
    status_schema = structural_schema(kind.status.model_json_schema(by_alias=True))
    columns = [*PRINTER_COLUMNS.get(kind.kind, [])]
    columns.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{API_GROUP}"},
        "spec": {
            "group": API_GROUP,
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.singular,
                "shortNames": list(kind.short_names),
                "categories": ["voltpack"],
            },
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "versions": [
                {
                    "name": API_VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": kind.description,
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                        }
                    },
                }
            ],
        },
    }


def render(kind: ResourceKind) -> str:
    """The CRD as the YAML text checked into the repository."""
    header = "# Generated by `make crds` from voltpack/model/resources; do not edit by hand.\n"
    return header + yaml.safe_dump(crd_manifest(kind), sort_keys=False, width=100)


def crd_file_name(kind: ResourceKind) -> str:
    """File name of a kind's CRD, e.g. `gpujobs.voltpack.io.yaml`."""
    return f"{kind.plural}.{API_GROUP}.yaml"


def write_crds(folder: Path) -> list[Path]:
    """Write every CRD into `folder`; return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind in RESOURCE_KINDS:
        path = folder / crd_file_name(kind)
        path.write_text(render(kind), encoding="utf-8")
        paths.append(path)
    return paths


def install_crds(extensions: Any) -> list[str]:
    """Create every voltpack CRD through an `ApiextensionsV1Api` (existing ones are kept)."""
    created = []
    for kind in RESOURCE_KINDS:
        try:
            call_json(extensions.create_custom_resource_definition, crd_manifest(kind))
            created.append(kind.kind)
        except Exception as error:
            if status_code(error) != 409:
                raise
    return created


if __name__ == "__main__":
    for written in write_crds(Path(sys.argv[1] if len(sys.argv) > 1 else "helm/voltpack/crds")):
        print(written)
