"""The operator's side of the power efficiency mechanisms: the pool demand and router weights an
InferenceService publishes, each replica's phase mix from its vLLM token counters, the power
loop's phase-clock floors, and their fail-safe paths (no rate, unreadable status, missing or
stale metrics)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voltpack.model import PolicyError
from voltpack.model.errors import InvalidRequestError
from voltpack.model.resources.inferenceservice import InferenceServiceSpec, PlannedGroup
from voltpack.operator.inference.phases import (
    PhaseWindow,
    TokenSample,
    parse_token_counters,
    phase_cost,
)
from voltpack.operator.inference.routing import (
    RateWindow,
    RequestCost,
    decide_routing,
    request_cost,
    weight_annotation,
)
from voltpack.operator.inference.services import merge_patch
from voltpack.operator.kube.timestamps import rfc3339
from voltpack.operator.power.phase_floors import floor_rungs
from voltpack.perf.inference_profile import default_profile_book
from voltpack.policies.power.consolidation import ConsolidationParams
from voltpack.policies.schema import PowerSpec, load_policy
from voltpack.power.controller import GpuSlot
from voltpack.power.freshness import ArrivalClock
from voltpack.power.setup import ladder_for

SPEC = InferenceServiceSpec.model_validate(
    {
        "model": "llama3-8b",
        "slo": {"ttftMs": 3000, "tpotMs": 100},
        "ratePerSecond": 2,
        "requestSizes": [
            {"promptTokens": 512, "outputTokens": 256, "share": 0.6},
            {"promptTokens": 2000, "outputTokens": 128, "share": 0.4},
        ],
        "container": {"image": "vllm/vllm-openai:v0.6.3"},
    }
)
GROUP = PlannedGroup(
    gpu_type="H100-SXM", tensor_parallel=1, role="unified", replicas=4, cost_per_hour=1,
    extrapolated=False,
)  # fmt: skip
PARAMS = ConsolidationParams(
    window_s=1, lookback_s=10, shrink_hold_s=20, max_prefill_share=0.5, max_decode_sequences=16
)
POOL = ["r-0", "r-1", "r-2", "r-3"]

# -- routing ------------------------------------------------------------------------------------


def test_the_demand_is_the_rate_times_what_a_request_costs_on_the_plans_profile() -> None:
    cost = request_cost(SPEC, [GROUP], default_profile_book(), PARAMS)
    assert cost is not None
    profile = default_profile_book().profile("llama3-8b", "H100-SXM", 1)
    prefill = 0.6 * profile.prefill_s([512]) + 0.4 * profile.prefill_s([2000])
    assert cost.prefill_s == pytest.approx(prefill)
    # decode: output tokens x the step time of a batch packed to max_decode_sequences
    step_512 = profile.decode_step_s(16, 16 * (512 + 128))
    step_2000 = profile.decode_step_s(16, 16 * (2000 + 64))
    assert cost.decode_s == pytest.approx(0.6 * 256 * step_512 + 0.4 * 128 * step_2000)
    demand = cost.demand(3.0)
    assert demand.prefill_s_per_s == pytest.approx(3 * cost.prefill_s)
    assert demand.decode_sequences == pytest.approx(3 * cost.decode_s)
    # a split plan has no unified pool to route over
    split = GROUP.model_copy(update={"role": "decode"})
    assert request_cost(SPEC, [split], default_profile_book(), PARAMS) is None


def _routed(recorded: Any, rate: float | None, window: RateWindow, now_s: float) -> Any:
    return decide_routing(POOL, recorded, rate, window, RequestCost(0.1, 1.0), PARAMS, now_s)


def test_a_covered_low_rate_consolidates_after_the_hold_and_a_rise_grows_at_once() -> None:
    window = RateWindow()
    recorded = None
    for now in range(0, 40):  # 0.5/s: 0.05 prefill s/s, 0.5 sequences -> one replica
        decision = _routed(recorded, 0.5, window, 1000.0 + now)
        recorded = decision.status
    assert recorded["activeReplicas"] == 1 and recorded["reason"] == "Consolidated"
    assert decision.weights == {"r-0": 1.0, "r-1": 0.0, "r-2": 0.0, "r-3": 0.0}
    grown = _routed(recorded, 20.0, window, 1041.0)  # 2 prefill s/s: 4 replicas at once
    assert grown.status["activeReplicas"] == 4 and grown.status["since"] == rfc3339(1041.0)


def test_a_history_shorter_than_the_lookback_never_shrinks() -> None:
    window = RateWindow()
    recorded = {"activeReplicas": 4, "replicas": 4, "weights": {p: 0.25 for p in POOL},
                "since": rfc3339(0.0)}  # fmt: skip
    decision = _routed(recorded, 0.5, window, 1000.0)  # a new leader: no history yet
    assert decision.status["activeReplicas"] == 4
    assert "not shrinking yet" in decision.status["message"]


def test_no_measured_rate_or_an_unreadable_status_gives_every_replica_an_equal_share() -> None:
    window = RateWindow()
    none = _routed(None, None, window, 1000.0)
    assert none.status["reason"] == "NoMeasuredRate"
    assert none.weights == {p: 0.25 for p in POOL}
    for broken in ({"activeReplicas": "two"}, {"activeReplicas": 1, "replicas": 4,
                                               "weights": {}, "since": "yesterday"}):  # fmt: skip
        decision = _routed(broken, 0.5, window, 1001.0)
        assert decision.status["reason"] == "StatusUnreadable", broken
        assert decision.weights == {p: 0.25 for p in POOL}


def test_weights_are_published_in_thousandths_and_never_all_zero() -> None:
    assert weight_annotation(0.25) == "250"
    assert weight_annotation(0.0) == "0"
    assert weight_annotation(1 / 3000) == "1"  # a share above 0 never rounds to 0


def test_a_status_write_removes_keys_gone_from_nested_maps() -> None:
    previous = {"routing": {"weights": {"a": 0.5, "b": 0.5}, "since": "t"}, "phase": "Ready"}
    wanted = {"routing": {"weights": {"a": 1.0}, "since": "t"}}
    assert merge_patch(previous, wanted) == {
        "phase": None, "routing": {"weights": {"a": 1.0, "b": None}, "since": "t"},
    }  # fmt: skip


# -- phase mix ----------------------------------------------------------------------------------

PAGE = """\
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{model_name="m"}} {prompt}
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{model_name="m"}} {generation}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} 4
"""


def test_token_counters_are_read_and_a_page_without_them_is_named() -> None:
    sample = parse_token_counters(PAGE.format(prompt=100, generation=50))
    assert sample == TokenSample(100.0, 50.0, 4.0)
    with pytest.raises(InvalidRequestError, match="no vllm:generation_tokens_total counter"):
        parse_token_counters(
            "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total 1\n"
        )


def test_the_phase_mix_is_gpu_time_over_wall_time_and_needs_half_a_window() -> None:
    profile = default_profile_book().profile("llama3-8b", "H100-SXM", 1)
    cost = phase_cost(SPEC, profile)
    window = PhaseWindow()
    window.record(0.0, TokenSample(0, 0, 4), 10.0)
    window.record(2.0, TokenSample(0, 100, 4), 10.0)
    assert window.mix(cost, 10.0) is None  # 2 s of a 10 s window
    window.record(10.0, TokenSample(1000, 400, 4), 10.0)
    mix = window.mix(cost, 10.0)
    assert mix is not None and mix.at_s == 10.0
    assert mix.prefill_share == pytest.approx(1000 * cost.prefill_s_per_token / 10, abs=1e-4)
    assert mix.decode_share == pytest.approx(cost.decode_s(400, 4) / 10, abs=1e-4)
    # a restarted server (a counter went down) starts the window again
    window.record(11.0, TokenSample(5, 5, 1), 10.0)
    assert window.mix(cost, 10.0) is None


# -- the power loop's floors --------------------------------------------------------------------

POWER = PowerSpec.model_validate(
    {
        "efficiency": {"phase_clocks": {"window_s": 10, "max_slowdown": 0.08}},
        "stale_after_s": 5,
        "late_after_s": 2,
    }
)
SLOTS = [GpuSlot("n1", i, ladder_for("H100-SXM", POWER)) for i in range(2)]


def _service(phases: Any) -> dict[str, Any]:
    return {"metadata": {"name": "batch", "namespace": "default"},
            "status": {"replicaPhases": phases}}  # fmt: skip


def _pod(name: str, gpu: int, priority: int = -1000, indices: bool = True) -> dict[str, Any]:
    annotations = {"voltpack.io/priority": str(priority)}
    if indices:
        annotations["voltpack.io/gpu-indices"] = str(gpu)
    return {
        "metadata": {
            "name": name, "namespace": "default", "annotations": annotations,
            "labels": {"voltpack.io/inference-service": "batch"},
            "ownerReferences": [{"apiVersion": "voltpack.io/v1alpha1", "kind": "InferenceService",
                                 "name": "batch", "uid": "u", "controller": True}],
        },
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }  # fmt: skip


def _decoding(at_s: float) -> dict[str, Any]:
    return {"prefillShare": 0.0, "decodeShare": 0.9, "observedAt": rfc3339(at_s)}


def test_a_fresh_decode_mix_sets_the_phase_clock_floor_of_the_replicas_gpu() -> None:
    phases = {"a": _decoding(1000.0), "b": {"prefillShare": 0.8, "decodeShare": 0.1,
                                           "observedAt": rfc3339(1000.0)}}  # fmt: skip
    pods = [_pod("a", 0), _pod("b", 1)]
    floor = floor_rungs(SLOTS, [_service(phases)], pods, POWER, ArrivalClock(), 1000.0)
    assert floor.tolist() == [2, 0]  # 1575 MHz for decode; prefill keeps full clocks
    assert SLOTS[0].ladder.settings[2].locked_clock_mhz == 1575


def test_no_floor_from_a_stale_malformed_or_high_priority_mix() -> None:
    arrivals = ArrivalClock()
    services = [_service({"a": _decoding(1000.0)})]
    pods = [_pod("a", 0)]
    assert floor_rungs(SLOTS, services, pods, POWER, arrivals, 1000.0).tolist() == [2, 0]
    # the same report, never refreshed, past window_s + stale_after_s of this loop's clock
    assert floor_rungs(SLOTS, services, pods, POWER, arrivals, 1016.0).tolist() == [0, 0]
    for phases, pod in (
        ({"a": {"prefillShare": 2, "decodeShare": 0, "observedAt": rfc3339(1000)}}, _pod("a", 0)),
        ({"a": "decode"}, _pod("a", 0)),
        ({"a": _decoding(1000.0)}, _pod("a", 0, priority=1000)),  # high priority
        ({"a": _decoding(1000.0)}, _pod("a", 0, indices=False)),  # GPUs unknown
        ({"b": _decoding(1000.0)}, _pod("a", 0)),  # another pod's mix
    ):
        floor = floor_rungs(SLOTS, [_service(phases)], [pod], POWER, ArrivalClock(), 1000.0)
        assert floor.tolist() == [0, 0], phases
    high_too = POWER.model_copy(
        update={
            "efficiency": POWER.efficiency.model_copy(update={"phase_clocks_high_priority": True})
        }
    )
    floor = floor_rungs(SLOTS, services, [_pod("a", 0, priority=1000)], high_too, ArrivalClock(),
                        1000.0)  # fmt: skip
    assert floor.tolist() == [2, 0]
    assert np.all(floor_rungs(SLOTS, services, pods, PowerSpec(), ArrivalClock(), 1000.0) == 0)


# -- the policy file ----------------------------------------------------------------------------

POLICY = """\
apiVersion: voltpack.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: efficient}
spec:
  scoring: {strategy: best-fit}
  power:
    efficiency: EFFICIENCY
"""


@pytest.mark.parametrize(
    ("efficiency", "named"),
    [
        ("{routing: {max_prefill_share: 2}}", "spec.power.efficiency.routing.max_prefill_share"),
        ("{phase_clocks: {window: 60}}", "spec.power.efficiency.phase_clocks.window"),
        ("{phase_clocks_high_priority: maybe}", "spec.power.efficiency.phase_clocks_high_priority"),
    ],
)
def test_a_bad_efficiency_block_is_refused_naming_the_field(
    tmp_path: Path, efficiency: str, named: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY.replace("EFFICIENCY", efficiency), encoding="utf-8")
    with pytest.raises(PolicyError, match=f"field {named}"):
        load_policy(path)
    good = copy.copy(POLICY).replace("EFFICIENCY", "{routing: {max_prefill_share: 0.3}}")
    path.write_text(good, encoding="utf-8")
    assert load_policy(path).spec.power.efficiency.routing is not None
