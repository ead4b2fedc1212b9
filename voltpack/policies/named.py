"""Names in policy files and the classes they select: one registry for every kind.

A policy file names a scoring strategy, a queue ordering or a power policy; each kind is a
`NamedRegistry` of classes that carry a `name`, a one-sentence `summary` and a pydantic
`Params` model. An unknown name, or bad parameters, is a PolicyError naming the field, the
value and the allowed values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from voltpack.model.echo import short_repr, shorten
from voltpack.model.errors import PolicyError

M = TypeVar("M", bound=BaseModel)

MAX_LISTED_ERRORS = 20
"""Field errors a message lists; more are counted, not listed."""


class Named(Protocol):
    """What a registered class carries."""

    name: ClassVar[str]
    summary: ClassVar[str]
    Params: ClassVar[type[BaseModel]]

    def __init__(self, params: Any) -> None: ...


T = TypeVar("T", bound=Named)


class NamedRegistry(Generic[T]):
    """The classes of one kind by name, and the policy-file fields they are chosen by."""

    def __init__(self, kind: str, field: str, params_field: str, classes: Iterable[type[T]]):
        """`kind`, e.g. 'strategy'; `field`, e.g. 'spec.scoring.strategy'; `params_field`,
        e.g. 'spec.scoring.params'."""
        self.kind = kind
        self.field = field
        self.params_field = params_field
        self._classes: dict[str, type[T]] = {cls.name: cls for cls in classes}

    def names(self) -> list[str]:
        """Every name a policy file may use."""
        return list(self._classes)

    def summaries(self) -> dict[str, str]:
        """Name to one-sentence definition."""
        return {name: cls.summary for name, cls in self._classes.items()}

    def make(self, name: str, params: Mapping[str, Any] | None = None) -> T:
        """A new instance of the class called `name`, its parameters validated."""
        try:
            cls = self._classes[name]
        except KeyError:
            raise PolicyError(
                f"field {self.field}: value {short_repr(name)} is not allowed; "
                f"allowed values: {', '.join(self._classes)}"
            ) from None
        return cls(validated_params(cls.Params, params, self.params_field, f"{self.kind} {name}"))


def validated_params(model: type[M], params: Mapping[str, Any] | None, field: str, owner: str) -> M:
    """`params` validated by `model`; PolicyError naming `owner` and each bad `field.x`."""
    try:
        return model.model_validate(dict(params or {}))
    except ValidationError as exc:
        problems = describe_validation_errors(exc.errors(), prefix=field)
        raise PolicyError(f"{owner}: {problems}") from None


def describe_validation_errors(errors: list[Any], prefix: str = "") -> str:
    """Pydantic errors joined with '; ', at most `MAX_LISTED_ERRORS` of them (then a count)."""
    shown = "; ".join(describe_validation_error(e, prefix) for e in errors[:MAX_LISTED_ERRORS])
    more = len(errors) - MAX_LISTED_ERRORS
    return f"{shown}; and {more} more" if more > 0 else shown


def describe_validation_error(error: Any, prefix: str = "") -> str:
    """One pydantic error as 'field X: value V is not allowed; allowed values: ...'; the value
    is shown up to 200 characters."""
    parts = [prefix] if prefix else []
    parts += [str(part) for part in error["loc"]]
    where = shorten(".".join(parts) or "(top level)")
    kind = error["type"]
    if kind == "missing":
        return f"field {where} is required"
    if kind == "extra_forbidden":
        return f"field {where} is not a known field; remove it or check its spelling"
    bad = short_repr(error.get("input"))
    expected = (error.get("ctx") or {}).get("expected")
    if expected:
        return f"field {where}: value {bad} is not allowed; allowed values: {shorten(expected)}"
    return f"field {where}: value {bad} is not valid: {shorten(str(error['msg']))}"
