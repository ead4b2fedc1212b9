"""The power-domain tree: validation with clear errors, membership, selectors."""

from __future__ import annotations

import pytest

from voltpack.model.errors import PowerConfigError
from voltpack.power.domains import DomainSelector, PowerDomain, PowerDomainTree


def tree() -> PowerDomainTree:
    return PowerDomainTree(
        [
            PowerDomain("rack-a", 20_000, frozenset({"n1", "n2"}), parent="row-1"),
            PowerDomain("row-1", 50_000, frozenset({"n1", "n2", "n3"}), parent="site"),
            PowerDomain("site", 90_000, frozenset({"n1", "n2", "n3", "n4"})),
        ]
    )


def test_parents_come_before_children_and_nodes_see_innermost_first() -> None:
    t = tree()
    assert [d.name for d in t.domains] == ["site", "row-1", "rack-a"]
    assert [d.name for d in t.domains_of_node("n1")] == ["rack-a", "row-1", "site"]
    assert [d.name for d in t.domains_of_node("n4")] == ["site"]
    assert [d.name for d in t.children("row-1")] == ["rack-a"]
    assert t.depth("rack-a") == 2


@pytest.mark.parametrize(
    ("domains", "message"),
    [
        ([PowerDomain("a", 1, frozenset()), PowerDomain("a", 2, frozenset())], "defined twice"),
        ([PowerDomain("a", 0, frozenset())], "budget_w must be > 0"),
        ([PowerDomain("a", 1, frozenset(), parent="zz")], "parent 'zz' is not a domain"),
        (
            [PowerDomain("a", 1, frozenset(), parent="b"), PowerDomain("b", 1, frozenset(), "a")],
            "cycle",
        ),
        (
            [PowerDomain("p", 1, frozenset({"x"})), PowerDomain("c", 1, frozenset({"y"}), "p")],
            "must lie inside its parent",
        ),
    ],
)
def test_bad_trees_are_refused_with_the_reason(domains: list[PowerDomain], message: str) -> None:
    with pytest.raises(PowerConfigError, match=message):
        PowerDomainTree(domains)


def test_unknown_domain_lookup_names_it() -> None:
    with pytest.raises(PowerConfigError, match="no power domain called 'nope'"):
        tree().get("nope")


def test_selectors_pick_nodes_by_every_label() -> None:
    labels = {
        "n1": {"row": "1", "rack": "a"},
        "n2": {"row": "1", "rack": "b"},
        "n3": {"row": "2", "rack": "a"},
    }
    t = PowerDomainTree.from_selectors(
        [
            DomainSelector("row-1", 10_000, {"row": "1"}),
            DomainSelector("row-1-rack-a", 5_000, {"row": "1", "rack": "a"}, parent="row-1"),
            DomainSelector("all", 30_000, {}),
        ],
        labels,
    )
    assert t.get("row-1").nodes == {"n1", "n2"}
    assert t.get("row-1-rack-a").nodes == {"n1"}
    assert t.get("all").nodes == {"n1", "n2", "n3"}
