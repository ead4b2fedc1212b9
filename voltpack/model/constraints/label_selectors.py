"""Label selectors as Kubernetes evaluates them: a pod's (`LabelSelector`) and a node's
(`NodeSelectorTerm`, with `Gt`/`Lt` and `matchFields`).

The semantics are those of apimachinery's `labels.Selector` and component-helpers'
`nodeaffinity`: requirements are ANDed; `NotIn` and `DoesNotExist` match an absent key; `Gt`/`Lt`
compare a label's integer value (a value that is no integer does not match); a selector with no
requirement matches everything, a missing one (None where a selector is optional) nothing; a node
selector term without requirements matches no node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

LabelOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
NodeOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
NODE_NAME_FIELD = "metadata.name"
"""The one field a node selector term's `matchFields` may name."""


def integer_label(value: str) -> int | None:
    """A label value as `Gt`/`Lt` read it (a base-10 int64), or None when it is none."""
    try:
        number = int(value, 10)
    except ValueError:
        return None
    return number if -(2**63) <= number < 2**63 else None


def check_values(key: str, operator: str, values: tuple[str, ...]) -> None:
    """`In`/`NotIn` need values, `Exists`/`DoesNotExist` take none (the apiserver's rule)."""
    if operator in ("In", "NotIn") and not values:
        raise ValueError(f"operator {operator} on key {key!r} needs values")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"operator {operator} on key {key!r} takes no values")


class LabelRequirement(BaseModel):
    """One `matchExpressions` entry of a label selector."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    operator: LabelOperator
    values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check_values(self) -> LabelRequirement:
        check_values(self.key, self.operator, self.values)
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a set of labels satisfies this requirement."""
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None


class LabelSelector(BaseModel):
    """`matchLabels` and `matchExpressions`, ANDed; with neither it matches every label set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelRequirement, ...] = ()

    @property
    def is_empty(self) -> bool:
        """No requirement: matches everything (kube-scheduler's `Selector.Empty()`)."""
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a set of labels satisfies every requirement."""
        return all(labels.get(key) == value for key, value in self.match_labels) and all(
            requirement.matches(labels) for requirement in self.match_expressions
        )

    def merged(self, labels: Mapping[str, str]) -> LabelSelector:
        """This selector ANDed with `labels` as `In` requirements (`matchLabelKeys`)."""
        extra = tuple(
            LabelRequirement(key=key, operator="In", values=(value,))
            for key, value in sorted(labels.items())
        )
        return self.model_copy(update={"match_expressions": self.match_expressions + extra})


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A selector's verdict, None (a selector not given) matching nothing."""
    return selector is not None and selector.matches(labels)


class NodeSelectorRequirement(BaseModel):
    """One requirement of a node selector term: on a label, or (`matchFields`) on the name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    operator: NodeOperator
    values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check_values(self) -> NodeSelectorRequirement:
        check_values(self.key, self.operator, self.values)
        integer = len(self.values) == 1 and integer_label(self.values[0]) is not None
        if self.operator in ("Gt", "Lt") and not integer:
            raise ValueError(
                f"operator {self.operator} on key {self.key!r} needs one integer value, "
                f"got {list(self.values)}"
            )
        return self

    @property
    def bound(self) -> int:
        """The integer a `Gt`/`Lt` requirement compares with."""
        number = integer_label(self.values[0])
        assert number is not None  # checked by the validator
        return number

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a node's labels (or its fields) satisfy this requirement."""
        if self.operator in ("Gt", "Lt"):
            value = labels.get(self.key)
            number = integer_label(value) if value is not None else None
            if number is None:
                return False
            return number > self.bound if self.operator == "Gt" else number < self.bound
        return LabelRequirement(key=self.key, operator=self.operator, values=self.values).matches(
            labels
        )


class NodeSelectorTerm(BaseModel):
    """Requirements ANDed; a term with none matches no node."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    @model_validator(mode="after")
    def _check_fields(self) -> NodeSelectorTerm:
        for requirement in self.match_fields:
            if requirement.key != NODE_NAME_FIELD:
                raise ValueError(
                    f"matchFields key {requirement.key!r} is not supported; only "
                    f"{NODE_NAME_FIELD!r} is"
                )
            if requirement.operator not in ("In", "NotIn") or len(requirement.values) != 1:
                raise ValueError(
                    f"matchFields on {NODE_NAME_FIELD} needs operator In or NotIn with one "
                    f"value, got {requirement.operator} {list(requirement.values)}"
                )
        return self

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether the node called `name` with `labels` satisfies the term."""
        if not self.match_expressions and not self.match_fields:
            return False
        fields = {NODE_NAME_FIELD: name}
        return all(r.matches(labels) for r in self.match_expressions) and all(
            r.matches(fields) for r in self.match_fields
        )
