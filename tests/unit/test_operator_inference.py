"""The InferenceService controller's pieces without a server: planning rates, hysteresis, the
replica pods, and reconcile rounds against a recording fake of the Kubernetes client."""

from __future__ import annotations

import copy
import json
import math
from types import SimpleNamespace
from typing import Any

import pytest

from voltpack.model import Node
from voltpack.model.errors import InvalidRequestError
from voltpack.model.resources import InferenceServiceSpec
from voltpack.model.resources.inferenceservice import PlannedGroup
from voltpack.operator.inference.plans import (
    ClusterProfiles,
    cluster_gpu_shapes,
    plan_request,
    request_mix_of,
    spec_hash,
)
from voltpack.operator.inference.pods import replica_pod
from voltpack.operator.inference.rates import (
    MIN_PLANNING_RATE_PER_S,
    RateHistory,
    RateTracker,
    parse_observed_rate,
)
from voltpack.operator.inference.services import InferenceServiceController, replan_reason
from voltpack.operator.kube.translate import node_to_k8s, pod_from_k8s, pod_priority
from voltpack.operator.power.objects import is_throughput_bound
from voltpack.policies.inference.scaling import PlanningRate

RATE = "voltpack.io/observed-rate-per-second"
SPEC: dict[str, Any] = {
    "model": "llama3-8b",
    "slo": {"ttftMs": 3000, "tpotMs": 100},
    "ratePerSecond": 2,
    "requestSizes": [
        {"promptTokens": 512, "outputTokens": 256, "share": 0.6},
        {"promptTokens": 2000, "outputTokens": 128, "share": 0.3},
        {"promptTokens": 100, "outputTokens": 32, "share": 0.1},
    ],
    "gpuTypes": ["A10", "L4"],
    "container": {"image": "server:1", "env": [{"name": "LOG", "value": "debug"}]},
}


def parsed(**changes: Any) -> InferenceServiceSpec:
    return InferenceServiceSpec.model_validate({**copy.deepcopy(SPEC), **changes})


# -- planning rates ---------------------------------------------------------------------------


def test_without_a_measurement_the_spec_rate_is_planned_for() -> None:
    rate = RateTracker().planning_rate("ns/a", parsed(), None, 1000.0)
    assert rate.rate_per_s == 2.0 and rate.source.startswith("spec.ratePerSecond")


def test_reactive_scaling_plans_for_the_latest_measurement() -> None:
    tracker = RateTracker()
    spec = parsed(scaling={"mode": "reactive"})
    assert tracker.planning_rate("ns/a", spec, 5.5, 0.0).rate_per_s == 5.5
    rate = tracker.planning_rate("ns/a", spec, 0.0, 60.0)
    assert rate.rate_per_s == MIN_PLANNING_RATE_PER_S and "floor" in rate.source


def test_forecast_scaling_plans_for_an_upper_quantile_of_the_measured_history() -> None:
    tracker = RateTracker()
    spec = parsed(scaling={"mode": "forecast", "forecaster": "naive", "sampleSeconds": 60})
    first = tracker.planning_rate("ns/a", spec, 4.0, 0.0)
    assert first.rate_per_s == 4.0 and "fallback" in first.source  # one sample: no forecast
    rates = []
    for minute in range(1, 30):
        rates.append(tracker.planning_rate("ns/a", spec, 4.0 + (minute % 3) * 0.5, minute * 60.0))
    last = rates[-1]
    assert last.source.startswith("measured rate, forecast q0.9 of naive")
    assert last.rate_per_s > 4.5, "an upper quantile covers the wobble above the last value"


def test_a_forecast_is_recomputed_only_when_the_history_moves() -> None:
    tracker = RateTracker()
    spec = parsed(scaling={"forecaster": "naive"})
    for minute in range(5):
        tracker.planning_rate("ns/a", spec, 3.0 + minute, minute * 60.0)
    before = tracker.planning_rate("ns/a", spec, 7.0, 4 * 60.0 + 30)  # same slot, same value
    assert tracker.planning_rate("ns/a", spec, 7.0, 4 * 60.0 + 50) is before


