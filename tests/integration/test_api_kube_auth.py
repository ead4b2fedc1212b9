"""The admin API with Kubernetes authentication: TokenReview and SubjectAccessReview against the
emulator, the roles of examples/rbac applied with kubectl, over real HTTP (uvicorn)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client

from tests.integration.conftest import TIME_FACTOR, Kubectl, serving
from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import KubernetesAuth
from voltpack.emulator import EmulatorConfig, RunningEmulator
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.operator.kube.crds import install_crds
from voltpack.policies.schema import example_policy_path, load_policy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "rbac"
TOKENS = {
    "viola": "viewer-token-0123456789",  # voltpack-viewer
    "otto": "operator-token-0123456789",  # voltpack-operator
    "ada": "admin-token-0123456789",  # voltpack-admin through the group voltpack-admins
    "carol": "oncall-token-0123456789",  # voltpack-operator through the group gpu-oncall
    "root": "root-token-0123456789",  # system:masters
}


@pytest.fixture
def emulator_config() -> EmulatorConfig:
    return EmulatorConfig(
        time_factor=TIME_FACTOR, bookmark_interval_s=0.2, token_file=EXAMPLES / "example-tokens.csv"
    )


@pytest.fixture
def url(emulator: RunningEmulator, kubectl: Kubectl) -> Iterator[str]:
    kubectl("apply", "-f", str(EXAMPLES / "voltpack-roles.yaml"))
    kubectl("apply", "-f", str(EXAMPLES / "example-bindings.yaml"))
    kube = client.ApiClient(client.Configuration(host=emulator.url))
    install_crds(client.ApiextensionsV1Api(kube))
    client.CoreV1Api(kube).create_namespace({"metadata": {"name": "voltpack-system"}})
    path = example_policy_path("fgd")
    source = KubeAdminSource(kube, load_policy(path), path.read_text())
    auth = KubernetesAuth(kube)
    app = create_app(
        ApiDependencies(cluster=source, policies=source, authenticator=auth, authorizer=auth)
    )
    try:
        with serving(app) as base_url:
            yield base_url
    finally:
        kube.close()


def call(url: str, user: str | None, method: str, path: str, body: object = None) -> int:
    headers = {"Authorization": f"Bearer {TOKENS[user]}"} if user else {}
    answer = httpx.request(method, url + path, headers=headers, json=body, timeout=30)
    return answer.status_code


def test_rbac_in_the_cluster_decides_who_may_do_what(url: str) -> None:
    text = example_policy_path("best-fit").read_text()
    routes = {
        "get": ("GET", "/api/v1/cluster", None),
        "dryrun": ("POST", "/api/v1/policy/dry-runs", {"text": text}),
        "apply": ("PUT", "/api/v1/policy", {"text": text}),
        "cap": ("POST", "/api/v1/power/domains/none/cap", {"cap_w": 100}),
    }
    expected = {
        "viola": {"get"},
        "otto": {"get", "dryrun"},
        "carol": {"get", "dryrun"},
        "ada": {"get", "dryrun", "apply", "cap"},
        "root": {"get", "dryrun", "apply", "cap"},
    }
    for user, verbs in expected.items():
        for verb, (method, path, body) in routes.items():
            status = call(url, user, method, path, body)
            if verb in verbs:
                assert status not in (401, 403), (user, verb, status)
            else:
                assert status == 403, (user, verb, status)
    assert call(url, None, "GET", "/api/v1/cluster") == 401
    unknown = httpx.get(
        url + "/api/v1/cluster", headers={"Authorization": "Bearer forged"}, timeout=30
    )
    assert unknown.status_code == 401


def test_an_unreachable_auth_server_answers_503_never_allow(
    url: str, emulator: RunningEmulator
) -> None:
    emulator.stop()
    answer = httpx.get(
        url + "/api/v1/cluster", headers={"Authorization": f"Bearer {TOKENS['ada']}"}, timeout=30
    )
    assert answer.status_code == 503
    assert answer.json()["type"].endswith("auth-unavailable")
