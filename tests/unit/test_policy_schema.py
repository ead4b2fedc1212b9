"""Policy files: the shipped examples validate; every mistake gets a PolicyError that says
which field is wrong, what the bad value was and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

import voltpack.policies
from voltpack.model import PolicyError
from voltpack.policies.registry import strategy_names
from voltpack.policies.schema import (
    API_VERSION,
    KIND,
    load_policy,
    parse_policy,
    policy_for_strategy,
)
from voltpack.scheduler.fault_recovery import RecoveryPolicy, recovery_policy

EXAMPLES = sorted((Path(voltpack.policies.__file__).parent / "examples").glob("*.yaml"))
ORIGIN = "my-policy.yaml"
VALID = f"""\
apiVersion: {API_VERSION}
kind: {KIND}
metadata:
  name: packing
spec:
  scoring:
    strategy: best-fit
"""


def policy_error(text: str) -> str:
    """Parse `text`, expect a PolicyError, return its message after the origin."""
    with pytest.raises(PolicyError) as error:
        parse_policy(text, ORIGIN)
    message = str(error.value)
    assert message.startswith(f"{ORIGIN}: "), message
    return message[len(ORIGIN) + 2 :]


def test_every_strategy_has_an_example_named_after_it() -> None:
    assert set(strategy_names()) <= {path.stem for path in EXAMPLES}


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_example_policy_validates(path: Path) -> None:
    policy = load_policy(path)
    assert policy.api_version == API_VERSION
    assert policy.kind == KIND
    assert policy.metadata.name == path.stem
    assert policy.spec.scoring.strategy in strategy_names()
    assert path.stem.startswith(policy.spec.scoring.strategy)


def test_valid_policy_parses() -> None:
    policy = parse_policy(VALID)
    assert policy.metadata.name == "packing"
    assert policy.spec.scoring.strategy == "best-fit"


@pytest.mark.parametrize("name", strategy_names())
def test_policy_for_strategy_selects_it(name: str) -> None:
    policy = policy_for_strategy(name)
    assert policy.spec.scoring.strategy == name
    assert policy.metadata.name == name


def test_unknown_strategy() -> None:
    rest = policy_error(VALID.replace("strategy: best-fit", "strategy: worst-fit"))
    assert "spec.scoring.strategy" in rest
    assert "'worst-fit'" in rest
    assert "allowed values" in rest
    for name in strategy_names():
        assert name in rest


def test_strategy_names_are_case_sensitive() -> None:
    rest = policy_error(VALID.replace("strategy: best-fit", "strategy: Best-Fit"))
    assert "'Best-Fit'" in rest


def test_unknown_strategy_through_policy_for_strategy() -> None:
    with pytest.raises(PolicyError, match="worst-fit"):
        policy_for_strategy("worst-fit")


def test_wrong_api_version() -> None:
    rest = policy_error(VALID.replace(API_VERSION, "voltpack.io/v2"))
    assert "field apiVersion" in rest
    assert "'voltpack.io/v2'" in rest
    assert API_VERSION in rest


def test_wrong_kind() -> None:
    rest = policy_error(VALID.replace(f"kind: {KIND}", "kind: Deployment"))
    assert "field kind" in rest
    assert "'Deployment'" in rest
    assert KIND in rest


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (VALID + "priority: high\n", "priority"),
        (VALID.replace("  name: packing", "  name: packing\n  labels: {}"), "metadata.labels"),
        (
            VALID.replace("strategy: best-fit", "strategy: best-fit\n    weight: 2"),
            "spec.scoring.weight",
        ),
    ],
    ids=["top-level", "in-metadata", "in-scoring"],
)
def test_unknown_extra_field(text: str, field: str) -> None:
    rest = policy_error(text)
    assert f"field {field} is not a known field" in rest


def test_missing_spec() -> None:
    rest = policy_error(VALID[: VALID.index("spec:")])
    assert "field spec is required" in rest


def test_missing_strategy() -> None:
    rest = policy_error(VALID.replace("    strategy: best-fit\n", "    {}\n"))
    assert "spec.scoring" in rest


def test_every_problem_is_reported_at_once() -> None:
    rest = policy_error(f"apiVersion: v0\nkind: {KIND}\nmetadata: {{name: ok}}\n")
    assert "field apiVersion" in rest
    assert "field spec is required" in rest


def test_wrong_type_names_field_and_value() -> None:
    rest = policy_error(VALID.replace("strategy: best-fit", "strategy: [best-fit]"))
    assert "spec.scoring.strategy" in rest
    assert "['best-fit']" in rest


def test_invalid_yaml() -> None:
    rest = policy_error("apiVersion: [unclosed\nkind: x\n")
    assert "not valid YAML" in rest


@pytest.mark.parametrize(
    "text",
    ["- apiVersion: x\n- kind: y\n", "just a string\n", "", "42\n"],
    ids=["list", "string", "empty", "number"],
)
def test_document_that_is_not_a_mapping(text: str) -> None:
    rest = policy_error(text)
    assert "YAML mapping" in rest


@pytest.mark.parametrize(
    "name", ["Best_Fit", "-leading-dash", "trailing-dash-", "has space", "UPPER", ""]
)
def test_bad_metadata_name(name: str) -> None:
    rest = policy_error(VALID.replace("name: packing", f"name: {name!r}"))
    assert "field metadata.name" in rest
    if name:
        assert repr(name) in rest


def test_load_policy_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(PolicyError) as error:
        load_policy(path)
    assert str(error.value).startswith(f"{path}: cannot read policy file")


def test_load_policy_names_the_file_in_validation_errors(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(VALID.replace("best-fit", "worst-fit"), encoding="utf-8")
    with pytest.raises(PolicyError) as error:
        load_policy(path)
    assert str(error.value).startswith(f"{path}: field spec.scoring.strategy")


def test_load_policy_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_bytes(b"\xff\xfe\x00 binary, not a policy")
    with pytest.raises(PolicyError) as error:
        load_policy(path)
    assert str(path) in str(error.value)


POWER_HEADER = (
    "apiVersion: voltpack.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: p}\n"
    "spec:\n  scoring: {strategy: best-fit}\n  power:\n"
)


@pytest.mark.parametrize(
    ("power", "message"),
    [
        ("    policy: polka\n", "spec.power.policy: value 'polka' is not allowed"),
        ("    params: {target_fraction: 2}\n", "spec.power.params.target_fraction"),
        ("    interval_s: 0\n", "spec.power.interval_s"),
        (
            "    gpus: {A100-80GB: {lock_clocks_mhz: [1000, 1200], floor_power_w: 100}}\n",
            "spec.power.gpus.A100-80GB: .*strictly descending",
        ),
        (
            "    gpus: {A100-80GB: {lock_clocks_mhz: [1900], floor_power_w: 100}}\n",
            "outside the GPU's range",
        ),
        ("    gpus: {Z9000: {lock_clocks_mhz: [900], floor_power_w: 100}}\n", "unknown GPU model"),
        ("    domains: [{name: r, budget_w: -5}]\n", "spec.power.domains.0.budget_w"),
        ("    forecast: {model: crystal-ball}\n", "spec.power.forecast: .*'crystal-ball'.*known"),
        ("    forecast: {level: 1.5}\n", "spec.power.forecast.level"),
        ("    forecast: {horizon_s: 0}\n", "spec.power.forecast.horizon_s"),
        ("    forecast: {refresh: 60}\n", "spec.power.forecast.refresh"),
        ("    forecast: {refresh_s: 1000, horizon_s: 900}\n", "refresh_s .* at most horizon_s"),
    ],
)
def test_bad_power_sections_name_the_field(power: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_policy(POWER_HEADER + power)


@pytest.mark.parametrize("value", ["1e309", ".inf", ".nan", "601", "1e6", "-1"])
def test_stale_after_s_is_bounded_so_the_fail_safe_cannot_be_switched_off(value: str) -> None:
    with pytest.raises(PolicyError, match=r"spec\.power\.stale_after_s"):
        parse_policy(POWER_HEADER + f"    stale_after_s: {value}\n")


def test_stale_after_s_up_to_ten_minutes_is_accepted() -> None:
    policy = parse_policy(POWER_HEADER + "    stale_after_s: 600\n")
    assert policy.spec.power.stale_after_s == 600


def test_late_must_come_before_stale() -> None:
    with pytest.raises(PolicyError, match="late_after_s must be below stale_after_s"):
        parse_policy(POWER_HEADER + "    late_after_s: 20\n    stale_after_s: 10\n")


ALLOCATION_HEADER = (
    "apiVersion: voltpack.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: p}\n"
    "spec:\n  scoring: {strategy: best-fit}\n  allocation:\n"
)


def test_allocation_is_off_by_default() -> None:
    allocation = parse_policy(VALID).spec.allocation
    assert allocation.policy is None
    assert not allocation.enabled
    assert allocation.throughputs is None


def test_allocation_section_with_defaults() -> None:
    allocation = parse_policy(
        ALLOCATION_HEADER + "    policy: max_min_fairness_perf\n"
    ).spec.allocation
    assert allocation.enabled
    assert allocation.policy == "max_min_fairness_perf"
    assert allocation.round_s == 360.0
    assert allocation.restart_cost_s == 0.0
    assert allocation.min_runtime_s == 600.0


def test_hetero_example_turns_allocation_on() -> None:
    allocation = load_policy(EXAMPLES[0].parent / "fgd-hetero.yaml").spec.allocation
    assert allocation.policy == "max_min_fairness_perf"
    assert allocation.throughputs is None


@pytest.mark.parametrize(
    ("allocation", "message"),
    [
        ("    policy: fastest\n", "spec.allocation.policy: value 'fastest' is not allowed"),
        ("    policy: fifo_perf\n    round_s: 0\n", "spec.allocation.round_s"),
        ("    restart_cost_s: -1\n", "spec.allocation.restart_cost_s"),
        ("    min_runtime_s: -5\n", "spec.allocation.min_runtime_s"),
        ("    rounds: 3\n", "spec.allocation.rounds is not a known field"),
        ("    throughputs: [a, b]\n", "spec.allocation.throughputs"),
    ],
)
def test_bad_allocation_sections_name_the_field(allocation: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_policy(ALLOCATION_HEADER + allocation)


def test_unknown_allocation_policy_lists_the_allowed_ones() -> None:
    rest = policy_error(ALLOCATION_HEADER + "    policy: fastest\n")
    assert "max_min_fairness_perf" in rest and "shortest_remaining_perf" in rest


def test_recovery_settings_come_from_the_policy_file() -> None:
    text = VALID + "  recovery: {isolation: node, shrink: false, max_restarts: 5, backoff_s: 0}\n"
    policy = recovery_policy(parse_policy(text, ORIGIN).spec.recovery)
    assert policy == RecoveryPolicy(
        isolation="node", shrink=False, max_restarts=5, budget_window_s=3600.0, backoff_s=0.0
    )
    assert recovery_policy(parse_policy(VALID).spec.recovery) == RecoveryPolicy()


@pytest.mark.parametrize(
    ("recovery", "field"),
    [
        ("{max_restarts: 0}", "spec.recovery.max_restarts"),
        ("{isolation: rack}", "spec.recovery.isolation"),
        ("{budget_window_s: -1}", "spec.recovery.budget_window_s"),
        ("{restarts: 3}", "spec.recovery.restarts"),
    ],
)
def test_bad_recovery_settings_name_the_field(recovery: str, field: str) -> None:
    message = policy_error(VALID + f"  recovery: {recovery}\n")
    assert f"field {field}" in message, message