def _burst_rate(spike_slot: int) -> PlanningRate:
    """The burst-mode rate after 600 one-second slots at 2 requests/s, one slot holding 100."""
    tracker = RateTracker()
    spec = parsed(scaling={"mode": "burst", "sampleSeconds": 1, "burstWindowMinutes": 10})
    rate = None
    for second in range(600):
        rate = tracker.planning_rate(
            "ns/a", spec, 100.0 if second == spike_slot else 2.0, float(second)
        )
    assert rate is not None
    return rate


def test_burst_mode_adds_the_headroom_its_windows_later_half_needed() -> None:
    late = _burst_rate(450)  # the burst only the later half of the window saw
    early = _burst_rate(150)  # the same burst in the earlier half
    assert "second half needed" in late.source and "second half" not in early.source
    assert late.rate_per_s > early.rate_per_s


def test_the_rate_history_keeps_the_latest_value_per_slot_and_marks_gaps() -> None:
    history = RateHistory(step_s=60.0, max_samples=4)
    history.observe(0.0, 1.0)
    history.observe(30.0, 2.0)  # same slot: replaces
    history.observe(180.0, 4.0)  # two empty slots between
    series = history.series("ns/a")
    assert series.start_s == 0.0 and series.step_s == 60.0
    values = series.values.tolist()
    assert values[0] == 2.0 and math.isnan(values[1]) and math.isnan(values[2])
    history.observe(240.0, 5.0)  # the history spans at most four slots
    assert history.slots == [3, 4] and history.values == [4.0, 5.0]


@pytest.mark.parametrize("text", ["fast", "-1", "nan", "inf"])
def test_a_bad_rate_annotation_is_refused_naming_it(text: str) -> None:
    with pytest.raises(InvalidRequestError, match=RATE):
        parse_observed_rate({RATE: text})
    assert parse_observed_rate({}) is None


# -- hysteresis -------------------------------------------------------------------------------


def plan_for(rate_per_s: float, fingerprint: str = "h") -> Any:
    return SimpleNamespace(spec_hash=fingerprint, rate_per_s=rate_per_s)


def test_a_rate_within_ten_percent_keeps_the_plan_and_a_larger_change_replans() -> None:
    current = plan_for(2.0)
    assert replan_reason(None, "h", PlanningRate(2.0, "s"), 0.1) == "first plan"
    for inside in (1.81, 1.9, 2.0, 2.1, 2.19):
        assert replan_reason(current, "h", PlanningRate(inside, "s"), 0.1) is None, inside
    for outside in (1.79, 2.21, 4.0):
        why = replan_reason(current, "h", PlanningRate(outside, "s"), 0.1)
        assert why is not None and "moved from 2/s" in why, outside
    assert replan_reason(current, "other", PlanningRate(2.0, "s"), 0.1) == "the spec changed"


def test_the_spec_fingerprint_ignores_the_rate_and_the_container() -> None:
    base = spec_hash(parsed())
    assert spec_hash(parsed(ratePerSecond=3)) == base
    assert spec_hash(parsed(container={"image": "server:2"})) == base
    assert spec_hash(parsed(scaling={"mode": "reactive"})) == base
    assert spec_hash(parsed(gpuTypes=["NVIDIA-A10", "L4"])) == base  # an alias
    assert spec_hash(parsed(slo={"ttftMs": 1000, "tpotMs": 90})) != base
    assert spec_hash(parsed(split="never")) != base
    assert spec_hash(parsed(prices={"A10": 1.1, "L4": 0.8})) != base


def test_request_shares_become_the_planner_mix() -> None:
    mix = request_mix_of(parsed().request_sizes)
    shares = sorted(round(bucket.share, 4) for bucket in mix.buckets)
    assert shares == [0.1, 0.3, 0.6]
    big = max(mix.buckets, key=lambda b: b.size.prompt_tokens)
    assert big.size.max_prompt_tokens == 2000 and big.size.output_tokens == 128


# -- replica pods -----------------------------------------------------------------------------


