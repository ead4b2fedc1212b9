"""YAML from users, parsed with bounds: nesting depth and nodes after alias expansion.

`yaml.safe_load` builds no code objects but has no bounds: 454 bytes of nested aliases (a
"billion laughs") expand to a million nodes that validation and error messages then walk, and
a few thousand nested brackets overflow Python's stack (`RecursionError`). The loader here
counts, while composing, how deep the document nests and how many nodes it has once every
alias is expanded (an alias counts as the whole subtree it names), and refuses beyond the
limits with a `YamlLimitError` naming the line. It is a `yaml.YAMLError`, so callers that
already turn YAML errors into their own keep working; recursive aliases are refused too.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_DEPTH = 64
"""Deepest nesting of collections a document may have (policy files and CRs use about 8)."""
MAX_NODES = 100_000
"""Most nodes a document may have with every alias expanded (scalars, lists and mappings)."""


class YamlLimitError(yaml.MarkedYAMLError):
    """A document nests too deep or expands to too many nodes; the message names the line."""

    def __str__(self) -> str:
        where = ""
        if self.problem_mark is not None:
            mark = self.problem_mark
            where = f" (line {mark.line + 1}, column {mark.column + 1})"
        return f"{self.problem}{where}"


class LimitedSafeLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses documents deeper than `max_depth` or larger than
    `max_nodes` once aliases are expanded."""

    max_depth = MAX_DEPTH
    max_nodes = MAX_NODES

    def __init__(self, stream: str | bytes) -> None:
        super().__init__(stream)
        self._depth = 0
        self._expanded: dict[int, int] = {}  # id(node) -> nodes with aliases expanded

    def compose_document(self) -> Node | None:
        self._expanded = {}
        return super().compose_document()

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            start: Any = event.start_mark
            node: Node | None = super().compose_node(parent, index)
            if node is not None and id(node) not in self._expanded:
                raise YamlLimitError(
                    None,
                    None,
                    f"the alias *{event.anchor} refers to a collection that contains it; "
                    "recursive aliases are not accepted",
                    start,
                )
            return node
        self._depth += 1
        try:
            if self._depth > self.max_depth:
                raise YamlLimitError(
                    None,
                    None,
                    f"the document nests deeper than {self.max_depth} levels; flatten it",
                    event.start_mark,
                )
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is not None:
            size = 1 + self._children_size(node)
            if size > self.max_nodes:
                raise YamlLimitError(
                    None,
                    None,
                    f"the document expands to more than {self.max_nodes} values with its "
                    "aliases (*name) resolved; use fewer or smaller aliases",
                    node.start_mark,
                )
            self._expanded[id(node)] = size
        return node

    def _children_size(self, node: Node) -> int:
        if isinstance(node, SequenceNode):
            return sum(self._expanded.get(id(child), 1) for child in node.value)
        if isinstance(node, MappingNode):
            return sum(
                self._expanded.get(id(key), 1) + self._expanded.get(id(value), 1)
                for key, value in node.value
            )
        return 0


def safe_load(text: str | bytes) -> Any:
    """One YAML document as Python data, within the limits (`YamlLimitError` beyond)."""
    loader = LimitedSafeLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def safe_load_all(text: str | bytes) -> list[Any]:
    """Every YAML document of a stream, each within the limits."""
    loader = LimitedSafeLoader(text)
    try:
        documents = []
        while loader.check_data():  # type: ignore[no-untyped-call]
            documents.append(loader.get_data())
        return documents
    finally:
        loader.dispose()
