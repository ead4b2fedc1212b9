"""Custom resources against their CRD's `openAPIV3Schema`: pruning, defaulting, validation.

As the real server does for structural schemas: fields the schema does not declare are pruned
(kept under `x-kubernetes-preserve-unknown-fields: true` or `additionalProperties`), `default`s
are filled in, and the object is validated (here with `jsonschema`, draft 4, after mapping the
Kubernetes extensions `nullable` and `x-kubernetes-int-or-string`). Violations become
`details.causes` entries that name the field path, e.g. `spec.size`. Not checked: CEL rules
(`x-kubernetes-validations`), `x-kubernetes-list-type` uniqueness, and string `format`s.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema  # type: ignore[import-untyped,unused-ignore]

from voltpack.emulator.errors import Cause
from voltpack.emulator.objects import JsonObj

_ROOT_FIELDS = ("apiVersion", "kind", "metadata")
_DROPPED_KEYWORDS = {"nullable", "default", "description", "example", "externalDocs", "title"}
_validators: dict[str, Any] = {}


def _path(parts: list[str | int]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def prune(obj: JsonObj, schema: JsonObj) -> list[str]:
    """Remove undeclared fields in place; returns their paths (`spec.foo`)."""
    pruned: list[str] = []
    _prune(obj, schema, [], pruned, root=True)
    return pruned


def _prune(
    value: Any, schema: Any, path: list[str | int], pruned: list[str], *, root: bool = False
) -> None:
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
        embedded = schema.get("x-kubernetes-embedded-resource") is True
        for key in list(value):
            if (root or embedded) and key in _ROOT_FIELDS:
                continue
            if isinstance(properties, dict) and key in properties:
                sub = properties[key]
                if value[key] is None and not (isinstance(sub, dict) and sub.get("nullable")):
                    del value[key]
                    continue
                _prune(value[key], sub, [*path, key], pruned)
            elif isinstance(additional, dict):
                _prune(value[key], additional, [*path, key], pruned)
            elif additional is True or preserve:
                continue
            else:
                del value[key]
                pruned.append(_path([*path, key]))
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                _prune(item, items, [*path, index], pruned)


def apply_defaults(obj: JsonObj, schema: JsonObj) -> None:
    """Fill in `default` values of absent fields, in place."""
    _default(obj, schema)


def _default(value: Any, schema: Any) -> None:
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        if isinstance(properties, dict):
            for key, sub in properties.items():
                if not isinstance(sub, dict):
                    continue
                if key not in value and "default" in sub:
                    value[key] = copy.deepcopy(sub["default"])
                if key in value:
                    _default(value[key], sub)
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for key in value:
                if not isinstance(properties, dict) or key not in properties:
                    _default(value[key], additional)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in value:
                _default(item, items)


def to_json_schema(node: Any) -> Any:
    """A Kubernetes OpenAPI v3 schema node as a JSON-schema draft-4 node."""
    if not isinstance(node, dict):
        return node
    out: JsonObj = {}
    for key, value in node.items():
        if key in _DROPPED_KEYWORDS or key.startswith("x-kubernetes-"):
            continue
        if key in ("properties", "patternProperties", "definitions") and isinstance(value, dict):
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = to_json_schema(value)
        elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
            out[key] = [to_json_schema(sub) for sub in value]
        else:
            out[key] = copy.deepcopy(value)
    if node.get("x-kubernetes-int-or-string") is True and "type" not in out:
        out["type"] = ["integer", "string"]
    if node.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


_BOOLEAN_KEYWORDS = (
    "exclusiveMinimum",
    "exclusiveMaximum",
    "nullable",
    "uniqueItems",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource",
)
_TYPES = ("object", "array", "string", "integer", "number", "boolean")


def _node_problems(node: Any, path: str, problems: list[tuple[str, str]]) -> None:
    """Kubernetes rules for one schema node (OpenAPI v3.0 as Kubernetes decodes it)."""
    if not isinstance(node, dict):
        problems.append((path, f"Invalid value: {_show(node)}: must be a schema object"))
        return
    for keyword in _BOOLEAN_KEYWORDS:
        if keyword in node and not isinstance(node[keyword], bool):
            hint = ""
            if keyword.startswith("exclusive"):
                bound = "minimum" if keyword == "exclusiveMinimum" else "maximum"
                hint = (
                    f" (OpenAPI v3.0: write `{bound}: {_show(node[keyword])}` and "
                    f"`{keyword}: true`)"
                )
            problems.append(
                (
                    f"{path}.{keyword}",
                    f"Invalid value: {_show(node[keyword])}: must be a boolean{hint}",
                )
            )
    node_type = node.get("type")
    if node_type is not None and node_type not in _TYPES:
        problems.append(
            (
                f"{path}.type",
                f"Unsupported value: {_show(node_type)}: supported values: "
                + ", ".join(f'"{t}"' for t in _TYPES),
            )
        )
    if (
        node_type is None
        and path.endswith("]")
        and not node.get("x-kubernetes-int-or-string")
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        problems.append((f"{path}.type", "Required value: must not be empty for specified fields"))
    properties = node.get("properties")
    if properties is not None:
        if not isinstance(properties, dict):
            problems.append((f"{path}.properties", "Invalid value: must be a map of schemas"))
        else:
            for name, sub in properties.items():
                _node_problems(sub, f"{path}.properties[{name}]", problems)
    additional = node.get("additionalProperties")
    if isinstance(additional, dict):
        if properties:
            problems.append(
                (
                    f"{path}.additionalProperties",
                    "Forbidden: additionalProperties and properties are mutual exclusive",
                )
            )
        _node_problems(additional, f"{path}.additionalProperties", problems)
    items = node.get("items")
    if items is not None:
        if isinstance(items, list):
            problems.append(
                (f"{path}.items", "Forbidden: items must be a schema object, not a list")
            )
        else:
            _node_problems(items, f"{path}.items", problems)
    if node_type == "array" and items is None:
        problems.append((f"{path}.items", "Required value: must be specified"))
    required = node.get("required")
    if required is not None and not (
        isinstance(required, list) and all(isinstance(r, str) for r in required)
    ):
        problems.append((f"{path}.required", "Invalid value: must be a list of field names"))
    for junctor in ("allOf", "anyOf", "oneOf"):
        for index, sub in enumerate(node.get(junctor) or []):
            if isinstance(sub, dict):
                for keyword in _BOOLEAN_KEYWORDS[:2]:
                    if keyword in sub and not isinstance(sub[keyword], bool):
                        problems.append(
                            (
                                f"{path}.{junctor}[{index}].{keyword}",
                                f"Invalid value: {_show(sub[keyword])}: must be a boolean",
                            )
                        )


def schema_problems(schema: Any) -> list[tuple[str, str]]:
    """Why a CRD's openAPIV3Schema is unusable: (path below the schema, message) pairs."""
    if not isinstance(schema, dict):
        return [("", "Invalid value: must be a schema object")]
    problems: list[tuple[str, str]] = []
    if schema.get("type") != "object":
        problems.append((".type", 'Unsupported value: must be "object" at the root'))
    _node_problems(schema, "", problems)
    if problems:
        return problems
    try:
        jsonschema.Draft4Validator.check_schema(to_json_schema(schema))
    except jsonschema.SchemaError as exc:
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in exc.absolute_path
        )
        problems.append((where, f"Invalid value: {exc.message}"))
    return problems


