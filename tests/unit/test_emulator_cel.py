"""CRD validation rules in the emulator, evaluated with cel-python
(voltpack/emulator/admission/cel.py)."""

from __future__ import annotations

from typing import Any

import pytest

from voltpack.emulator.admission.cel import CelError, compile_rule, has_rules, rule_causes


@pytest.mark.parametrize(
    ("rule", "value", "expected"),
    [
        ("!has(self.minWorkers) || self.minWorkers <= self.workers", {"workers": 2}, True),
        ("!has(self.minWorkers) || self.minWorkers <= self.workers",
         {"workers": 2, "minWorkers": 3}, False),
        ("self.a + self.b * 2 == 7 && self.a % 2 == 1", {"a": 3, "b": 2}, True),
        ("self.name.startsWith('gpu-') && size(self.items) > 1", {"name": "gpu-a", "items": [1, 2]},
         True),
        ("self.mode in ['fast', 'slow'] ? self.mode != 'slow' : false", {"mode": "slow"}, False),
        ("self.tags.contains('x') || self.n / 2 == 2", {"tags": "xyz", "n": 4}, True),
        ("-self.low < 0 && !(self.low > self.high)", {"low": 1, "high": 3}, True),
        ("self.items.all(x, x > 0)", {"items": [1, 2]}, True),
        ("self.items.exists(x, x < 0)", {"items": [1, 2]}, False),
    ],
)  # fmt: skip
def test_rules_evaluate(rule: str, value: dict[str, Any], expected: bool) -> None:
    assert compile_rule(rule)({"self": value}) is expected


@pytest.mark.parametrize(
    "rule", ["self.missing > 0", "self.x ==", "duration(self.t) > 1", "self.x @ 2", "self.x"]
)
def test_rules_that_do_not_parse_evaluate_or_give_a_bool_are_refused(rule: str) -> None:
    with pytest.raises(CelError):
        compile_rule(rule)({"self": {"items": [1], "x": 1, "t": "1s"}})


def test_rule_causes_follow_the_schema_and_skip_what_they_cannot_judge() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                    {"rule": "self.items.all(x, x > 0)"},  # no items: fails to evaluate, unchecked
                    {"rule": "self.max == oldSelf.max"},  # transition rule: not checked
                ],
                "properties": {
                    "gpus": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "x-kubernetes-validations": [{"rule": "self.index >= 0"}],
                        },
                    }
                },
            }
        },
    }
    obj = {"spec": {"min": 3, "max": 2, "gpus": [{"index": 0}, {"index": -1}]}}
    causes = rule_causes(obj, schema)
    assert [(c.field, c.reason) for c in causes] == [
        ("spec", "FieldValueInvalid"),
        ("spec.gpus[1]", "FieldValueInvalid"),
    ]
    assert causes[0].message == 'Invalid value: "object": min must not exceed max'
    assert causes[1].message == 'Invalid value: "object": failed rule: self.index >= 0'
    assert has_rules(schema) and not has_rules({"type": "object"})
    assert rule_causes({"spec": {"min": 1, "max": 2, "gpus": []}}, schema) == []