def test_a_replica_pod_asks_voltpack_for_tp_gpus_of_the_planned_type() -> None:
    service = {"metadata": {"name": "chat", "namespace": "ml", "uid": "u-1"}}
    group = PlannedGroup(
        gpu_type="A10", tensor_parallel=4, role="prefill", replicas=2, cost_per_hour=8.0,
        extrapolated=True,
    )  # fmt: skip
    pod = replica_pod(service, parsed(), group, 1)
    meta = pod["metadata"]
    assert meta["name"] == "chat-a10-tp4-prefill-1" and meta["namespace"] == "ml"
    assert meta["labels"]["voltpack.io/inference-service"] == "chat"
    assert meta["labels"]["voltpack.io/inference-role"] == "prefill"
    assert meta["labels"]["voltpack.io/gpu-type"] == "A10"
    assert meta["ownerReferences"][0] == {
        "apiVersion": "voltpack.io/v1alpha1", "kind": "InferenceService", "name": "chat",
        "uid": "u-1", "controller": True,
    }  # fmt: skip
    assert pod["spec"]["schedulerName"] == "voltpack" and "priority" not in pod["spec"]
    assert pod["metadata"]["annotations"]["voltpack.io/priority"] == "1000"
    assert pod_priority(pod) == 1000
    assert not is_throughput_bound(pod), "the power manager must see an inference pod"
    request = pod_from_k8s(pod)
    assert request.num_gpu == 4 and request.priority == 1000
    assert {"A10", "NVIDIA-A10"} <= set(request.gpu_models)
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["VOLTPACK_TENSOR_PARALLEL"] == "4" and env["VOLTPACK_ROLE"] == "prefill"
    assert env["LOG"] == "debug"
    low = replica_pod(service, parsed(priority="low"), group, 0)
    assert pod_priority(low) == -1000
    classed = replica_pod(service, parsed(priorityClassName="inference-high"), group, 0)
    assert classed["spec"]["priorityClassName"] == "inference-high"
    assert "priority" not in classed["spec"]


# -- reconcile rounds against a recording client ----------------------------------------------


class Recorder:
    """Records every client call; answers `{}` (as `call_json` reads it)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.api_client = SimpleNamespace(configuration=SimpleNamespace(host="http://recorder"))

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **_: Any) -> Any:
            self.calls.append((name, args))
            return SimpleNamespace(data=json.dumps({}).encode())

        return call

    def named(self, name: str) -> list[tuple[Any, ...]]:
        return [args for called, args in self.calls if called == name]


class Cluster:
    """One service and its pods, changed by what the controller writes."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.service: dict[str, Any] = {
            "apiVersion": "voltpack.io/v1alpha1",
            "kind": "InferenceService",
            "metadata": {
                "name": "chat", "namespace": "ml", "uid": "u-1", "generation": 1,
                "annotations": {},
            },
            "spec": spec,
        }  # fmt: skip
        self.pods: dict[str, dict[str, Any]] = {}
        self.nodes: list[dict[str, Any]] | None = None
        self.core = Recorder()
        self.custom = Recorder()
        self.now = 1_000_000.0

    def controller(self) -> InferenceServiceController:
        return InferenceServiceController(self.core, self.custom, clock=lambda: self.now)  # type: ignore[arg-type]

    def round(self, controller: InferenceServiceController) -> None:
        """One reconcile, then the cluster as the writes left it (pods bound at once)."""
        seen_core, seen_custom = len(self.core.calls), len(self.custom.calls)
        controller.reconcile_all(
            [copy.deepcopy(self.service)], list(self.pods.values()), {}, nodes=self.nodes
        )
        for name, args in self.core.calls[seen_core:]:
            if name == "create_namespaced_pod":
                pod = copy.deepcopy(args[1])
                pod["spec"]["nodeName"] = "node-1"
                self.pods[pod["metadata"]["name"]] = pod
            elif name == "delete_namespaced_pod":
                self.pods.pop(args[0], None)
        for name, args in self.custom.calls[seen_custom:]:
            if name == "patch_namespaced_custom_object_status":
                body = args[-1]["status"]
                status = {**(self.service.get("status") or {}), **body}
                self.service["status"] = {k: v for k, v in status.items() if v is not None}
        self.now += 1.0

    def events(self, reason: str) -> list[str]:
        return [
            args[1]["message"]
            for args in self.core.named("create_namespaced_event")
            if args[1]["reason"] == reason
        ]

    def observe(self, rate_per_s: float) -> None:
        self.service["metadata"]["annotations"][RATE] = str(rate_per_s)