def _validator(schema: JsonObj) -> Any:
    key = json.dumps(schema, sort_keys=True)
    found = _validators.get(key)
    if found is None:
        found = jsonschema.Draft4Validator(to_json_schema(schema))
        if len(_validators) > 256:
            _validators.clear()
        _validators[key] = found
    return found


def _show(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def _causes_of(error: Any) -> list[Cause]:
    parts: list[str | int] = list(error.absolute_path)
    where = _path(parts) or "<root>"
    keyword = error.validator
    expected = error.validator_value
    value = error.instance
    if keyword == "required":
        missing = [r for r in expected if isinstance(value, dict) and r not in value]
        return [
            Cause(_path([*parts, name]), "FieldValueRequired", "Required value") for name in missing
        ]
    if keyword == "type":
        actual = _JSON_TYPES.get(type(value), "unknown")
        wanted = " or ".join(expected) if isinstance(expected, list) else expected
        return [
            Cause(
                where,
                "FieldValueTypeInvalid",
                f'Invalid value: "{actual}": {where} in body must be of type {wanted}: "{actual}"',
            )
        ]
    if keyword == "enum":
        supported = ", ".join(_show(v) for v in expected)
        return [
            Cause(
                where,
                "FieldValueNotSupported",
                f"Unsupported value: {_show(value)}: supported values: {supported}",
            )
        ]
    schema = error.schema if isinstance(error.schema, dict) else {}
    messages = {
        "minimum": (
            f"should be greater than {expected}"
            if schema.get("exclusiveMinimum") is True
            else f"should be greater than or equal to {expected}"
        ),
        "maximum": (
            f"should be less than {expected}"
            if schema.get("exclusiveMaximum") is True
            else f"should be less than or equal to {expected}"
        ),
        "pattern": f"should match '{expected}'",
        "minLength": f"should be at least {expected} chars long",
        "maxLength": f"should be at most {expected} chars long",
        "minItems": f"should have at least {expected} items",
        "maxItems": f"should have at most {expected} items",
        "minProperties": f"should have at least {expected} properties",
        "maxProperties": f"should have at most {expected} properties",
        "multipleOf": f"should be a multiple of {expected}",
        "uniqueItems": "shall not contain duplicates",
    }
    text = messages.get(keyword)
    if text is not None:
        return [
            Cause(
                where, "FieldValueInvalid", f"Invalid value: {_show(value)}: {where} in body {text}"
            )
        ]
    return [Cause(where, "FieldValueInvalid", f"Invalid value: {_show(value)}: {error.message}")]


def validate(obj: JsonObj, schema: JsonObj) -> list[Cause]:
    """Schema violations of a (pruned, defaulted) custom resource, sorted by field."""
    causes: list[Cause] = []
    for error in _validator(schema).iter_errors(obj):
        causes.extend(_causes_of(error))
    unique = {(c.field, c.message): c for c in causes}
    return sorted(unique.values(), key=lambda c: (c.field, c.message))
