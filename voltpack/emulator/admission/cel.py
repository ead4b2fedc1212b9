"""CRD validation rules (`x-kubernetes-validations`), evaluated with cel-python.

kube-apiserver evaluates each rule with `self` bound to the value at the rule's place in the
schema and answers 422 when a rule is false. The emulator evaluates them with `celpy`
(cel-python, a maintained CEL implementation), without Kubernetes' own CEL library extensions
(e.g. `isSorted`, `quantity`, `url`). A rule using `oldSelf` (transition rules) or
`messageExpression`, one that does not parse or whose evaluation fails (a missing field, an
unknown function) is not checked, so the emulator accepts what it cannot judge.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import celpy
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.celtypes import BoolType
from celpy.evaluation import CELEvalError

from voltpack.emulator.errors import Cause

VALIDATIONS = "x-kubernetes-validations"
SKIPPED_RULES_MESSAGE = (
    "Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation"
)


class CelError(Exception):
    """The rule does not parse, or failed to evaluate (e.g. a missing field)."""


Rule = Callable[[dict[str, Any]], bool]

_ENVIRONMENT = celpy.Environment()


@functools.lru_cache(maxsize=512)
def _program(rule: str) -> Any:
    try:
        return _ENVIRONMENT.program(_ENVIRONMENT.compile(rule))
    except CELParseError as error:
        raise CelError(f"cannot parse {rule!r}: {error}") from None


def compile_rule(rule: str) -> Rule:
    """The rule as a function of `{"self": value}` returning a bool; CelError when it does not
    parse, fails to evaluate, or yields no bool."""
    program = _program(rule)

    def evaluate(env: dict[str, Any]) -> bool:
        activation = {name: json_to_cel(value) for name, value in env.items()}
        try:
            result = program.evaluate(activation)
        except CELEvalError as error:
            raise CelError(f"{rule!r}: {error.args[0] if error.args else error}") from None
        if isinstance(result, CELEvalError):
            raise CelError(f"{rule!r}: {result.args[0] if result.args else result}")
        if not isinstance(result, BoolType | bool):
            raise CelError(f"{rule!r} gave {result!r}, not a bool")
        return bool(result)

    return evaluate


def has_rules(schema: Any) -> bool:
    """Whether a structural schema has validation rules anywhere."""
    if isinstance(schema, dict):
        return bool(schema.get(VALIDATIONS)) or any(has_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return any(has_rules(v) for v in schema)
    return False


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    return f'"{value}"' if isinstance(value, str) else str(value).lower()


def rule_causes(value: Any, schema: Any, path: str = "") -> list[Cause]:
    """The rules of `schema` (and its properties and items) that `value` breaks."""
    if not isinstance(schema, dict) or value is None:
        return []
    causes: list[Cause] = []
    for entry in schema.get(VALIDATIONS) or []:
        rule = entry.get("rule") if isinstance(entry, dict) else None
        if not isinstance(rule, str) or "oldSelf" in rule or entry.get("messageExpression"):
            continue
        try:
            holds = compile_rule(rule)({"self": value})
        except CelError:
            continue  # outside the subset, or an evaluation error: not judged here
        if not holds:
            message = entry.get("message") or f"failed rule: {rule}"
            field = path + str(entry.get("fieldPath") or "")
            reason = str(entry.get("reason") or "FieldValueInvalid")
            why = f"Invalid value: {_shown(value)}: {message}"
            causes.append(Cause(field.lstrip(".") or "<nil>", reason, why))
    if isinstance(value, dict):
        for name, child in (schema.get("properties") or {}).items():
            if name in value:
                causes.extend(rule_causes(value[name], child, f"{path}.{name}" if path else name))
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            known = schema.get("properties") or {}
            for name, item in value.items():
                if name not in known:
                    causes.extend(rule_causes(item, extra, f"{path}[{name}]"))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            causes.extend(rule_causes(item, schema["items"], f"{path}[{index}]"))
    return causes