def test_rounds_plan_once_keep_the_plan_inside_the_band_and_replan_once_outside() -> None:
    cluster = Cluster({**copy.deepcopy(SPEC), "scaling": {"mode": "reactive"}})
    controller = cluster.controller()
    for _ in range(3):
        cluster.round(controller)
    status = cluster.service["status"]
    assert status["phase"] == "Ready" and status["planningRatePerSecond"] == 2.0
    assert len(cluster.events("Planned")) == 1 and controller.replans == 1
    first_pods = set(cluster.pods)
    assert len(first_pods) == status["replicas"] > 0
    for wobble in (2.1, 1.85, 2.19, 1.81):
        cluster.observe(wobble)
        for _ in range(3):
            cluster.round(controller)
        assert set(cluster.pods) == first_pods, wobble
        assert cluster.service["status"]["latestRatePerSecond"] == wobble
    assert controller.replans == 1 and cluster.events("Replanned") == []
    planned = next(c for c in cluster.service["status"]["conditions"] if c["type"] == "Planned")
    assert "within the re-planning band: plan kept" in planned["message"]
    cluster.observe(6.0)
    for _ in range(5):
        cluster.round(controller)
    assert controller.replans == 2
    (event,) = cluster.events("Replanned")
    assert "moved from 2/s to 6/s" in event and "->" in event and "$" in event
    status = cluster.service["status"]
    assert status["planningRatePerSecond"] == 6.0 and status["phase"] == "Ready"
    assert len(cluster.pods) == status["replicas"] and set(cluster.pods) != first_pods
    # a new leader carries on from the status: no second plan for the same rate
    successor = cluster.controller()
    for _ in range(3):
        cluster.round(successor)
    assert successor.replans == 0 and len(cluster.events("Replanned")) == 1


def test_an_impossible_slo_keeps_the_replicas_and_warns_once() -> None:
    cluster = Cluster(copy.deepcopy(SPEC))
    controller = cluster.controller()
    cluster.round(controller)
    pods = set(cluster.pods)
    assert pods
    cluster.service["spec"]["slo"] = {"ttftMs": 1000, "tpotMs": 1}
    cluster.service["metadata"]["generation"] = 2
    for _ in range(4):
        cluster.round(controller)
    status = cluster.service["status"]
    assert status["phase"] == "Infeasible" and set(cluster.pods) == pods
    infeasible = next(c for c in status["conditions"] if c["type"] == "SLOInfeasible")
    assert infeasible["status"] == "True" and "TPOT" in infeasible["message"]
    assert f"keeping the {len(pods)} existing replicas" in infeasible["message"]
    assert len(cluster.events("SLOInfeasible")) == 1
    assert controller.replans == 1  # the infeasible plan is not retried every cycle


def test_a_spec_only_the_operator_can_check_is_invalid_naming_the_field() -> None:
    cluster = Cluster({**copy.deepcopy(SPEC), "model": "llama9-1t"})
    controller = cluster.controller()
    for _ in range(3):
        cluster.round(controller)
    status = cluster.service["status"]
    assert status["phase"] == "Invalid" and not cluster.pods
    assert status["conditions"][0]["reason"] == "InvalidSpec"
    assert status["conditions"][0]["message"].startswith("spec.model: unknown serving model")
    assert len(cluster.events("InvalidSpec")) == 1


def test_replicas_of_a_deleted_service_are_removed() -> None:
    cluster = Cluster(copy.deepcopy(SPEC))
    controller = cluster.controller()
    cluster.round(controller)
    assert cluster.pods
    controller.reconcile_all([], list(cluster.pods.values()), {}, synced=False)
    assert not cluster.core.named("delete_namespaced_pod"), "an unsynced cache deletes nothing"
    controller.reconcile_all([], list(cluster.pods.values()), {}, synced=True)
    deleted = {args[0] for args in cluster.core.named("delete_namespaced_pod")}
    assert deleted == set(cluster.pods)
    assert controller.figures == {} and controller.plans == {}


