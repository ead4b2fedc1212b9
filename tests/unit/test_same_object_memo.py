"""Translations of cached objects kept while the cache holds the very same object."""

from __future__ import annotations

from typing import Any

import pytest

from voltpack.operator.kube.same_object_memo import SameObjectMemo


def test_the_same_object_is_translated_once_a_replaced_one_again() -> None:
    calls: list[str] = []

    def translate(obj: dict[str, Any]) -> str:
        calls.append(obj["name"])
        return obj["name"].upper()

    memo = SameObjectMemo(translate)
    pod = {"name": "a"}
    assert memo(pod) == "A" and memo(pod) == "A"
    memo.new_cycle()
    assert memo(pod) == "A"
    assert calls == ["a"]
    replaced = {"name": "a2"}  # the watch replaces an object, it never edits one
    assert memo(replaced) == "A2" and calls == ["a", "a2"]
    equal_but_new = {"name": "a"}
    assert memo(equal_but_new) == "A" and calls == ["a", "a2", "a"]


def test_objects_not_asked_for_in_a_cycle_are_forgotten() -> None:
    calls: list[int] = []
    memo = SameObjectMemo(lambda obj: calls.append(1) or obj["n"])
    first, second = {"n": 1}, {"n": 2}
    memo(first)
    memo(second)
    memo.new_cycle()
    memo(first)  # second not asked for in this cycle
    memo.new_cycle()
    memo(first)
    memo(second)
    assert len(calls) == 3  # first once; second twice (forgotten in between)


def test_a_translation_that_raises_is_tried_again() -> None:
    tries: list[int] = []

    def refuse(obj: dict[str, Any]) -> int:
        tries.append(1)
        raise ValueError("bad pod")

    memo = SameObjectMemo(refuse)
    bad = {"n": 0}
    for _ in range(2):
        with pytest.raises(ValueError, match="bad pod"):
            memo(bad)
    assert len(tries) == 2
