"""InferenceServices in the operator, over the emulator, through the official client and kubectl:
planned replicas of the chosen GPU types with the reason, re-planning past the hysteresis band
exactly once, an impossible SLO named, bad specs refused naming the field, the admin API.

The cluster: four 4-GPU A10 nodes (labelled as GPU Feature Discovery spells the product,
`NVIDIA-A10`), two 8-GPU L4 nodes and a CPU node; the services serve llama3-8b.
"""

from __future__ import annotations

import copy
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import Kubectl, operator_thread, serving, wait_for
from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens
from voltpack.emulator import EmulatorConfig, RunningEmulator, running_emulator
from voltpack.model import Node
from voltpack.model.gpu_sku import default_catalog
from voltpack.model.resources import InferenceServiceSpec
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.operator.inference.admin import KubeInferenceSource
from voltpack.operator.inference.plans import ClusterProfiles, plan_request, plannable_types
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.inference.attainment import predicted_attainment
from voltpack.policies.inference.mix_planner import plan_service
from voltpack.policies.inference.plan import ServingPlan
from voltpack.policies.schema import policy_for_strategy

GROUP, VERSION, PLURAL = "voltpack.io", "v1alpha1", "inferenceservices"
LEASE_NAMESPACE = "voltpack-system"
RATE = "voltpack.io/observed-rate-per-second"
NODE_MODELS = {
    **{f"a10-{i}": ("NVIDIA-A10", 4) for i in range(4)},
    **{f"l4-{i}": ("L4", 8) for i in range(2)},
}
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
    "container": {"image": "vllm/vllm-openai:v0.6.3", "cpuMilli": 2000, "memoryMib": 8192},
}


@pytest.fixture
def emulator() -> Iterator[RunningEmulator]:
    nodes = [
        Node.empty(name, cpu_milli=64000, memory_mib=262144, gpu_count=gpus, gpu_model=model)
        for name, (model, gpus) in NODE_MODELS.items()
    ]
    nodes.append(
        Node.empty("cpu-0", cpu_milli=16000, memory_mib=65536, gpu_count=0, gpu_model=None)
    )
    with running_emulator(nodes=nodes, config=EmulatorConfig(time_factor=0.001)) as running:
        yield running


@pytest.fixture(autouse=True)
def crds(core: client.CoreV1Api, extensions: client.ApiextensionsV1Api) -> None:
    core.create_namespace({"metadata": {"name": LEASE_NAMESPACE}})
    install_crds(extensions)


@pytest.fixture
def operator(emulator: RunningEmulator) -> Iterator[Operator]:
    config = OperatorConfig(
        policy=policy_for_strategy("best-fit"),
        identity="op-inference",
        namespace=LEASE_NAMESPACE,
        cycle_interval_s=0.05,
        lease_duration_s=5,
        power=False,
        policy_configmap=None,
        metrics_port=0,
    )
    with operator_thread(emulator.url, config) as running:
        yield running


def manifest(name: str, **changes: Any) -> dict[str, Any]:
    spec = copy.deepcopy(SPEC)
    spec.update(changes)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def create(custom: client.CustomObjectsApi, name: str, **changes: Any) -> None:
    custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, manifest(name, **changes)
    )


def get(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    found: dict[str, Any] = custom.get_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, name
    )
    return found


def condition(service: dict[str, Any], kind: str) -> dict[str, Any]:
    for found in (service.get("status") or {}).get("conditions") or []:
        if found["type"] == kind:
            return dict(found)
    return {}


