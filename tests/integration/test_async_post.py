"""The operator's aiohttp poster talks to the API server as the official client does: same
server, TLS and credentials, the client's errors, and nothing lost on a refused request."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import pod_manifest
from tests.integration.services import started_control_plane
from tests.k8s_control_plane import (
    ControlPlane,
)
from voltpack.operator.kube.async_post import AsyncPoster, attach, attached
from voltpack.operator.kube.binder import record_event
from voltpack.operator.kube.client import REQUEST_TIMEOUT_S, api_message, post_json, status_code


def binding_body(pod: str, node: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def test_bindings_and_events_through_the_poster_on_the_emulator(
    api_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    core.create_node({"metadata": {"name": "n1"}})
    core.create_namespaced_pod("default", pod_manifest("p0"))
    poster = AsyncPoster.for_client(api_client)
    assert poster is not None
    attach(api_client, poster)
    try:
        assert attached(api_client) is poster
        post_json(
            api_client, "/api/v1/namespaces/default/pods/p0/binding", binding_body("p0", "n1")
        )
        assert core.read_namespaced_pod("p0", "default").spec.node_name == "n1"
        pod = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"name": "p0", "namespace": "default"},
        }
        assert record_event(core, pod, "Scheduled", "assigned", kind="Normal", raw=True)
        events = core.list_namespaced_event("default").items
        assert [(e.reason, e.message) for e in events] == [("Scheduled", "assigned")]
        # a refused request is the client's error, with the API server's message, and changes
        # nothing: the pod is bound already
        with pytest.raises(ApiException) as refused:
            post_json(
                api_client, "/api/v1/namespaces/default/pods/p0/binding", binding_body("p0", "n2")
            )
        assert status_code(refused.value) == 409
        assert "already" in api_message(refused.value)
        assert core.read_namespaced_pod("p0", "default").spec.node_name == "n1"
        with pytest.raises(ApiException) as missing:
            post_json(
                api_client,
                "/api/v1/namespaces/default/pods/nope/binding",
                binding_body("nope", "n1"),
            )
        assert status_code(missing.value) == 404
    finally:
        poster.close()
        attach(api_client, None)
    with pytest.raises(RuntimeError, match="closed"):
        poster.post("/api/v1/namespaces/default/events", {}, REQUEST_TIMEOUT_S)


def test_an_unreachable_api_server_is_a_connection_error() -> None:
    configuration = client.Configuration(host="http://127.0.0.1:1")
    poster = AsyncPoster(client.ApiClient(configuration))
    try:
        with pytest.raises(ConnectionError, match="unreachable"):
            poster.post("/api/v1/namespaces/default/events", {}, (2.0, 2.0))
    finally:
        poster.close()


def test_a_proxy_keeps_the_clients_own_path() -> None:
    configuration = client.Configuration(host="https://127.0.0.1:6443")
    configuration.proxy = "http://proxy.example:3128"
    assert AsyncPoster.for_client(client.ApiClient(configuration)) is None


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    yield from started_control_plane()


def test_tls_and_the_token_on_a_real_apiserver_and_a_401_read_again(plane: ControlPlane) -> None:
    api = plane.api_client()
    core = client.CoreV1Api(api)
    core.create_node({"metadata": {"name": "n1"}})
    core.create_namespaced_pod("default", pod_manifest("p0"))
    poster = AsyncPoster.for_client(api)
    assert poster is not None
    try:
        reply = poster.post(
            "/api/v1/namespaces/default/pods/p0/binding",
            binding_body("p0", "n1"),
            REQUEST_TIMEOUT_S,
        )
        assert reply.get("status") == "Success"
        assert core.read_namespaced_pod("p0", "default").spec.node_name == "n1"
        # credentials that stop working: a 401, and the next request reads them again
        right = api.configuration.api_key["authorization"]
        api.configuration.api_key["authorization"] = "not-a-token"
        poster._headers_due = 0.0  # the refresh falls due (as every HEADER_REFRESH_S)
        with pytest.raises(ApiException) as refused:
            poster.post("/api/v1/namespaces/default/events", {}, REQUEST_TIMEOUT_S)
        assert status_code(refused.value) == 401
        api.configuration.api_key["authorization"] = right
        event = {
            "metadata": {"generateName": "p0.", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p0", "namespace": "default"},
            "reason": "Scheduled",
            "message": "assigned",
            "type": "Normal",
        }
        created = poster.post("/api/v1/namespaces/default/events", event, REQUEST_TIMEOUT_S)
        assert created["reason"] == "Scheduled"
    finally:
        poster.close()
