"""DRA device selectors: CEL expressions over `device`, evaluated with cel-python (`celpy`).

The environment is Kubernetes' DRA one (`resource.k8s.io/v1`): the variable `device` has
`driver` (string), `attributes` and `capacity` (maps from a domain to a map from an id to a
value, e.g. `device.attributes["gpu.nvidia.com"].productName`; an unknown domain gives an empty
map, an unknown id is an evaluation error), and `allowMultipleAllocations` (bool). Version
attributes are `semver` values and capacities `quantity` values, with the methods of
Kubernetes' CEL libraries (`compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`, ...).

As in Kubernetes, an expression that does not compile, calls an unknown function, fails to
evaluate on a device (e.g. a missing attribute) or gives something other than a bool is an
error that aborts the allocation (`SelectorError`), never a silent non-match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

import celpy
import celpy.celtypes as ct
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, base_functions
from lark import Token, Tree

from voltpack.model.devices import AttributeValue, Device, DeviceId
from voltpack.model.errors import VoltpackError

__all__ = [
    "DeviceSelectors",
    "Quantity",
    "SelectorError",
    "Semver",
    "parse_quantity",
    "parse_semver",
]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


class SelectorError(VoltpackError):
    """A device selector does not compile, calls an unknown function, or fails to evaluate."""

    def __init__(self, expression: str, reason: str) -> None:
        super().__init__(f"device selector {expression!r}: {reason}")
        self.expression = expression
        self.reason = reason


# --- quantities -------------------------------------------------------------------------

_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>[eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
_SUFFIX_FACTORS: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


def _exact(operation: Callable[[], Decimal]) -> Decimal:
    with localcontext() as context:
        context.prec = 200
        return operation()


@dataclass(frozen=True, eq=False)
class Quantity:
    """A Kubernetes resource quantity (`80Gi`, `1500m`, `1e3`), kept exactly as a Decimal."""

    value: Decimal
    text: str

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"quantity({self.text!r})"


def parse_quantity(text: str) -> Quantity:
    """The quantity `text` states; ValueError naming the text when it is not a quantity."""
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a quantity (e.g. 80Gi, 1500m, 2, 1e3)")
    suffix = match["suffix"] or ""
    try:
        number = Decimal(match["number"])
    except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
        raise ValueError(f"{text!r} is not a quantity") from None
    if suffix[:1] in ("e", "E") and suffix not in _SUFFIX_FACTORS:
        exponent = int(suffix[1:])
        value = _exact(lambda: number.scaleb(exponent))
    else:
        value = _exact(lambda: number * _SUFFIX_FACTORS[suffix])
    return Quantity(value, text.strip())


# --- semantic versions ------------------------------------------------------------------

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


@dataclass(frozen=True, eq=False)
class Semver:
    """A semantic version (semver 2.0); equality and order ignore build metadata."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...]
    text: str

    def _key(self) -> tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]:
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.prerelease)
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1, pre)

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 as this version precedes, equals or follows `other`."""
        mine, theirs = self._key(), other._key()
        return (mine > theirs) - (mine < theirs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"semver({self.text!r})"


def parse_semver(text: str, normalize: bool = False) -> Semver:
    """The semantic version `text` states (strict `MAJOR.MINOR.PATCH[-pre][+build]`; with
    `normalize`, a leading `v`, missing minor/patch and leading zeros are accepted, as in
    Kubernetes' `semver(text, true)`); ValueError naming the text otherwise."""
    candidate = text.strip() if isinstance(text, str) else ""
    if normalize and candidate:
        candidate = candidate.removeprefix("v")
        core, sep, rest = _split_core(candidate)
        parts = core.split(".")
        if 1 <= len(parts) <= 3 and all(p.isdigit() for p in parts):
            parts = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
            candidate = ".".join(parts) + sep + rest
    match = _SEMVER.match(candidate)
    if match is None:
        raise ValueError(f"{text!r} is not a semantic version (e.g. 1.2.3)")
    prerelease = tuple(match[4].split(".")) if match[4] else ()
    return Semver(int(match[1]), int(match[2]), int(match[3]), prerelease, text.strip())


def _split_core(text: str) -> tuple[str, str, str]:
    for index, char in enumerate(text):
        if char in "-+":
            return text[:index], char, text[index + 1 :]
    return text, "", ""


# --- CEL functions (Kubernetes' quantity and semver libraries) --------------------------


def _error(message: str) -> CELEvalError:
    return CELEvalError(message)


def _quantity(text: Any) -> Any:
    if not isinstance(text, str):
        raise TypeError("quantity() takes a string")
    try:
        return parse_quantity(str(text))
    except ValueError as error:
        return _error(str(error))


def _is_quantity(text: Any) -> Any:
    if not isinstance(text, str):
        raise TypeError("isQuantity() takes a string")
    try:
        parse_quantity(str(text))
    except ValueError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _semver(text: Any, normalize: Any = False) -> Any:
    if not isinstance(text, str) or not isinstance(normalize, bool | ct.BoolType):
        raise TypeError("semver() takes a string (and a bool)")
    try:
        return parse_semver(str(text), bool(normalize))
    except ValueError as error:
        return _error(str(error))


def _is_semver(text: Any, normalize: Any = False) -> Any:
    if not isinstance(text, str) or not isinstance(normalize, bool | ct.BoolType):
        raise TypeError("isSemver() takes a string (and a bool)")
    try:
        parse_semver(str(text), bool(normalize))
    except ValueError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _compare(left: Any, right: Any) -> int:
    if isinstance(left, Quantity) and isinstance(right, Quantity):
        return (left.value > right.value) - (left.value < right.value)
    if isinstance(left, Semver) and isinstance(right, Semver):
        return left.compare(right)
    raise TypeError("compareTo/isGreaterThan/isLessThan take two quantities or two semvers")


def _compare_to(left: Any, right: Any) -> Any:
    return ct.IntType(_compare(left, right))


def _is_greater_than(left: Any, right: Any) -> Any:
    return ct.BoolType(_compare(left, right) > 0)


def _is_less_than(left: Any, right: Any) -> Any:
    return ct.BoolType(_compare(left, right) < 0)


def _need_quantity(value: Any, name: str) -> Quantity:
    if not isinstance(value, Quantity):
        raise TypeError(f"{name}() is a method of quantity")
    return value


def _fits_int64(value: Decimal) -> bool:
    return value == value.to_integral_value() and _INT64_MIN <= value <= _INT64_MAX


def _as_integer(value: Any) -> Any:
    quantity = _need_quantity(value, "asInteger")
    if not _fits_int64(quantity.value):
        return _error(f"cannot convert {quantity.text} to an integer (not a whole int64)")
    return ct.IntType(int(quantity.value))


def _as_approximate_float(value: Any) -> Any:
    return ct.DoubleType(float(_need_quantity(value, "asApproximateFloat").value))


def _is_integer(value: Any) -> Any:
    return ct.BoolType(_fits_int64(_need_quantity(value, "isInteger").value))


def _sign(value: Any) -> Any:
    number = _need_quantity(value, "sign").value
    return ct.IntType((number > 0) - (number < 0))


def _operand(value: Any, name: str) -> Decimal:
    if isinstance(value, Quantity):
        return value.value
    if isinstance(value, int) and not isinstance(value, bool | ct.BoolType):
        return Decimal(int(value))
    raise TypeError(f"{name}() takes a quantity or an int")


def _add(left: Any, right: Any) -> Any:
    base = _need_quantity(left, "add")
    total = _exact(lambda: base.value + _operand(right, "add"))
    return Quantity(total, str(total))


def _sub(left: Any, right: Any) -> Any:
    base = _need_quantity(left, "sub")
    total = _exact(lambda: base.value - _operand(right, "sub"))
    return Quantity(total, str(total))


def _semver_part(index: int, name: str) -> Callable[[Any], Any]:
    def part(value: Any) -> Any:
        if not isinstance(value, Semver):
            raise TypeError(f"{name}() is a method of semver")
        return ct.IntType((value.major, value.minor, value.patch)[index])

    part.__name__ = name
    return part


KUBERNETES_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_approximate_float,
    "isInteger": _is_integer,
    "sign": _sign,
    "add": _add,
    "sub": _sub,
    "major": _semver_part(0, "major"),
    "minor": _semver_part(1, "minor"),
    "patch": _semver_part(2, "patch"),
}
"""Kubernetes' CEL quantity and semver library functions (and methods), as celpy functions."""

_MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter"})
KNOWN_FUNCTIONS = frozenset(base_functions) | frozenset(KUBERNETES_FUNCTIONS) | _MACROS
"""Every function or method name a selector may call."""

_CALLS = {"ident_arg": 0, "dot_ident_arg": 0, "member_dot_arg": 1}


# --- the `device` variable ------------------------------------------------------------------


class _DomainMap(ct.MapType):
    """`device.attributes` / `device.capacity`: an unknown domain is an empty map."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return ct.MapType()


def _split(qualified_name: str) -> tuple[str, str]:
    domain, _, name = qualified_name.rpartition("/")
    return domain, name


def _attribute_value(device: Device, name: str, value: AttributeValue) -> Any:
    if name in device.versions:
        return parse_semver(str(value))
    if isinstance(value, bool):
        return ct.BoolType(value)
    if isinstance(value, int):
        return ct.IntType(value)
    return ct.StringType(value)


def _grouped(entries: dict[str, dict[str, Any]]) -> _DomainMap:
    return _DomainMap(
        {
            ct.StringType(domain): ct.MapType({ct.StringType(k): v for k, v in ids.items()})
            for domain, ids in entries.items()
        }
    )


def device_variable(device: Device) -> ct.MapType:
    """The CEL value of `device` for this device; ValueError for a malformed version or
    quantity."""
    attributes: dict[str, dict[str, Any]] = {}
    for qualified, value in device.attributes.items():
        domain, name = _split(qualified)
        try:
            attributes.setdefault(domain, {})[name] = _attribute_value(device, qualified, value)
        except ValueError as error:
            raise ValueError(f"device {device.id}: attribute {qualified}: {error}") from None
    capacity: dict[str, dict[str, Any]] = {}
    for qualified, text in device.capacity.items():
        domain, name = _split(qualified)
        try:
            capacity.setdefault(domain, {})[name] = parse_quantity(text)
        except ValueError as error:
            raise ValueError(f"device {device.id}: capacity {qualified}: {error}") from None
    return ct.MapType(
        {
            ct.StringType("driver"): ct.StringType(device.id.driver),
            ct.StringType("attributes"): _grouped(attributes),
            ct.StringType("capacity"): _grouped(capacity),
            ct.StringType("allowMultipleAllocations"): ct.BoolType(
                device.allow_multiple_allocations
            ),
        }
    )


# --- evaluation -------------------------------------------------------------------------------


def _message(error: BaseException) -> str:
    text = str(error.args[0]) if error.args else str(error)
    text = text.split(" (in activation", 1)[0]
    if isinstance(error, CELEvalError) and len(error.args) >= 3 and error.args[2]:
        detail = error.args[2]
        detail_text = str(detail[0]) if isinstance(detail, tuple) and detail else str(detail)
        if detail_text and detail_text not in text:
            text = f"{text} ({detail_text})"
    return text


# --- what an expression reads of `device` ---------------------------------------------------

Path = tuple[str, ...]
"""An access into `device`: ("driver",), ("attributes", domain, id), ("capacity", domain, id),
("attributes", domain) for a whole domain, ("allowMultipleAllocations",)."""
_STRING_LITERAL = re.compile(r'^(?:"([^"\\]*)"|\'([^\'\\]*)\')$')


def _literal_string(node: Any) -> str | None:
    """The value of an `expr` subtree that is nothing but a plain string literal."""
    while isinstance(node, Tree) and len(node.children) == 1:
        node = node.children[0]
    if isinstance(node, Token) and node.type == "STRING_LIT":
        match = _STRING_LITERAL.match(str(node))
        if match:
            return match[1] if match[1] is not None else match[2]
    return None


def _device_path(node: Any) -> Path | None:
    """The access path when `node` (a `member`) reads into `device` with literal keys only."""
    if not isinstance(node, Tree) or node.data != "member" or len(node.children) != 1:
        return None
    child = node.children[0]
    if not isinstance(child, Tree):
        return None
    if child.data == "primary":
        ident = child.children[0] if child.children else None
        if isinstance(ident, Tree) and ident.data == "ident" and str(ident.children[0]) == "device":
            return ()
        return None
    if child.data == "member_dot":
        base = _device_path(child.children[0])
        return None if base is None else (*base, str(child.children[1]))
    if child.data == "member_index":
        base = _device_path(child.children[0])
        key = _literal_string(child.children[1])
        return None if base is None or key is None else (*base, key)
    return None


def read_paths(tree: Any) -> frozenset[Path] | None:
    """What of `device` the expression reads, when every use of `device` is a plain access
    with literal keys (then its result depends on nothing else); None otherwise."""
    used: set[Path] = set()

    def visit(node: Any, extended: bool) -> bool:
        if not isinstance(node, Tree):
            return True
        path = _device_path(node) if node.data == "member" else None
        if path is not None:
            if not extended:
                used.add(path)
            inner = node.children[0]
            if isinstance(inner, Tree) and inner.data in ("member_dot", "member_index"):
                return all(visit(c, i == 0) for i, c in enumerate(inner.children))
            return True
        if node.data == "ident" and str(node.children[0]) == "device":
            return False  # `device` used otherwise (e.g. as a whole, or with a computed key)
        return all(visit(child, False) for child in node.children)

    if not visit(tree, False):
        return None
    for path in used:
        if path in (("driver",), ("allowMultipleAllocations",)):
            continue
        if len(path) in (2, 3) and path[0] in ("attributes", "capacity"):
            continue
        return None
    return frozenset(used)


_MISSING = object()


def _signature(device: Device, paths: frozenset[Path]) -> tuple[object, ...]:
    """The values an expression reading `paths` sees on `device` (its result depends on
    nothing else)."""
    values: list[object] = []
    for path in sorted(paths):
        if path == ("driver",):
            values.append(device.id.driver)
        elif path == ("allowMultipleAllocations",):
            values.append(device.allow_multiple_allocations)
        elif path[0] == "attributes" and len(path) == 3:
            name = f"{path[1]}/{path[2]}"
            value = device.attributes.get(name, _MISSING)
            values.append((value, name in device.versions))
        elif path[0] == "capacity" and len(path) == 3:
            values.append(device.capacity.get(f"{path[1]}/{path[2]}", _MISSING))
        else:  # a whole domain
            source = device.attributes if path[0] == "attributes" else device.capacity
            prefix = f"{path[1]}/"
            values.append(
                tuple(sorted((k, repr(v)) for k, v in source.items() if k.startswith(prefix)))
            )
            if path[0] == "attributes":
                values.append(tuple(sorted(n for n in device.versions if n.startswith(prefix))))
    return tuple(values)


class DeviceSelectors:
    """Evaluates device selectors. Compiles each distinct expression once and remembers each
    (expression, device) result; a device whose published data changes (same id, different
    attributes) is evaluated afresh, so one instance may live across scheduling cycles.

    An expression that reads `device` only through plain accesses with literal keys (e.g.
    `device.attributes["gpu.nvidia.com"].productName`) depends on nothing else: its result is
    shared by every device that shows the same values there, so a thousand identical nodes
    cost one evaluation, not twelve thousand (errors are still evaluated per device, so that
    their message names the device)."""

    def __init__(self) -> None:
        self._environment = celpy.Environment()
        self._programs: dict[str, Any] = {}
        self._reads: dict[str, frozenset[Path] | None] = {}
        self._shared: dict[tuple[str, tuple[object, ...]], bool] = {}
        self._devices: dict[DeviceId, Device] = {}
        self._variables: dict[DeviceId, ct.MapType] = {}
        self._results: dict[DeviceId, dict[str, bool | SelectorError]] = {}

    def compile(self, expression: str) -> None:
        """Check that `expression` compiles and calls only known functions; SelectorError if
        not."""
        self._program(expression)

    def _program(self, expression: str) -> Any:
        program = self._programs.get(expression)
        if program is not None:
            return program
        if not isinstance(expression, str) or not expression.strip():
            raise SelectorError(str(expression), "empty expression")
        try:
            tree = self._environment.compile(expression)
        except CELParseError as error:
            raise SelectorError(expression, _syntax_reason(expression, error)) from None
        for subtree in tree.iter_subtrees():
            position = _CALLS.get(str(subtree.data))
            if position is None:
                continue
            name = str(subtree.children[position])
            if name not in KNOWN_FUNCTIONS:
                raise SelectorError(expression, f"unknown function {name}()")
        program = self._environment.program(tree, functions=KUBERNETES_FUNCTIONS)
        self._programs[expression] = program
        self._reads[expression] = read_paths(tree)
        return program

    def _device_results(self, device: Device) -> dict[str, bool | SelectorError]:
        known = self._devices.get(device.id)
        if known is not device and known != device:
            self._devices[device.id] = device
            self._variables.pop(device.id, None)
            self._results[device.id] = {}
        return self._results[device.id]

    def _variable(self, device: Device, expression: str) -> ct.MapType:
        variable = self._variables.get(device.id)
        if variable is None:
            try:
                variable = device_variable(device)
            except ValueError as error:
                raise SelectorError(expression, str(error)) from None
            self._variables[device.id] = variable
        return variable

    def evaluate(self, device: Device, expression: str) -> bool:
        """Whether `expression` accepts `device`; SelectorError when it fails to compile or
        to evaluate, or gives no bool."""
        results = self._device_results(device)
        result = results.get(expression)
        if result is None:
            self._program(expression)
            reads = self._reads[expression]
            if reads is None:
                result = self._evaluate(device, expression)
            else:
                key = (expression, _signature(device, reads))
                shared = self._shared.get(key)
                result = self._evaluate(device, expression) if shared is None else shared
                if isinstance(result, bool):
                    self._shared[key] = result
            results[expression] = result
        if isinstance(result, SelectorError):
            raise result
        return result

    def _evaluate(self, device: Device, expression: str) -> bool | SelectorError:
        program = self._program(expression)
        try:
            variable = self._variable(device, expression)
        except SelectorError as error:
            return error
        try:
            result = program.evaluate({"device": variable})
        except CELEvalError as error:
            return SelectorError(expression, f"on device {device.id}: {_message(error)}")
        if isinstance(result, CELEvalError):
            return SelectorError(expression, f"on device {device.id}: {_message(result)}")
        if not isinstance(result, ct.BoolType | bool):
            return SelectorError(expression, f"on device {device.id}: gave {result!r}, not a bool")
        return bool(result)

    def matches(self, device: Device, expressions: Sequence[str]) -> bool:
        """Whether every expression accepts `device` (evaluated in order, stopping at the first
        false, as Kubernetes does); SelectorError as `evaluate`."""
        return all(self.evaluate(device, expression) for expression in expressions)


def _syntax_reason(expression: str, error: CELParseError) -> str:
    if not error.line or not error.column:
        return "syntax error"
    lines = expression.splitlines() or [expression]
    line = lines[min(error.line, len(lines)) - 1]
    near = line[error.column - 1 : error.column + 11]
    where = f"syntax error at line {error.line}, column {error.column}"
    return f"{where}, near {near!r}" if near else f"{where}: unexpected end"