def wait_phase(custom: client.CustomObjectsApi, name: str, phase: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        service = get(custom, name)
        return service if (service.get("status") or {}).get("phase") == phase else None

    found: dict[str, Any] = wait_for(reached, timeout_s=60, what=f"{name} to be {phase}")
    return found


def expected_plan(rate_per_s: float, **changes: Any) -> ServingPlan:
    """What the planner itself makes of the spec at this rate, on this cluster's GPU types
    (replicas of at most 4 A10s or 8 L4s: one node)."""
    spec = InferenceServiceSpec.model_validate(manifest("x", **changes)["spec"])
    shapes = {"A10": 4, "L4": 8}
    request = plan_request(spec, rate_per_s, plannable_types(spec, shapes))
    return plan_service(request, ClusterProfiles(shapes))


def group_tuples(groups: list[dict[str, Any]]) -> list[tuple[str, int, str, int]]:
    return sorted((g["gpuType"], g["tensorParallel"], g["role"], g["replicas"]) for g in groups)


def plan_tuples(plan: ServingPlan) -> list[tuple[str, int, str, int]]:
    return sorted(
        (g.profile.gpu_type, g.profile.tensor_parallel, g.role, g.replicas) for g in plan.groups
    )


def replicas(core: client.CoreV1Api, service: str) -> list[Any]:
    selector = f"voltpack.io/inference-service={service}"
    pods: list[Any] = core.list_namespaced_pod("default", label_selector=selector).items
    return [p for p in pods if not p.metadata.deletion_timestamp]


def events(core: client.CoreV1Api, service: str, reason: str) -> list[Any]:
    return [
        e
        for e in core.list_namespaced_event("default").items
        if e.involved_object.kind == "InferenceService"
        and e.involved_object.name == service
        and e.reason == reason
    ]


def metric(operator: Operator, name: str) -> dict[str, float]:
    assert operator.metrics is not None
    url = f"http://127.0.0.1:{operator.metrics.port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line.rsplit(" ", 1)
            found[labels[len(name) :]] = float(value)
    return found


def settle(operator: Operator, cycles: int = 40) -> None:
    """Let the operator run `cycles` more cycles (what it would do, it has done by then)."""
    target = operator.stats.cycles + cycles
    wait_for(lambda: operator.stats.cycles >= target, timeout_s=60, what=f"{cycles} cycles")


def test_a_service_gets_replicas_of_the_planned_gpu_types_with_the_reason(
    operator: Operator, core: client.CoreV1Api, custom: client.CustomObjectsApi, kubectl: Kubectl
) -> None:
    expected = expected_plan(2.0)
    create(custom, "chat")
    service = wait_phase(custom, "chat", "Ready")
    status = service["status"]
    assert group_tuples(status["plan"]) == plan_tuples(expected)
    assert status["predictedCostPerHour"] == pytest.approx(expected.cost_per_hour)
    predicted = predicted_attainment(expected)
    assert status["predictedSloAttainment"] == pytest.approx(predicted.ratio, abs=1e-4)
    assert status["predictedSloAttainmentBasis"] == predicted.basis
    assert status["planningRatePerSecond"] == 2.0
    assert status["rateSource"].startswith("spec.ratePerSecond")
    assert status["replicas"] == status["readyReplicas"] == sum(g.replicas for g in expected.groups)
    assert status["split"] is expected.split and status["lastPlanTime"]
    assert all(g["extrapolated"] and g["buckets"] for g in status["plan"])
    planned = condition(service, "Planned")
    assert planned["status"] == "True" and planned["reason"] == "Planned"
    assert expected.summary() in planned["message"]
    assert "within TTFT 3000 ms and TPOT 100 ms" in planned["message"]
    assert f"predicted SLO attainment {predicted.ratio:.1%}" in planned["message"]
    assert condition(service, "SLOInfeasible")["status"] == "False"
    assert condition(service, "Scaled")["reason"] == "AllReplicasBound"

    pods = replicas(core, "chat")
    assert len(pods) == status["replicas"]
    node_models = {name: model for name, (model, _) in NODE_MODELS.items()}
    for pod in pods:
        labels = pod.metadata.labels
        gpu_type = labels["voltpack.io/gpu-type"]
        assert default_catalog().get(node_models[pod.spec.node_name]).name == gpu_type
        tp = int(pod.spec.containers[0].resources.limits["nvidia.com/gpu"])
        key = labels["voltpack.io/inference-group"]
        assert key.startswith(f"{gpu_type.lower()}-tp{tp}-{labels['voltpack.io/inference-role']}")
        # the group's context class and batch cap reach the server as flags it can use
        env = {variable.name: variable.value for variable in pod.spec.containers[0].env}
        assert int(env["VOLTPACK_MAX_BATCH"]) >= 1
        assert ("-ctx" in key) == ("VOLTPACK_MAX_CONTEXT_TOKENS" in env)
        if "-ctx" in key:
            assert f"-ctx{env['VOLTPACK_MAX_CONTEXT_TOKENS']}" in key
        assert len(pod.metadata.annotations["voltpack.io/gpu-indices"].split(",")) == tp
        assert pod.spec.scheduler_name == "voltpack" and not pod.spec.priority
        assert pod.metadata.annotations["voltpack.io/priority"] == "1000"
        assert pod.metadata.annotations["voltpack.io/workload"] == "inference"
        assert pod.metadata.owner_references[0].kind == "InferenceService"
        env = {e.name: e.value for e in pod.spec.containers[0].env}
        assert env["VOLTPACK_TENSOR_PARALLEL"] == str(tp) and env["VOLTPACK_MODEL"] == "llama3-8b"
    (event,) = events(core, "chat", "Planned")
    assert event.type == "Normal" and expected.summary() in event.message

    costs = wait_for(
        lambda: metric(operator, "voltpack_inference_service_predicted_cost_usd_per_hour"),
        timeout_s=20,
        what="the cost gauge",
    )
    assert costs == {'{service="default/chat"}': pytest.approx(expected.cost_per_hour)}
    assert metric(operator, "voltpack_inference_service_predicted_slo_attainment_ratio") == {
        '{service="default/chat"}': pytest.approx(predicted.ratio, abs=1e-4)
    }
    planned_replicas = metric(operator, "voltpack_inference_service_planned_replicas")
    assert sum(planned_replicas.values()) == status["replicas"]
    table = kubectl("get", "inferenceservices.voltpack.io", "chat").stdout
    assert "Ready" in table and "llama3-8b" in table and "COST $/H" in table
    assert "PRED. SLO" in table


def test_a_rate_change_past_ten_percent_replans_exactly_once(
    operator: Operator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    create(custom, "chat", scaling={"mode": "reactive"})
    wait_phase(custom, "chat", "Ready")
    first = {p.metadata.name for p in replicas(core, "chat")}

    # inside the band: the spec's expected rate, then a measured rate, moves by under 10%
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "chat", {"spec": {"ratePerSecond": 2.1}}
    )
    wait_for(
        lambda: get(custom, "chat")["status"].get("latestRatePerSecond") == 2.1,
        timeout_s=30,
        what="the operator to see 2.1/s",
    )
    for measured in ("1.85", "2.19"):
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, "chat",
            {"metadata": {"annotations": {RATE: measured}}},
        )  # fmt: skip
        wait_for(
            lambda m=measured: get(custom, "chat")["status"].get("latestRatePerSecond") == float(m),
            timeout_s=30,
            what=f"the operator to see {measured}/s",
        )
        settle(operator)
    status = get(custom, "chat")["status"]
    assert status["planningRatePerSecond"] == 2.0
    assert "plan kept" in condition(get(custom, "chat"), "Planned")["message"]
    assert {p.metadata.name for p in replicas(core, "chat")} == first
    assert events(core, "chat", "Replanned") == []

    # past the band: one new plan, for the new rate, and no flapping after it
    expected = expected_plan(4.0)
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "chat", {"metadata": {"annotations": {RATE: "4"}}}
    )
    wait_for(
        lambda: get(custom, "chat")["status"].get("planningRatePerSecond") == 4.0,
        timeout_s=30,
        what="a plan for 4/s",
    )
    service = wait_phase(custom, "chat", "Ready")
    settle(operator)
    service = get(custom, "chat")
    assert group_tuples(service["status"]["plan"]) == plan_tuples(expected)
    assert service["status"]["rateSource"] == f"measured ({RATE})"
    (event,) = events(core, "chat", "Replanned")
    assert "moved from 2/s to 4/s" in event.message
    assert f"(${expected.cost_per_hour:.2f}/h)" in event.message
    assert len(events(core, "chat", "Planned")) == 1
    assert condition(service, "Planned")["reason"] == "Replanned"
    pods = replicas(core, "chat")
    assert len(pods) == service["status"]["replicas"]
    groups = {
        (p.metadata.labels["voltpack.io/gpu-type"], p.metadata.labels["voltpack.io/inference-role"])
        for p in pods
    }
    assert groups == {(g.profile.gpu_type, g.role) for g in expected.groups}


