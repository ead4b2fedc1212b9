"""The admin API over real HTTP (uvicorn), with the emulator behind it.

Tokens come from a static token file (viewer, operator, admin); the cluster is read and
changed through the official client by the operator's adapter, exactly as `voltpack api` runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from tests.dry_runs import finished_dry_run
from tests.integration.conftest import operator_thread, pod_manifest, serving, wait_for
from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens
from voltpack.emulator import RunningEmulator
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.operator.admin.views import latest_reasons
from voltpack.operator.kube.binder import record_event
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.schema import example_policy_path, load_policy

TOKENS = {"viewer": "tok-viewer-1", "operator": "tok-operator-1", "admin": "tok-admin-1"}
NAMESPACE = "voltpack-system"
SMALL_TRACE = "physical_cluster/small_test.trace"


@dataclass
class ApiServer:
    url: str
    emulator: RunningEmulator
    source: KubeAdminSource

    def get(self, path: str, role: str | None = "viewer", **kwargs: Any) -> httpx.Response:
        return httpx.get(self.url + path, headers=_auth(role), timeout=30, **kwargs)

    def send(self, method: str, path: str, role: str | None, body: Any = None) -> httpx.Response:
        return httpx.request(method, self.url + path, headers=_auth(role), json=body, timeout=30)


def _auth(role: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[role]}"} if role else {}


@pytest.fixture
def kube(emulator: RunningEmulator) -> Iterator[client.ApiClient]:
    api = client.ApiClient(client.Configuration(host=emulator.url))
    install_crds(client.ApiextensionsV1Api(api))
    client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
    yield api
    api.close()


@pytest.fixture
def server(
    emulator: RunningEmulator, kube: client.ApiClient, tmp_path: Path
) -> Iterator[ApiServer]:
    token_file = tmp_path / "tokens.csv"
    token_file.write_text("".join(f"{t},{role}-user,{role}\n" for role, t in TOKENS.items()))
    policy_path = example_policy_path("fgd")
    policy = load_policy(policy_path)
    source = KubeAdminSource(
        client.ApiClient(client.Configuration(host=emulator.url)),
        policy,
        policy_path.read_text(),
        namespace=NAMESPACE,
    )
    tokens = StaticTokens.from_file(token_file)
    app = create_app(
        ApiDependencies(cluster=source, policies=source, authenticator=tokens, authorizer=tokens)
    )
    with serving(app) as url:
        yield ApiServer(url, emulator, source)
    source.close()


@pytest.fixture
def operator(kube: client.ApiClient, emulator: RunningEmulator) -> Iterator[Operator]:
    config = OperatorConfig(
        policy=load_policy(example_policy_path("fgd")),
        identity="api-test",
        namespace=NAMESPACE,
        cycle_interval_s=0.05,
        lease_duration_s=2,
        power=False,
        policy_refresh_s=0.1,
    )
    with operator_thread(emulator.url, config) as running:
        yield running


def operations(server: ApiServer) -> list[tuple[str, str]]:
    schema = httpx.get(server.url + "/openapi.json", timeout=30).json()
    found = []
    for path, methods in schema["paths"].items():
        concrete = path.replace("{name}", "x").replace("{namespace}", "default")
        concrete = concrete.replace("{run_id}", "nope")
        found += [(method.upper(), concrete) for method in methods]
    return found


def test_every_route_refuses_a_missing_or_unknown_token(server: ApiServer) -> None:
    routes = operations(server)
    assert len(routes) >= 15
    for method, path in routes:
        for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Basic x"}):
            answer = httpx.request(method, server.url + path, headers=headers, json={}, timeout=30)
            assert answer.status_code == 401, (method, path, headers, answer.text)
            assert answer.headers["content-type"].startswith("application/problem+json")
            assert answer.headers["www-authenticate"].startswith("Bearer")
            assert answer.json()["status"] == 401


def test_roles_allow_exactly_their_verbs(server: ApiServer) -> None:
    policy_text = example_policy_path("best-fit").read_text()
    mutations = {
        ("POST", "/api/v1/policy/validate", "dryrun"): {"text": policy_text},
        ("POST", "/api/v1/policy/dry-runs", "dryrun"): {"text": policy_text},
        ("POST", "/api/v1/simulations", "simulate"): {"trace": SMALL_TRACE, "cluster": "2:2:2"},
        ("PUT", "/api/v1/policy", "apply"): {"text": policy_text},
        ("POST", "/api/v1/power/domains/row-1/cap", "cap"): {"cap_w": 1000},
    }
    allowed = {
        "viewer": set(),
        "operator": {"dryrun", "simulate"},
        "admin": {"dryrun", "simulate", "apply", "cap"},
    }
    for role, verbs in allowed.items():
        for (method, path, verb), body in mutations.items():
            answer = server.send(method, path, role, body)
            if verb in verbs:
                assert answer.status_code not in (401, 403), (role, path, answer.text)
            else:
                assert answer.status_code == 403, (role, path, answer.text)
                assert verb in answer.json()["detail"]
        assert server.get("/api/v1/cluster", role).status_code == 200


def test_cluster_nodes_and_gpus_match_the_emulator(server: ApiServer) -> None:
    summary = server.get("/api/v1/cluster").json()
    assert summary["nodes"] == 4 and summary["nodes_ready"] == 4
    assert summary["gpus_by_model"] == {"A100": 16.0, "V100M16": 4.0}
    assert summary["gpus_allocated_by_model"] == {"A100": 0.0, "V100M16": 0.0}
    nodes = {n["name"]: n for n in server.get("/api/v1/nodes").json()}
    assert nodes["gpu-a100-0"]["gpus"] == 8 and len(nodes["gpu-a100-0"]["gpu_details"]) == 8
    assert nodes["cpu-0"]["gpus"] == 0
    missing = server.get("/api/v1/nodes/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]


def test_jobs_show_placement_and_why_a_gang_waits(
    server: ApiServer, operator: Operator, kube: client.ApiClient
) -> None:
    core = client.CoreV1Api(kube)
    gang = {"voltpack.io/pod-group": "train", "voltpack.io/min-members": "2"}
    for i in range(2):
        core.create_namespaced_pod("default", pod_manifest(f"train-{i}", gpus=8, annotations=gang))
    big = {"voltpack.io/pod-group": "huge", "voltpack.io/min-members": "3"}
    for i in range(3):
        core.create_namespaced_pod("default", pod_manifest(f"huge-{i}", gpus=8, annotations=big))

    def jobs() -> dict[str, Any]:
        return {j["name"]: j for j in server.get("/api/v1/jobs").json()}

    wait_for(lambda: jobs().get("train", {}).get("pending_reason") is None and
             all(w["node"] for w in jobs()["train"]["workers"]), what="train placed")  # fmt: skip
    train = jobs()["train"]
    assert {w["node"] for w in train["workers"]} == {"gpu-a100-0", "gpu-a100-1"}
    assert all(len(w["gpus"]) == 8 for w in train["workers"])
    waiting = wait_for(
        lambda: (r := jobs()["huge"]["pending_reason"]) and "waiting" not in r and r,
        what="the reason huge waits",
    )
    assert "huge" in waiting
    pending = server.get("/api/v1/jobs", params={"pending": "true"}).json()
    assert [j["name"] for j in pending] == ["huge"]
    summary = server.get("/api/v1/cluster").json()
    assert summary["gpus_allocated_by_model"]["A100"] == 16.0
    assert summary["jobs_pending"] == 1


def test_dry_run_plans_without_binding_anything(server: ApiServer, kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod("default", pod_manifest("solo", gpus=4))
    view = finished_dry_run(
        server.url, _auth("operator"), example_policy_path("best-fit").read_text()
    )
    assert view["status"] == "done" and view["user"] == "operator-user", view
    assert view["started_at_s"] <= view["finished_at_s"]
    result = view["result"]
    assert result["binds"] == 1 and result["policy"] == "best-fit"
    assert result["changes"][0]["action"] == "bind"
    assert result["changes"][0]["subject"] == "default/solo"
    time.sleep(0.2)
    assert core.read_namespaced_pod("solo", "default").spec.node_name is None


def test_a_bad_policy_is_refused_naming_the_field_and_nothing_changes(server: ApiServer) -> None:
    bad = "apiVersion: voltpack.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: x}\n"
    bad += "spec: {scoring: {strategy: nope}}\n"
    validation = server.send("POST", "/api/v1/policy/validate", "operator", {"text": bad}).json()
    assert validation["valid"] is False and "nope" in validation["errors"][0]
    applied = server.send("PUT", "/api/v1/policy", "admin", {"text": bad})
    assert applied.status_code == 422
    assert applied.headers["content-type"].startswith("application/problem+json")
    assert "strategy" in applied.json()["detail"]
    assert server.get("/api/v1/policy").json()["name"] == "fgd"
    broken = server.send("PUT", "/api/v1/policy", "admin", {"text": "a: [unclosed"})
    assert broken.status_code == 422
    empty = server.send("PUT", "/api/v1/policy", "admin", {"txt": "x"})
    assert empty.status_code == 422 and empty.json()["errors"]


def test_an_applied_policy_is_active_and_in_the_configmap(
    server: ApiServer, kube: client.ApiClient
) -> None:
    text = example_policy_path("best-fit").read_text()
    assert server.send("PUT", "/api/v1/policy", "admin", {"text": text}).status_code == 200
    assert server.get("/api/v1/policy").json()["name"] == "best-fit"
    stored = client.CoreV1Api(kube).read_namespaced_config_map("voltpack-policy", NAMESPACE)
    assert stored.data["policy.yaml"] == text


def test_a_manual_cap_is_written_and_shown(server: ApiServer, kube: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube)
    budget = {
        "apiVersion": "voltpack.io/v1alpha1",
        "kind": "PowerBudget",
        "metadata": {"name": "row-1"},
        "spec": {"nodeSelector": {"matchLabels": {}}, "budgetW": 20000},
    }
    custom.create_cluster_custom_object("voltpack.io", "v1alpha1", "powerbudgets", budget)
    capped = server.send("POST", "/api/v1/power/domains/row-1/cap", "admin", {"cap_w": 12000})
    assert capped.status_code == 200, capped.text
    assert capped.json()["manual_cap_w"] == 12000
    domains = server.get("/api/v1/power/domains").json()
    assert domains[0]["name"] == "row-1" and len(domains[0]["nodes"]) == 4
    uncapped = server.send("POST", "/api/v1/power/domains/row-1/cap", "admin", {"cap_w": None})
    assert uncapped.json()["manual_cap_w"] is None
    unknown = server.send("POST", "/api/v1/power/domains/nope/cap", "admin", {"cap_w": 1})
    assert unknown.status_code == 404
    negative = server.send("POST", "/api/v1/power/domains/row-1/cap", "admin", {"cap_w": -5})
    assert negative.status_code == 422


def test_a_simulation_runs_to_a_report(server: ApiServer) -> None:
    submitted = server.send(
        "POST", "/api/v1/simulations", "operator",
        {"trace": SMALL_TRACE, "cluster": "2:2:2", "policies": ["fifo", "max_min_fairness_perf"],
         "seeds": [0, 1]},
    )  # fmt: skip
    assert submitted.status_code == 202, submitted.text
    run_id = submitted.json()["id"]
    done = wait_for(
        lambda: (r := server.get(f"/api/v1/simulations/{run_id}").json())["status"] == "done" and r,
        timeout_s=60,
        what="the simulation",
    )
    assert done["progress"] == 1.0
    report = server.get(f"/api/v1/simulations/{run_id}/report").json()
    assert set(report["results"]) == {"fifo", "max_min_fairness_perf"}
    assert report["results"]["fifo"]["jobs"] == 20
    assert set(report["per_seed"]["fifo"]) == {"0", "1"}


@pytest.mark.parametrize(
    ("body", "word"),
    [
        ({"trace": "../../etc/passwd.trace"}, "trace"),
        ({"trace": "nope/missing.trace"}, "not a file"),
        ({"policies": ["nope"]}, "unknown policies"),
        ({"cluster": "0:0:0"}, "cluster"),
        ({"round_s": 0}, "round_s"),
        ({"seeds": [1, 1]}, "distinct"),
    ],
)
def test_a_bad_simulation_is_refused_clearly(
    server: ApiServer, body: dict[str, Any], word: str
) -> None:
    answer = server.send("POST", "/api/v1/simulations", "operator", body)
    assert answer.status_code == 422, answer.text
    assert word in answer.text


def test_history_without_a_database_answers_503(server: ApiServer) -> None:
    for path in ("/api/v1/decisions", "/api/v1/audit"):
        answer = server.get(path)
        assert answer.status_code == 503
        assert "database" in answer.json()["detail"]


def test_an_unreachable_cluster_answers_503(server: ApiServer) -> None:
    server.emulator.stop()
    answer = server.get("/api/v1/cluster")
    assert answer.status_code == 503
    assert answer.json()["type"].endswith("cluster-unavailable")


def test_the_operator_runs_a_policy_applied_through_the_api(
    server: ApiServer, operator: Operator, kube: client.ApiClient
) -> None:
    assert operator.policy.metadata.name == "fgd"
    bad = "apiVersion: voltpack.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: y}\n"
    text = example_policy_path("best-fit").read_text()
    assert server.send("PUT", "/api/v1/policy", "admin", {"text": text}).status_code == 200
    wait_for(lambda: operator.policy.metadata.name == "best-fit", what="the operator to switch")
    assert server.send("PUT", "/api/v1/policy", "admin", {"text": bad}).status_code == 422
    # written around the API: the operator refuses it and keeps the running policy
    client.CoreV1Api(kube).patch_namespaced_config_map(
        "voltpack-policy", NAMESPACE, {"data": {"policy.yaml": bad}}
    )
    time.sleep(0.5)
    assert operator.policy.metadata.name == "best-fit"


def test_a_dry_run_shows_the_gpus_a_power_policy_would_cap_and_writes_nothing(
    server: ApiServer, kube: client.ApiClient
) -> None:
    custom = client.CustomObjectsApi(kube)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    gpus = [
        {"index": i, "uuid": f"GPU-{i}", "model": "A100", "memoryMib": 81920,
         "health": "Healthy", "powerLimitW": 400, "powerDrawW": 390}
        for i in range(8)
    ]  # fmt: skip
    gpunode = {
        "apiVersion": "voltpack.io/v1alpha1",
        "kind": "GPUNode",
        "metadata": {"name": "gpu-a100-0"},
        "spec": {"gpus": []},
        "status": {"gpus": gpus, "lastHeartbeatTime": now},
    }
    created = custom.create_cluster_custom_object("voltpack.io", "v1alpha1", "gpunodes", gpunode)
    created = custom.patch_cluster_custom_object_status(
        "voltpack.io", "v1alpha1", "gpunodes", "gpu-a100-0", {"status": gpunode["status"]}
    )
    budget = {
        "apiVersion": "voltpack.io/v1alpha1",
        "kind": "PowerBudget",
        "metadata": {"name": "row-1"},
        "spec": {"nodeSelector": {"matchLabels": {}}, "budgetW": 1500},
    }
    custom.create_cluster_custom_object("voltpack.io", "v1alpha1", "powerbudgets", budget)
    text = example_policy_path("fgd-power-polca").read_text()
    view = finished_dry_run(server.url, _auth("operator"), text)
    assert view["status"] == "done", view
    caps = [c for c in view["result"]["changes"] if c["action"] == "cap"]
    assert caps and all(c["subject"].startswith("gpu-a100-0/gpu") for c in caps)
    after = custom.get_cluster_custom_object("voltpack.io", "v1alpha1", "gpunodes", "gpu-a100-0")
    assert not (after.get("spec") or {}).get("gpus")  # nothing written
    assert after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    stored = custom.get_cluster_custom_object("voltpack.io", "v1alpha1", "powerbudgets", "row-1")
    assert not stored.get("status")
    events = client.CoreV1Api(kube).list_event_for_all_namespaces().items
    assert not [e for e in events if e.involved_object.kind in ("PowerBudget", "GPUNode")]


def test_the_newest_reason_wins_within_one_second(kube: client.ApiClient) -> None:
    """Events keep microseconds (`eventTime`), so a reason and its successor in the same
    second are told apart whatever order the API server lists them in."""
    core = client.CoreV1Api(kube)
    pod = core.create_namespaced_pod("default", pod_manifest("late", gpus=8))
    pod_json = kube.sanitize_for_serialization(pod)
    pod_json.update(apiVersion="v1", kind="Pod")
    messages = [f"reason {i}" for i in range(6)]
    for message in messages:
        record_event(core, pod_json, "FailedScheduling", message)
    events = kube.sanitize_for_serialization(
        core.list_namespaced_event("default", field_selector="reason=FailedScheduling")
    )["items"]
    assert all(e["eventTime"] and e["reportingComponent"] and e["action"] for e in events)
    assert latest_reasons(events)["default/late"] == messages[-1]
    assert latest_reasons(list(reversed(events)))["default/late"] == messages[-1]


def test_node_and_job_lists_page_by_key(server: ApiServer, kube: client.ApiClient) -> None:
    whole = [n["name"] for n in server.get("/api/v1/nodes").json()]
    assert whole == sorted(whole) and len(whole) == 4
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 3}
    while True:
        answer = server.get("/api/v1/nodes", params=params)
        assert answer.status_code == 200, answer.text
        seen += [n["name"] for n in answer.json()]
        following = answer.headers.get("x-next-after")
        if following is None:
            break
        assert following == seen[-1]
        params["after"] = following
    assert seen == whole
    core = client.CoreV1Api(kube)
    for i in range(3):
        core.create_namespaced_pod("default", pod_manifest(f"page-{i}", gpus=64))
    wait_for(lambda: len(server.get("/api/v1/jobs").json()) == 3, what="three jobs listed")
    first = server.get("/api/v1/jobs", params={"limit": 2})
    assert [j["name"] for j in first.json()] == ["page-0", "page-1"]
    rest = server.get("/api/v1/jobs", params={"limit": 2, "after": first.headers["x-next-after"]})
    assert [j["name"] for j in rest.json()] == ["page-2"] and "x-next-after" not in rest.headers
    for bad in ({"limit": 0}, {"limit": 10_000}):
        refused = server.get("/api/v1/nodes", params=bad)
        assert refused.status_code == 422
        assert refused.headers["content-type"].startswith("application/problem+json")


def test_lists_page_with_continue_tokens_as_kubernetes_does(
    server: ApiServer, kube: client.ApiClient
) -> None:
    whole = server.get("/api/v1/nodes")  # default limit 500: all four, no continuation
    assert len(whole.json()) == 4 and "x-continue" not in whole.headers
    assert whole.headers["x-remaining-item-count"] == "0"
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 3}
    remaining = []
    while True:
        answer = server.get("/api/v1/nodes", params=params)
        assert answer.status_code == 200, answer.text
        seen += [n["name"] for n in answer.json()]
        remaining.append(int(answer.headers["x-remaining-item-count"]))
        token = answer.headers.get("x-continue")
        if token is None:
            break
        params = {"limit": 3, "continue": token}
    assert seen == [n["name"] for n in whole.json()] and remaining == [1, 0]

    core = client.CoreV1Api(kube)
    for i in range(3):
        core.create_namespaced_pod("default", pod_manifest(f"cont-{i}", gpus=64))
    wait_for(lambda: len(server.get("/api/v1/jobs").json()) == 3, what="three jobs listed")
    first = server.get("/api/v1/jobs", params={"limit": 2})
    token = first.headers["x-continue"]
    same = server.get("/api/v1/jobs", params={"limit": 2, "continue": token})
    assert [j["name"] for j in same.json()] == ["cont-2"]
    assert "x-inconsistent-continuation" not in same.headers
    # the list changes between two pages: the next page is the list as it is now after the
    # token's key, and says so (Kubernetes' "inconsistent continuation")
    core.create_namespaced_pod("default", pod_manifest("cont-3", gpus=64))
    wait_for(lambda: len(server.get("/api/v1/jobs").json()) == 4, what="four jobs listed")
    changed = server.get("/api/v1/jobs", params={"limit": 2, "continue": token})
    assert [j["name"] for j in changed.json()] == ["cont-2", "cont-3"]
    assert changed.headers["x-inconsistent-continuation"] == "true"
    assert int(changed.headers["x-list-revision"]) > int(first.headers["x-list-revision"])

    nodes_token = server.get("/api/v1/nodes", params={"limit": 1}).headers["x-continue"]
    for bad, field in (
        ({"continue": "not-a-token"}, "not a token this API issued"),
        ({"continue": nodes_token}, "a token of another list ('nodes')"),
        ({"continue": token, "after": "default/cont-0"}, "give one of them"),
    ):
        refused = server.get("/api/v1/jobs", params=bad)
        assert refused.status_code == 400, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert field in refused.json()["detail"]
    assert server.get("/api/v1/jobs", params={"limit": 5001}).status_code == 422
    assert server.get("/api/v1/jobs", params={"limit": 5000}).status_code == 200
