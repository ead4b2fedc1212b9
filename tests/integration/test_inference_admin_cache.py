"""The admin API's InferenceServices come from a watch-fed cache, over the emulator.

A service created, changed and deleted shows in the next reads while the API server is listed
once (the emulator counts the lists); a view is built again only when its service changed; a
cache that has lost the API server for `stale_after_s` answers 503; a cluster without the CRD
has no services until the CRD is installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from tests.integration.conftest import wait_for
from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import StaticTokens
from voltpack.api.server import serving
from voltpack.api.sources import SourceUnavailableError
from voltpack.emulator import RunningEmulator
from voltpack.model.inference_views import InferenceServiceView
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.operator.inference.admin import KubeInferenceSource
from voltpack.operator.kube.crds import install_crds
from voltpack.policies.schema import policy_for_strategy

GROUP, VERSION, PLURAL = "voltpack.io", "v1alpha1", "inferenceservices"
SPEC: dict[str, Any] = {
    "model": "llama3-8b",
    "slo": {"ttftMs": 3000, "tpotMs": 100},
    "ratePerSecond": 2,
    "requestSizes": [{"promptTokens": 512, "outputTokens": 256, "share": 1.0}],
    "gpuTypes": ["A10"],
    "container": {"image": "vllm/vllm-openai:v0.6.3", "cpuMilli": 2000, "memoryMib": 8192},
}
PLANNED = {
    "phase": "Ready",
    "replicas": 2,
    "predictedCostPerHour": 1.5,
    "plan": [
        {"gpuType": "A10", "tensorParallel": 1, "role": "unified", "replicas": 2,
         "costPerHour": 1.5, "extrapolated": False},
    ],
}  # fmt: skip


@pytest.fixture
def source(emulator: RunningEmulator) -> Iterator[KubeInferenceSource]:
    api = client.ApiClient(client.Configuration(host=emulator.url))
    found = KubeInferenceSource(api, stale_after_s=0.5)
    yield found
    found.close()
    api.close()


def create(custom: client.CustomObjectsApi, name: str) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": "default"}, "spec": SPEC}  # fmt: skip
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)


def by_name(source: KubeInferenceSource) -> dict[str, InferenceServiceView]:
    return {view.name: view for view in source.inference_services()}


def test_changes_show_in_the_next_reads_from_one_list_and_only_changed_views_are_rebuilt(
    emulator: RunningEmulator, api_client: client.ApiClient, source: KubeInferenceSource
) -> None:
    install_crds(client.ApiextensionsV1Api(api_client))
    custom = client.CustomObjectsApi(api_client)
    create(custom, "steady")
    # counts the lists of InferenceServices (a rule that delays by nothing and fails nothing)
    lists = emulator.faults.delay_next(0.0, 10**6, verb="list", path=f"/{PLURAL}$")
    assert set(by_name(source)) == {"steady"}
    steady = by_name(source)["steady"]
    assert by_name(source)["steady"] is steady  # not built again per read

    create(custom, "chat")
    wait_for(lambda: "chat" in by_name(source), what="the new service in the list")
    assert source.inference_plan("default", "chat") is not None
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, "default", PLURAL, "chat", {"status": PLANNED}
    )
    wait_for(lambda: by_name(source)["chat"].phase == "Ready", what="the new status")
    plan = source.inference_plan("default", "chat")
    assert plan is not None and plan.gpus_by_type == {"A10": 2}
    assert plan.predicted_cost_per_hour == 1.5
    assert by_name(source)["steady"] is steady  # only the changed service's view was rebuilt

    custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "chat")
    wait_for(lambda: set(by_name(source)) == {"steady"}, what="the service to go")
    assert source.inference_plan("default", "chat") is None
    assert source.inference_plan("default", "nope") is None
    assert lists.hits == 1, f"{lists.hits} lists of {PLURAL}: reads must come from the watch"


def test_a_cache_that_lost_the_api_server_answers_503_after_stale_after_s(
    emulator: RunningEmulator, api_client: client.ApiClient, tmp_path: Path
) -> None:
    install_crds(client.ApiextensionsV1Api(api_client))
    create(client.CustomObjectsApi(api_client), "chat")
    kube = client.ApiClient(client.Configuration(host=emulator.url))
    inference = KubeInferenceSource(kube, stale_after_s=0.5)
    tokens_file = tmp_path / "tokens.csv"
    tokens_file.write_text("tok-viewer,viewer-user,viewer\n")
    tokens = StaticTokens.from_file(tokens_file)
    cluster = KubeAdminSource(kube, policy_for_strategy("best-fit"), "")
    app = create_app(
        ApiDependencies(
            cluster=cluster,
            policies=cluster,
            authenticator=tokens,
            authorizer=tokens,
            inference=inference,
        )
    )
    headers = {"Authorization": "Bearer tok-viewer"}
    with serving(app) as url:
        listed = httpx.get(f"{url}/api/v1/inferenceservices", headers=headers, timeout=30)
        assert listed.status_code == 200 and [v["name"] for v in listed.json()] == ["chat"]
        emulator.stop()
        # the last state, while the loss may be a blip
        assert [v.name for v in inference.inference_services()] == ["chat"]

        def unavailable() -> httpx.Response | None:
            answer = httpx.get(f"{url}/api/v1/inferenceservices/default/chat/plan", headers=headers)
            return answer if answer.status_code == 503 else None

        answer = wait_for(unavailable, timeout_s=20, what="the plan to answer 503")
        assert f"unreachable ({PLURAL})" in answer.json()["detail"]
        with pytest.raises(SourceUnavailableError, match=f"unreachable \\({PLURAL}\\)"):
            inference.inference_services()
    kube.close()


def test_a_first_read_that_cannot_reach_the_api_server_is_unavailable() -> None:
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    inference = KubeInferenceSource(api, sync_timeout_s=20)
    try:
        with pytest.raises(SourceUnavailableError, match=f"unreachable \\({PLURAL}\\)"):
            inference.inference_services()
    finally:
        inference.close()
        api.close()


def test_without_the_crd_there_are_no_services_until_it_is_installed(
    api_client: client.ApiClient, source: KubeInferenceSource
) -> None:
    assert source.inference_services() == []
    assert source.inference_plan("default", "chat") is None
    install_crds(client.ApiextensionsV1Api(api_client))
    create(client.CustomObjectsApi(api_client), "chat")
    wait_for(lambda: "chat" in by_name(source), timeout_s=30, what="the service once served")
