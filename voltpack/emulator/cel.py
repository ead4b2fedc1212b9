"""CRD validation rules (`x-kubernetes-validations`) for a subset of CEL.

kube-apiserver evaluates each rule with `self` bound to the value at the rule's place in the
schema and answers 422 when a rule is false. This evaluator covers the CEL that CRDs commonly
use: `self.field`, `has(self.field)`, literals, `! && || ?:`, comparisons, `in`, arithmetic,
`size()`, `startsWith/endsWith/contains`, lists. A rule outside that subset, one using `oldSelf`
(transition rules) or `messageExpression`, or one whose evaluation fails (a missing field) is not
checked, so the emulator accepts what it cannot judge.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from voltpack.emulator.errors import Cause

VALIDATIONS = "x-kubernetes-validations"
SKIPPED_RULES_MESSAGE = (
    "Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation"
)
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.\d+|\d+)|(?P<str>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')"
    r"|(?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()\[\]])|(?P<name>[A-Za-z_][A-Za-z0-9_]*))"
)
_MISSING = object()


class CelError(Exception):
    """The rule is outside the supported subset, or failed to evaluate."""


Node = Callable[[dict[str, Any]], Any]


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        position = 0
        text = text.strip()
        while position < len(text):
            match = _TOKEN.match(text, position)
            if match is None or match.end() == position:
                raise CelError(f"cannot read {text[position:]!r}")
            kind = match.lastgroup or ""
            self.tokens.append((kind, match.group(kind)))
            position = match.end()
            while position < len(text) and text[position].isspace():
                position += 1
        self.index = 0

    def peek(self) -> str:
        return self.tokens[self.index][1] if self.index < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.index >= len(self.tokens):
            raise CelError("unexpected end of rule")
        token = self.tokens[self.index]
        if expected is not None and token[1] != expected:
            raise CelError(f"expected {expected!r}, found {token[1]!r}")
        self.index += 1
        return token

    def parse(self) -> Node:
        node = self.ternary()
        if self.index != len(self.tokens):
            raise CelError(f"unexpected {self.peek()!r}")
        return node

    def ternary(self) -> Node:
        condition = self.binary(0)
        if self.peek() != "?":
            return condition
        self.take("?")
        then = self.ternary()
        self.take(":")
        otherwise = self.ternary()
        return lambda env: then(env) if _bool(condition(env)) else otherwise(env)

    _LEVELS: tuple[tuple[str, ...], ...] = (
        ("||",),
        ("&&",),
        ("==", "!=", "<", "<=", ">", ">=", "in"),
        ("+", "-"),
        ("*", "/", "%"),
    )

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self._LEVELS[level]:
            op = self.take()[1]
            right = self.binary(level + 1)
            left = _combine(op, left, right)
        return left

    def unary(self) -> Node:
        if self.peek() == "!":
            self.take()
            inner = self.unary()
            return lambda env: not _bool(inner(env))
        if self.peek() == "-":
            self.take()
            negated = self.unary()
            return lambda env: -negated(env)
        return self.member(self.primary())

    def member(self, node: Node) -> Node:
        while self.peek() in (".", "["):
            if self.take()[1] == "[":
                key = self.ternary()
                self.take("]")
                node = _index(node, key)
                continue
            name = self.take()[1]
            if self.peek() == "(":
                node = _method(node, name, self.arguments())
            else:
                node = _field(node, name)
        return node

    def arguments(self) -> list[Node]:
        self.take("(")
        args: list[Node] = []
        while self.peek() != ")":
            args.append(self.ternary())
            if self.peek() == ",":
                self.take(",")
        self.take(")")
        return args

    def primary(self) -> Node:
        kind, text = self.take()
        if kind == "num":
            value: Any = float(text) if "." in text else int(text)
            return lambda env: value
        if kind == "str":
            literal = text[1:-1].encode().decode("unicode_escape")
            return lambda env: literal
        if text == "(":
            inner = self.ternary()
            self.take(")")
            return inner
        if text == "[":
            items: list[Node] = []
            while self.peek() != "]":
                items.append(self.ternary())
                if self.peek() == ",":
                    self.take(",")
            self.take("]")
            return lambda env: [item(env) for item in items]
        if kind != "name":
            raise CelError(f"unexpected {text!r}")
        if text in ("true", "false", "null"):
            constant = {"true": True, "false": False, "null": None}[text]
            return lambda env: constant
        if text == "has":
            self.take("(")
            target = self.member(self.primary())
            self.take(")")
            return _has(target)
        if text == "size" and self.peek() == "(":
            (arg,) = self.arguments()
            return lambda env: len(arg(env))
        if text in ("self", "oldSelf"):
            return lambda env: env[text]
        raise CelError(f"unsupported name {text!r}")


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise CelError(f"no such overload: {value!r} is not a bool")
    return value


def _combine(op: str, left: Node, right: Node) -> Node:
    if op == "||":
        return lambda env: _bool(left(env)) or _bool(right(env))
    if op == "&&":
        return lambda env: _bool(left(env)) and _bool(right(env))
    operations: dict[str, Callable[[Any, Any], Any]] = {
        "==": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
        "in": lambda a, b: a in b,
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "*": lambda a, b: a * b,
        "/": lambda a, b: a // b if isinstance(a, int) and isinstance(b, int) else a / b,
        "%": lambda a, b: a % b,
    }
    operation = operations[op]

    def evaluate(env: dict[str, Any]) -> Any:
        try:
            return operation(left(env), right(env))
        except (TypeError, ZeroDivisionError) as error:
            raise CelError(str(error)) from None

    return evaluate


def _field(node: Node, name: str) -> Node:
    def evaluate(env: dict[str, Any]) -> Any:
        value = node(env)
        if not isinstance(value, dict) or name not in value:
            raise CelError(f"no such key: {name}")
        return value[name]

    return evaluate


def _index(node: Node, key: Node) -> Node:
    def evaluate(env: dict[str, Any]) -> Any:
        try:
            return node(env)[key(env)]
        except (KeyError, IndexError, TypeError) as error:
            raise CelError(f"no such key: {error}") from None

    return evaluate


def _has(target: Node) -> Node:
    def evaluate(env: dict[str, Any]) -> bool:
        try:
            target(env)
        except CelError:
            return False
        return True

    return evaluate


_METHODS: dict[str, Callable[..., Any]] = {
    "size": len,
    "startsWith": lambda value, prefix: value.startswith(prefix),
    "endsWith": lambda value, suffix: value.endswith(suffix),
    "contains": lambda value, part: part in value,
}


def _method(node: Node, name: str, args: list[Node]) -> Node:
    function = _METHODS.get(name)
    if function is None:
        raise CelError(f"unsupported function {name!r}")

    def evaluate(env: dict[str, Any]) -> Any:
        try:
            return function(node(env), *(arg(env) for arg in args))
        except (TypeError, AttributeError) as error:
            raise CelError(str(error)) from None

    return evaluate


def compile_rule(rule: str) -> Node:
    """The rule as a function of `{"self": value}`; CelError when outside the subset."""
    return _Parser(rule).parse()


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
            holds = _bool(compile_rule(rule)({"self": value}))
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