# -- plans the cluster can place ---------------------------------------------------------------


def nodes(*shapes: tuple[str | None, int]) -> list[dict[str, Any]]:
    return [
        node_to_k8s(Node.empty(f"n{i}", 64000, 262144, gpus, model))
        for i, (model, gpus) in enumerate(shapes)
    ]


def test_the_clusters_gpu_types_and_largest_nodes_bound_the_replicas() -> None:
    shapes = cluster_gpu_shapes(
        nodes(("NVIDIA-A10", 2), ("A10", 1), ("L4", 8), ("mystery-gpu", 8), (None, 0))
    )
    assert shapes == {"A10": 2, "L4": 8}
    book = ClusterProfiles(shapes)
    assert {p.tensor_parallel for p in book.feasible_profiles("llama3-8b", "A10")} == {1, 2}
    assert max(p.tensor_parallel for p in book.feasible_profiles("llama3-8b", "L4")) == 8
    assert book.feasible_profiles("llama3-8b", "H100-SXM") == []


def test_plans_use_only_the_allowed_types_the_cluster_has_and_say_when_there_is_none() -> None:
    cluster = Cluster(copy.deepcopy(SPEC))
    cluster.nodes = nodes(("A10", 2), ("A10", 2), ("L4", 1))
    controller = cluster.controller()
    cluster.round(controller)
    cluster.round(controller)
    status = cluster.service["status"]
    assert status["phase"] == "Ready"
    assert all(g["tensorParallel"] <= {"A10": 2, "L4": 1}[g["gpuType"]] for g in status["plan"])
    cluster.nodes = nodes(("T4", 4))  # the allowed types are gone
    cluster.round(controller)
    message = next(
        c for c in cluster.service["status"]["conditions"] if c["type"] == "SLOInfeasible"
    )["message"]
    assert message.startswith(
        "none of the allowed GPU types (A10, L4) is on a node of the cluster (it has T4)"
    )
    assert "keeping the" in message and cluster.pods
    cluster.nodes = nodes(("A10", 4), ("L4", 8))
    cluster.round(controller)
    (event,) = cluster.events("Replanned")
    assert event.startswith("the cluster's allowed GPU types or their largest nodes changed")


def test_burst_mode_sizes_the_plan_on_the_requests_of_its_window() -> None:
    scaling = {"mode": "burst", "sampleSeconds": 1, "burstWindowMinutes": 1}
    cluster = Cluster({**copy.deepcopy(SPEC), "scaling": scaling})
    controller = cluster.controller()
    for second in range(40):
        cluster.observe(12.0 if second in (20, 21) else 2.0)
        cluster.round(controller)
    status = cluster.service["status"]
    assert "the burst window's requests" in status["predictedSloAttainmentBasis"]
    assert status["predictedSloAttainment"] >= 0.99
    # a forecast-driven service is checked against Poisson arrivals, as before
    forecast = Cluster({**copy.deepcopy(SPEC), "scaling": {"mode": "reactive"}})
    forecast.round(forecast.controller())
    assert "Poisson" in forecast.service["status"]["predictedSloAttainmentBasis"]


def test_the_tpot_statistic_is_part_of_the_spec_and_of_the_plan() -> None:
    per_request = parsed()
    mean = parsed(slo={"ttftMs": 3000, "tpotMs": 100, "tpotStatistic": "mean"})
    assert per_request.slo.tpot_statistic == "p99"
    assert plan_request(mean, 2.0).slo.tpot_is_mean
    assert not plan_request(per_request, 2.0).slo.tpot_is_mean
    assert spec_hash(mean) != spec_hash(per_request)
    # the default keeps the hash of specs written before the field existed
    assert spec_hash(per_request) == spec_hash(parsed(slo={"ttftMs": 3000, "tpotMs": 100}))
    cluster = Cluster(
        {**copy.deepcopy(SPEC), "slo": {"ttftMs": 3000, "tpotMs": 100, "tpotStatistic": "p90"}}
    )
    cluster.round(cluster.controller())
    status = cluster.service["status"]
    assert status["phase"] == "Invalid"
    invalid = " ".join(c["message"] for c in status["conditions"])
    assert "tpotStatistic" in invalid
