"""The admin API's history routes over a real store (SQLite and PostgreSQL), with the operator
recording decisions into the same database and the emulator behind both."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from kubernetes import client
from schemathesis.checks import not_a_server_error

from tests.integration.conftest import operator_thread, pod_manifest, serving, wait_for
from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens
from voltpack.api.simulations import SimulationRunner
from voltpack.api.store_history import StoreHistory
from voltpack.emulator import RunningEmulator
from voltpack.forecast.default_model import DEFAULT_MODEL
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import OperatorConfig
from voltpack.policies.schema import example_policy_path, load_policy
from voltpack.store import BufferedStore, PowerSample

ADMIN = {"Authorization": "Bearer admin-token"}
NAMESPACE = "voltpack-system"


@dataclass
class Rig:
    url: str
    store: BufferedStore
    app: Any
    kube: client.ApiClient


def make_app(kube: client.ApiClient, store: BufferedStore, tmp_path: Path) -> Any:
    tokens_file = tmp_path / "tokens.csv"
    tokens_file.write_text("admin-token,ada,admin\n")
    tokens = StaticTokens.from_file(tokens_file)
    path = example_policy_path("fgd")
    source = KubeAdminSource(kube, load_policy(path), path.read_text())
    return create_app(
        ApiDependencies(
            cluster=source,
            policies=source,
            authenticator=tokens,
            authorizer=tokens,
            history=StoreHistory(store),
            simulations=SimulationRunner(),
        )
    )


@pytest.fixture
def rig(emulator: RunningEmulator, store_url: str, tmp_path: Path) -> Iterator[Rig]:
    kube = client.ApiClient(client.Configuration(host=emulator.url))
    install_crds(client.ApiextensionsV1Api(kube))
    client.CoreV1Api(kube).create_namespace({"metadata": {"name": NAMESPACE}})
    store = BufferedStore.open(store_url, retry_interval_s=0.1)
    app = make_app(kube, store, tmp_path)
    try:
        with serving(app) as url:
            yield Rig(url, store, app, kube)
    finally:
        store.close()
        kube.close()


def recording_operator(store_url: str) -> OperatorConfig:
    """An operator that records its history in `store_url`."""
    return OperatorConfig(
        policy=load_policy(example_policy_path("fgd")),
        identity="history",
        namespace=NAMESPACE,
        cycle_interval_s=0.05,
        lease_duration_s=2,
        power=False,
        database_url=store_url,
    )


def get(rig: Rig, path: str, **params: Any) -> httpx.Response:
    return httpx.get(rig.url + path, headers=ADMIN, params=params, timeout=30)


def test_the_operators_decisions_are_paginated_and_filtered(
    rig: Rig, emulator: RunningEmulator, store_url: str
) -> None:
    config = recording_operator(store_url)
    core = client.CoreV1Api(rig.kube)
    with operator_thread(emulator.url, config):
        for name, gpus in (("small", 1), ("medium", 4), ("huge", 64)):
            core.create_namespaced_pod("default", pod_manifest(name, gpus=gpus))

        def subjects() -> set[str]:
            return {d["subject"] for d in get(rig, "/api/v1/decisions").json()["items"]}

        wait_for(
            lambda: {"default/small", "default/medium", "default/huge"} <= subjects(),
            timeout_s=20,
            what="three decisions in the history",
        )
    items = get(rig, "/api/v1/decisions").json()["items"]
    by_subject = {d["subject"]: d for d in items}
    assert by_subject["default/small"]["placed"] is True
    assert by_subject["default/small"]["node"] is not None
    assert by_subject["default/huge"]["placed"] is False
    assert (
        "64" in by_subject["default/huge"]["reason"]
        or "GPU" in by_subject["default/huge"]["reason"]
    )
    # a waiting pod is recorded once per reason, not once per cycle
    assert sum(1 for d in items if d["subject"] == "default/huge") == 1
    only = get(rig, "/api/v1/decisions", job="default/medium").json()["items"]
    assert [d["subject"] for d in only] == ["default/medium"]
    first = get(rig, "/api/v1/decisions", limit=2).json()
    assert len(first["items"]) == 2 and first["next_cursor"]
    second = get(rig, "/api/v1/decisions", limit=2, cursor=first["next_cursor"]).json()
    seen = [d["id"] for d in first["items"] + second["items"]]
    assert len(seen) == len(set(seen)) == len(items)
    times = [d["at_s"] for d in first["items"] + second["items"]]
    assert times == sorted(times, reverse=True)
    bad = get(rig, "/api/v1/decisions", cursor="not-a-cursor")
    assert bad.status_code == 400
    assert bad.headers["content-type"].startswith("application/problem+json")


def test_every_administrative_action_is_audited(rig: Rig) -> None:
    text = example_policy_path("best-fit").read_text()
    applied = httpx.put(rig.url + "/api/v1/policy", headers=ADMIN, json={"text": text}, timeout=30)
    assert applied.status_code == 200
    refused = httpx.put(
        rig.url + "/api/v1/policy", headers=ADMIN, json={"text": "a: b"}, timeout=30
    )
    assert refused.status_code == 422
    rig.store.flush()
    entries = get(rig, "/api/v1/audit").json()
    actions = [(e["user"], e["action"], e["outcome"]) for e in entries]
    assert ("ada", "policy.apply", "applied") in actions
    assert ("ada", "policy.apply", "invalid") in actions


def test_a_simulation_outlives_the_api_process(rig: Rig, tmp_path: Path) -> None:
    submitted = httpx.post(
        rig.url + "/api/v1/simulations",
        headers=ADMIN,
        json={
            "trace": "physical_cluster/small_test.trace",
            "cluster": "2:2:2",
            "policies": ["fifo"],
        },
        timeout=30,
    ).json()
    run_id = submitted["id"]
    assert run_id.isdigit()
    wait_for(
        lambda: get(rig, f"/api/v1/simulations/{run_id}").json()["status"] == "done",
        timeout_s=60,
        what="the simulation",
    )
    # a new API process (its own runner, nothing in memory) still finds the run and its report
    with serving(make_app(rig.kube, rig.store, tmp_path)) as other:
        found = httpx.get(f"{other}/api/v1/simulations/{run_id}/report", headers=ADMIN, timeout=30)
    assert found.status_code == 200
    assert found.json()["results"]["fifo"]["jobs"] == 20


@pytest.mark.parametrize("backend", ["sqlite"])
def test_an_outage_answers_503_for_history_only_and_loses_no_audit(
    rig: Rig, store_url: str
) -> None:
    folder = Path(store_url.removeprefix("sqlite:///")).parent
    moved = folder.with_name("away")
    shutil.move(folder, moved)
    try:
        down = get(rig, "/api/v1/decisions")
        assert down.status_code == 503
        assert down.json()["type"].endswith("history-unavailable")
        assert get(rig, "/api/v1/cluster").status_code == 200
        capped = httpx.post(
            rig.url + "/api/v1/power/domains/none/cap", headers=ADMIN, json={"cap_w": 5}, timeout=30
        )
        assert capped.status_code == 404  # refused, and the refusal is audited (buffered)
    finally:
        shutil.move(moved, folder)
    wait_for(rig.store.flush, timeout_s=20, what="the buffer to drain")
    entries = get(rig, "/api/v1/audit").json()
    assert any(e["action"] == "power.cap" and e["target"] == "none" for e in entries)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_no_input_makes_the_history_routes_fail(rig: Rig) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", rig.app)
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path not in ("/api/v1/decisions", "/api/v1/audit"):
            continue

        @given(case=operation.as_strategy())
        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
        def fuzz(case: Any) -> None:
            case.call_and_validate(headers=ADMIN, checks=[not_a_server_error])

        try:
            fuzz()
        except Exception as exc:  # report every operation's failure together
            failures.append(f"{operation.path}: {exc}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_operator_records_job_history(
    rig: Rig, emulator: RunningEmulator, store_url: str
) -> None:
    custom = client.CustomObjectsApi(rig.kube)
    job = {
        "apiVersion": "voltpack.io/v1alpha1",
        "kind": "GPUJob",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {
            "workers": 2,
            "gpusPerWorker": 4,
            "template": {"spec": {"containers": [{"name": "w", "image": "trainer:1"}]}},
        },
    }
    custom.create_namespaced_custom_object("voltpack.io", "v1alpha1", "default", "gpujobs", job)
    config = recording_operator(store_url)

    def history() -> list[Any]:
        rig.store.flush()
        return rig.store.read(lambda store: store.job_history())

    with operator_thread(emulator.url, config):
        started = wait_for(
            lambda: [j for j in history() if j.started_at_s is not None],
            timeout_s=20,
            what="the job to be recorded as started",
        )
    record = started[0]
    assert (record.namespace, record.job, record.queue) == ("default", "train", "default")
    assert record.gpus == 8.0 and record.state in ("Scheduled", "Running")
    assert len(history()) == 1  # one job, updated in place


def test_a_domains_power_forecast_comes_from_its_stored_history(rig: Rig) -> None:
    """Three days of a diurnal row, stored as the operator stores it; the forecast's median
    follows the daily shape and its headroom is the budget minus the predicted peak."""
    url = rig.url + "/api/v1/power/domains/row-1/forecast"
    empty = httpx.get(url, headers=ADMIN, timeout=30)
    assert empty.status_code == 422 and "no power history" in empty.json()["detail"]
    now = time.time()
    start = now - 3 * 86_400
    samples = [
        PowerSample(
            at_s=start + i * 60.0,
            power_w=150_000 + 50_000 * math.sin(2 * math.pi * (i * 60.0) / 86_400),
            budget_w=260_000,
        )
        for i in range(3 * 1440)
    ]
    rig.store.read(lambda s: s.add_power_samples("row-1", samples))
    answer = httpx.get(url, headers=ADMIN, params={"horizon_s": 7200, "level": 0.99}, timeout=60)
    assert answer.status_code == 200, answer.text
    view = answer.json()
    assert view["model"] == DEFAULT_MODEL  # the same default as the CLI's and the operator's
    assert view["budget_w"] == 260_000 and view["step_s"] == 60.0
    assert len(view["power_w"]) == 120 and view["quantiles"][-1] == 0.99
    phase = (view["start_s"] - start) / 86_400
    expected = 150_000 + 50_000 * math.sin(2 * math.pi * phase)
    median = [row[view["quantiles"].index(0.5)] for row in view["power_w"]]
    assert abs(median[0] - expected) < 2_000
    assert view["headroom_w"] == pytest.approx(260_000 - view["predicted_peak_w"])
    assert "row-1" in view["explanation"]
    bad = httpx.get(url, headers=ADMIN, params={"model": "crystal-ball"}, timeout=30)
    assert bad.status_code == 422 and "crystal-ball" in bad.json()["detail"]