def test_an_impossible_slo_gets_a_condition_naming_the_bound_and_keeps_existing_replicas(
    operator: Operator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    create(custom, "fast", slo={"ttftMs": 1000, "tpotMs": 1})
    service = wait_phase(custom, "fast", "Infeasible")
    infeasible = condition(service, "SLOInfeasible")
    assert infeasible["status"] == "True" and infeasible["reason"] == "SLOInfeasible"
    assert "TPOT" in infeasible["message"] and "no replicas created" in infeasible["message"]
    assert "over the TPOT SLO of 1.0 ms" in infeasible["message"]
    assert condition(service, "Planned")["status"] == "False"
    assert replicas(core, "fast") == []
    (event,) = wait_for(lambda: events(core, "fast", "SLOInfeasible"), what="the warning")
    assert event.type == "Warning" and "TPOT" in event.message

    create(custom, "steady")
    ready = wait_phase(custom, "steady", "Ready")
    pods = {p.metadata.name for p in replicas(core, "steady")}
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "steady",
        {"spec": {"slo": {"ttftMs": 1000, "tpotMs": 1}}},
    )  # fmt: skip
    service = wait_phase(custom, "steady", "Infeasible")
    message = condition(service, "SLOInfeasible")["message"]
    assert "TPOT" in message and f"keeping the {len(pods)} existing replicas" in message
    settle(operator)
    assert {p.metadata.name for p in replicas(core, "steady")} == pods
    kept = get(custom, "steady")["status"]
    assert kept["plan"] == ready["status"]["plan"] or group_tuples(kept["plan"]) == group_tuples(
        ready["status"]["plan"]
    )
    assert kept["predictedCostPerHour"] == ready["status"]["predictedCostPerHour"]
    assert len(events(core, "steady", "SLOInfeasible")) == 1


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"slo": {"ttftMs": 1000, "tpotMs": -5}}, "spec.slo.tpotMs"),
        ({"split": "sometimes"}, "spec.split"),
        ({"requestSizes": []}, "spec.requestSizes"),
        ({"prices": {"A10": -1.0, "L4": 0.8}}, "spec.prices.A10"),
        ({"scaling": {"quantile": 1.5}}, "spec.scaling.quantile"),
    ],
)
def test_the_api_server_refuses_a_bad_spec_naming_the_field(
    custom: client.CustomObjectsApi, changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ApiException) as refused:
        create(custom, "bad", **changes)
    assert refused.value.status == 422
    assert field in str(refused.value.body), refused.value.body


