"""Label selectors (=, ==, !=, in, notin, exists, !key, >, <) and field selectors (=, ==, !=)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from voltpack.emulator.errors import ApiError, bad_request
from voltpack.emulator.objects import JsonObj, get_path, string_map
from voltpack.emulator.resources import ResourceType

_SPECIAL = set("!=(),<> \t")
_TOKEN_RE = re.compile(r"\s*(==|!=|=|!|\(|\)|,|<|>|[^\s!=(),<>]+)")


@dataclass(frozen=True)
class Requirement:
    """One requirement of a label selector; `op` is one of the selector operators."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op in (">", "<") and value is not None:
            try:
                number = int(value)
            except ValueError:
                return False
            bound = int(self.values[0])
            return number > bound if self.op == ">" else number < bound
        return False


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, obj: JsonObj) -> bool:
        labels = string_map(obj, "labels")
        return all(req.matches(labels) for req in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            raise bad_request(f"unable to parse requirement: unexpected {text[pos:]!r}")
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse `?labelSelector=`; a malformed selector is a 400 BadRequest, as on the server."""
    if not text or not text.strip():
        return LabelSelector()
    tokens = _tokens(text)
    requirements: list[Requirement] = []
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def fail(why: str) -> ApiError:
        return bad_request(f"unable to parse requirement: {why} in label selector {text!r}")

    while pos < len(tokens):
        token = tokens[pos]
        if token == "!":
            pos += 1
            key = peek()
            if key is None or key in _SPECIAL or key in ("in", "notin"):
                raise fail("expected a key after '!'")
            pos += 1
            requirements.append(Requirement(key, "!"))
        else:
            if token in _SPECIAL or token in (",",):
                raise fail(f"unexpected {token!r}")
            key = token
            pos += 1
            op = peek()
            if op is None or op == ",":
                requirements.append(Requirement(key, "exists"))
            elif op in ("=", "==", "!="):
                pos += 1
                value = peek()
                if value is None or value == ",":
                    value = ""
                elif value in _SPECIAL:
                    raise fail(f"unexpected {value!r} after {op!r}")
                else:
                    pos += 1
                requirements.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
            elif op in ("in", "notin"):
                pos += 1
                if peek() != "(":
                    raise fail(f"expected '(' after {op!r}")
                pos += 1
                values: list[str] = []
                expect_value = True
                while True:
                    current = peek()
                    if current is None:
                        raise fail("missing ')'")
                    pos += 1
                    if current == ")":
                        if expect_value and values:
                            values.append("")
                        break
                    if current == ",":
                        if expect_value:
                            values.append("")
                        expect_value = True
                        continue
                    if not expect_value:
                        raise fail("expected ',' or ')'")
                    values.append(current)
                    expect_value = False
                requirements.append(Requirement(key, op, tuple(values)))
            elif op in (">", "<"):
                pos += 1
                value = peek()
                if value is None or not re.fullmatch(r"-?\d+", value):
                    raise fail(f"expected an integer after {op!r}")
                pos += 1
                requirements.append(Requirement(key, op, (value,)))
            else:
                raise fail(f"unexpected {op!r} after key {key!r}")
        if pos < len(tokens):
            if tokens[pos] != ",":
                raise fail(f"expected ',' before {tokens[pos]!r}")
            pos += 1
            if pos == len(tokens):
                raise fail("trailing ','")
    return LabelSelector(tuple(requirements))


@dataclass(frozen=True)
class FieldTerm:
    field: str
    negate: bool
    value: str


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[FieldTerm, ...] = ()

    def matches(self, rtype: ResourceType, obj: JsonObj) -> bool:
        for term in self.terms:
            actual = field_value(rtype, obj, term.field)
            if (actual == term.value) == term.negate:
                return False
        return True

    @property
    def empty(self) -> bool:
        return not self.terms


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for char in text:
        if escaped:
            current.append("\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if escaped:
        current.append("\\")
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_field_selector(text: str | None, rtype: ResourceType) -> FieldSelector:
    """Parse `?fieldSelector=`; unknown field labels are a 400 BadRequest, as on the server."""
    if not text or not text.strip():
        return FieldSelector()
    supported = {"metadata.name", "metadata.namespace", *rtype.field_selectors}
    terms: list[FieldTerm] = []
    for raw in _split_unescaped(text, ","):
        part = raw.strip()
        if not part:
            raise bad_request(f"invalid field selector: empty term in {text!r}")
        match = re.match(r"^(.*?)(==|!=|=)(.*)$", part)
        if match is None:
            raise bad_request(f"invalid selector: '{part}'; can't understand '{part}'")
        field_name = _unescape(match.group(1).strip())
        if field_name not in supported:
            raise bad_request(f"field label not supported: {field_name}")
        terms.append(FieldTerm(field_name, match.group(2) == "!=", _unescape(match.group(3))))
    return FieldSelector(tuple(terms))


_FIELD_DEFAULTS = {"spec.unschedulable": "false", "spec.hostNetwork": "false"}


def field_value(rtype: ResourceType, obj: JsonObj, field_name: str) -> str:
    """The string a field selector compares for `field_name` of `obj`."""
    path = dict(rtype.field_aliases).get(field_name, field_name)
    value = get_path(obj, path)
    if value is None:
        return _FIELD_DEFAULTS.get(field_name, "")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
