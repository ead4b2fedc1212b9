"""User YAML is read with bounds (nesting depth, nodes after alias expansion), and errors show
bounded excerpts of bad values: a hostile policy gets a short error, quickly."""

from __future__ import annotations

import pytest
import yaml

from tests.hostile_yaml import ALIAS_BOMB, DEEP_NESTING, RECURSIVE_ALIAS
from voltpack.model import PolicyError
from voltpack.model.echo import ECHO_LIMIT, short_repr
from voltpack.model.safe_yaml import MAX_DEPTH, MAX_NODES, YamlLimitError, safe_load, safe_load_all
from voltpack.policies.schema import API_VERSION, KIND, parse_policy


def test_ordinary_documents_load_as_with_yaml_safe_load() -> None:
    text = "a: &x {b: [1, 2.5, null, yes]}\nc: *x\nd: {<<: *x, e: f}\n"
    assert safe_load(text) == yaml.safe_load(text)
    assert safe_load_all("a: 1\n---\nb: 2\n") == [{"a": 1}, {"b": 2}]


def test_nesting_up_to_the_limit_loads_and_one_deeper_is_refused_naming_the_line() -> None:
    assert safe_load("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(YamlLimitError) as error:
        safe_load("a: 1\nb: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert f"deeper than {MAX_DEPTH} levels" in str(error.value)
    assert "(line 2, column" in str(error.value)


def test_aliases_count_as_the_values_they_expand_to() -> None:
    # 10 lists of 10^4 values each: 100,010 nodes once expanded, from 8 lines
    anchors = "a0: &a0 [" + ",".join(["x"] * 9) + "]\n"
    anchors += "".join(f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 4))
    assert safe_load(anchors)["a3"][9][9][9] == ["x"] * 9
    with pytest.raises(YamlLimitError) as error:
        safe_load(anchors + "a4: [" + ",".join(["*a3"] * 10) + "]\n")
    assert f"more than {MAX_NODES} values" in str(error.value)
    assert "(line 5," in str(error.value)


def test_a_flat_document_beyond_the_node_limit_is_refused() -> None:
    with pytest.raises(YamlLimitError):
        safe_load("[" + ",".join(["1"] * MAX_NODES) + "]")


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(YamlLimitError) as error:
        safe_load("a: &loop [1, *loop]\n")
    assert "recursive" in str(error.value)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (ALIAS_BOMB, "more than 100000 values"),
        (DEEP_NESTING, "deeper than 64 levels"),
        (RECURSIVE_ALIAS, "recursive"),
    ],
)
def test_hostile_policy_files_get_a_short_policy_error(text: str, words: str) -> None:
    with pytest.raises(PolicyError) as error:
        parse_policy(text, "hostile.yaml")
    message = str(error.value)
    assert message.startswith("hostile.yaml: not valid YAML: ") and words in message
    assert "line" in message and len(message) < 300 and "\n" not in message


def test_a_huge_bad_value_is_echoed_cut_to_the_limit() -> None:
    name = "N" * 100_000
    text = f"apiVersion: {API_VERSION}\nkind: {KIND}\nmetadata: {{name: {name}}}\n"
    text += "spec: {scoring: {strategy: " + "s" * 50_000 + "}}\n"
    for bad in (text, text.replace("N" * 100_000, "ok")):
        with pytest.raises(PolicyError) as error:
            parse_policy(bad, "big.yaml")
        message = str(error.value)
        assert len(message) < 1000, len(message)
        assert "characters)" in message


def test_many_field_errors_are_counted_not_all_listed() -> None:
    extra = "".join(f"  x{i}: 1\n" for i in range(500))
    text = f"apiVersion: {API_VERSION}\nkind: {KIND}\nmetadata:\n  name: a\n{extra}"
    text += "spec: {scoring: {strategy: fgd}}\n"
    with pytest.raises(PolicyError) as error:
        parse_policy(text, "p.yaml")
    message = str(error.value)
    assert "and 480 more" in message and len(message) < 5000


def test_short_repr_bounds_strings_and_nested_collections() -> None:
    assert short_repr("abc") == "'abc'"
    long = short_repr("x" * 10_000)
    assert len(long) < ECHO_LIMIT + 40 and long.endswith("(10000 characters)")
    nested: list[object] = [[list(range(1000))] * 1000] * 1000
    assert len(short_repr(nested)) <= ECHO_LIMIT + 1