def test_kubectl_refuses_bad_specs_naming_the_field(kubectl: Kubectl, tmp_path: Path) -> None:
    wrong_type = tmp_path / "wrong-type.yaml"
    wrong_type.write_text(
        textwrap.dedent(
            """\
            apiVersion: voltpack.io/v1alpha1
            kind: InferenceService
            metadata: {name: typo, namespace: default}
            spec:
              model: llama3-8b
              slo: {ttftMs: 1000, tpotMs: 100}
              ratePerSecond: fast
              requestSizes: [{promptTokens: 512, outputTokens: 256, share: 1}]
              container: {image: server:1}
            """
        )
    )
    result = kubectl("apply", "-f", str(wrong_type), check=False)
    assert result.returncode != 0 and "spec.ratePerSecond" in result.stderr, result.stderr
    unknown = tmp_path / "unknown-field.yaml"
    unknown.write_text(
        wrong_type.read_text().replace("ratePerSecond: fast", "ratePerSecond: 2\n  replicas: 3")
    )
    result = kubectl("apply", "-f", str(unknown), check=False)
    assert result.returncode != 0 and "spec.replicas" in result.stderr, result.stderr


def test_a_spec_the_schema_cannot_judge_is_marked_invalid_naming_the_field(
    operator: Operator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    half = [{"promptTokens": 512, "outputTokens": 256, "share": 0.5}]
    create(custom, "halves", requestSizes=half)
    create(custom, "unknown", model="llama9-1t")
    for name, text in (
        ("halves", "spec.requestSizes: the shares sum to 0.5"),
        ("unknown", "spec.model: unknown serving model 'llama9-1t'"),
    ):
        service = wait_phase(custom, name, "Invalid")
        planned = condition(service, "Planned")
        assert planned["reason"] == "InvalidSpec" and planned["message"].startswith(text)
        (event,) = wait_for(lambda n=name: events(core, n, "InvalidSpec"), what="the warning")
        assert event.message.startswith(text)
        assert replicas(core, name) == []


def test_the_admin_api_serves_the_services_and_their_plans(
    operator: Operator,
    emulator: RunningEmulator,
    custom: client.CustomObjectsApi,
    tmp_path: Path,
) -> None:
    create(custom, "chat")
    create(custom, "fast", slo={"ttftMs": 1000, "tpotMs": 1})
    ready = wait_phase(custom, "chat", "Ready")
    wait_phase(custom, "fast", "Infeasible")
    token_file = tmp_path / "tokens.csv"
    token_file.write_text("tok-viewer,viewer-user,viewer\n")
    tokens = StaticTokens.from_file(token_file)
    kube = client.ApiClient(client.Configuration(host=emulator.url))
    source = KubeAdminSource(kube, policy_for_strategy("best-fit"), "")
    app = create_app(
        ApiDependencies(
            cluster=source,
            policies=source,
            authenticator=tokens,
            authorizer=tokens,
            inference=KubeInferenceSource(kube),
        )
    )
    headers = {"Authorization": "Bearer tok-viewer"}
    with serving(app) as url:
        listed = httpx.get(f"{url}/api/v1/inferenceservices", headers=headers, timeout=30)
        assert listed.status_code == 200, listed.text
        views = {v["name"]: v for v in listed.json()}
        assert set(views) == {"chat", "fast"}
        assert views["chat"]["phase"] == "Ready" and views["fast"]["phase"] == "Infeasible"
        status = ready["status"]
        assert views["chat"]["predicted_cost_per_hour"] == status["predictedCostPerHour"]
        assert views["chat"]["replicas"] == status["replicas"]
        assert "TPOT" in views["fast"]["conditions"]["SLOInfeasible"]

        answer = httpx.get(f"{url}/api/v1/inferenceservices/default/chat/plan", headers=headers)
        assert answer.status_code == 200, answer.text
        plan = answer.json()
        assert plan["planning_rate_per_s"] == 2.0 and plan["rate_source"].startswith("spec.")
        assert sorted(
            (g["gpu_type"], g["tensor_parallel"], g["role"], g["replicas"]) for g in plan["groups"]
        ) == group_tuples(status["plan"])
        assert sum(plan["gpus_by_type"].values()) == sum(
            g["replicas"] * g["tensorParallel"] for g in status["plan"]
        )
        assert plan["reason"] == condition(ready, "Planned")["message"]
        assert plan["predicted_slo_attainment"] == status["predictedSloAttainment"]
        assert plan["predicted_slo_attainment_basis"] == status["predictedSloAttainmentBasis"]
        assert views["chat"]["predicted_slo_attainment"] == status["predictedSloAttainment"]
        assert plan["infeasible"] is None and plan["groups"][0]["buckets"]

        infeasible = httpx.get(f"{url}/api/v1/inferenceservices/default/fast/plan", headers=headers)
        assert infeasible.json()["groups"] == [] and "TPOT" in infeasible.json()["infeasible"]
        missing = httpx.get(f"{url}/api/v1/inferenceservices/default/nope/plan", headers=headers)
        assert missing.status_code == 404 and "default/nope" in missing.json()["detail"]
        anonymous = httpx.get(f"{url}/api/v1/inferenceservices")
        assert anonymous.status_code == 401
        page = httpx.get(f"{url}/api/v1/inferenceservices", headers=headers, params={"limit": 1})
        assert [v["name"] for v in page.json()] == ["chat"]
        assert page.headers["X-Next-After"] == "default/chat"
    kube.close()


def test_replicas_go_when_their_service_is_deleted(
    operator: Operator, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    create(custom, "chat")
    wait_phase(custom, "chat", "Ready")
    assert replicas(core, "chat")
    custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "chat")
    wait_for(lambda: not replicas(core, "chat"), timeout_s=30, what="the replicas to go")
    wait_for(
        lambda: not metric(operator, "voltpack_inference_service_predicted_cost_usd_per_hour"),
        timeout_s=20,
        what="the gauge to go",
    )
