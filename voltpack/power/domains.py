"""The power-domain tree (site > row > rack > node): each domain a set of nodes and a budget."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from voltpack.model.errors import PowerConfigError


@dataclass(frozen=True)
class PowerDomain:
    """A power domain: its nodes, its budget and the domain that encloses it."""

    name: str
    budget_w: float
    nodes: frozenset[str]
    parent: str | None = None


@dataclass(frozen=True)
class DomainSelector:
    """A domain as configured: nodes chosen by labels (a `PowerBudget` or a policy file)."""

    name: str
    budget_w: float
    match_labels: Mapping[str, str]
    parent: str | None = None


class PowerDomainTree:
    """Validated domains; every node's enclosing domains, innermost first."""

    def __init__(self, domains: Iterable[PowerDomain]) -> None:
        self._domains: dict[str, PowerDomain] = {}
        for domain in domains:
            if domain.name in self._domains:
                raise PowerConfigError(f"power domain {domain.name!r} is defined twice")
            if not domain.budget_w > 0:
                raise PowerConfigError(
                    f"power domain {domain.name!r}: budget_w must be > 0, got {domain.budget_w}"
                )
            self._domains[domain.name] = domain
        for domain in self._domains.values():
            self._check_parent(domain)
        self._order = sorted(self._domains, key=self.depth)

    def _check_parent(self, domain: PowerDomain) -> None:
        seen = {domain.name}
        current = domain
        while current.parent is not None:
            parent = self._domains.get(current.parent)
            if parent is None:
                raise PowerConfigError(
                    f"power domain {current.name!r}: parent {current.parent!r} is not a domain; "
                    f"known domains: {', '.join(sorted(self._domains))}"
                )
            if parent.name in seen:
                raise PowerConfigError(f"power domain {domain.name!r}: parents form a cycle")
            seen.add(parent.name)
            current = parent
        if domain.parent is not None:
            outside = domain.nodes - self._domains[domain.parent].nodes
            if outside:
                raise PowerConfigError(
                    f"power domain {domain.name!r}: nodes {sorted(outside)[:5]} are not in its "
                    f"parent {domain.parent!r}; a child domain must lie inside its parent"
                )

    def depth(self, name: str) -> int:
        """0 for a root domain, 1 for its children, ..."""
        depth = 0
        parent = self._domains[name].parent
        while parent is not None:
            depth += 1
            parent = self._domains[parent].parent
        return depth

    @property
    def domains(self) -> list[PowerDomain]:
        """All domains, parents before children."""
        return [self._domains[name] for name in self._order]

    def get(self, name: str) -> PowerDomain:
        """The domain called `name`; PowerConfigError when there is none."""
        try:
            return self._domains[name]
        except KeyError:
            raise PowerConfigError(f"no power domain called {name!r}") from None

    def children(self, name: str) -> list[PowerDomain]:
        """The domains whose parent is `name`."""
        return [d for d in self.domains if d.parent == name]

    def domains_of_node(self, node: str) -> list[PowerDomain]:
        """Every domain holding `node`, innermost (deepest) first."""
        return [d for d in reversed(self.domains) if node in d.nodes]

    @classmethod
    def from_selectors(
        cls, selectors: Sequence[DomainSelector], node_labels: Mapping[str, Mapping[str, str]]
    ) -> PowerDomainTree:
        """Domains whose nodes are those whose labels include every `match_labels` pair."""
        domains = []
        for selector in selectors:
            nodes = frozenset(
                node
                for node, labels in node_labels.items()
                if all(labels.get(key) == value for key, value in selector.match_labels.items())
            )
            domains.append(PowerDomain(selector.name, selector.budget_w, nodes, selector.parent))
        return cls(domains)
