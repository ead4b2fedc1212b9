"""Authentication and authorization served by the emulator, through the official client and
kubectl: RBAC objects, TokenReview against a static token file, SubjectAccessReview with the
admin API's roles (`examples/rbac/`), and `kubectl auth can-i|whoami`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.conftest import REPO_ROOT
from tests.integration.conftest import TIME_FACTOR, Kubectl
from voltpack.emulator import (
    EmulatorConfig,
    EmulatorError,
    EmulatorState,
    RunningEmulator,
    running_emulator,
)

EXAMPLES = REPO_ROOT / "examples" / "rbac"
TOKENS = {
    "viola": "viewer-token-0123456789",
    "otto": "operator-token-0123456789",
    "ada": "admin-token-0123456789",
    "carol": "oncall-token-0123456789",
    "root": "root-token-0123456789",
}
VERBS = ("get", "dryrun", "simulate", "apply", "cap")
ALLOWED = {
    "viola": {"get"},
    "otto": {"get", "dryrun", "simulate"},
    "carol": {"get", "dryrun", "simulate"},  # through her group gpu-oncall
    "ada": set(VERBS),
    "root": set(VERBS),  # system:masters
    "mallory": set(),  # no binding at all
}


@pytest.fixture
def emulator_config() -> EmulatorConfig:
    return EmulatorConfig(
        time_factor=TIME_FACTOR,
        bookmark_interval_s=0.2,
        token_file=EXAMPLES / "example-tokens.csv",
    )


@pytest.fixture
def rbac(api_client: client.ApiClient) -> client.RbacAuthorizationV1Api:
    return client.RbacAuthorizationV1Api(api_client)


@pytest.fixture
def authn(api_client: client.ApiClient) -> client.AuthenticationV1Api:
    return client.AuthenticationV1Api(api_client)


@pytest.fixture
def authz(api_client: client.ApiClient) -> client.AuthorizationV1Api:
    return client.AuthorizationV1Api(api_client)


def documents(name: str) -> list[dict[str, Any]]:
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.fixture
def voltpack_roles(rbac: client.RbacAuthorizationV1Api) -> None:
    """The admin API's three ClusterRoles and the example bindings, created via the API."""
    for role in documents("voltpack-roles.yaml"):
        rbac.create_cluster_role(role)
    for binding in documents("example-bindings.yaml"):
        rbac.create_cluster_role_binding(binding)


def access_review(
    user: str, verb: str, *, namespace: str | None = None, groups: list[str] | None = None
) -> client.V1SubjectAccessReview:
    return client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=user,
            groups=groups,
            resource_attributes=client.V1ResourceAttributes(
                group="voltpack.io", resource="adminapi", verb=verb, namespace=namespace
            ),
        )
    )


def status_of(error: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.body)
    assert body["kind"] == "Status" and body["code"] == error.status
    return body


# --- discovery and RBAC objects ------------------------------------------------------------


def test_discovery_lists_rbac_kinds_and_create_only_reviews(api_client: client.ApiClient) -> None:
    rbac_resources = {
        r.name: r for r in client.RbacAuthorizationV1Api(api_client).get_api_resources().resources
    }
    assert {"roles", "clusterroles", "rolebindings", "clusterrolebindings"} <= set(rbac_resources)
    assert rbac_resources["roles"].namespaced and not rbac_resources["clusterroles"].namespaced
    assert "watch" in rbac_resources["clusterrolebindings"].verbs
    authn = client.AuthenticationV1Api(api_client).get_api_resources().resources
    assert {r.name: r.verbs for r in authn}["tokenreviews"] == ["create"]
    authz = {r.name: r for r in client.AuthorizationV1Api(api_client).get_api_resources().resources}
    assert authz["subjectaccessreviews"].verbs == ["create"]
    assert authz["selfsubjectaccessreviews"].verbs == ["create"]
    assert authz["localsubjectaccessreviews"].namespaced
    core = {r.name: r for r in client.CoreV1Api(api_client).get_api_resources().resources}
    assert core["serviceaccounts"].short_names == ["sa"]


def test_rbac_objects_are_stored_listed_watched_and_validated(
    rbac: client.RbacAuthorizationV1Api, core: client.CoreV1Api
) -> None:
    start = rbac.list_namespaced_role("default").metadata.resource_version
    role = {
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
    }
    rbac.create_namespaced_role("default", role)
    binding = client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="read-pods"),
        role_ref=client.V1RoleRef(
            api_group="rbac.authorization.k8s.io", kind="Role", name="pod-reader"
        ),
        subjects=[client.RbacV1Subject(kind="User", name="alice")],
    )
    created = rbac.create_namespaced_role_binding("default", binding)
    assert created.subjects[0].api_group == "rbac.authorization.k8s.io"  # defaulted
    core.create_namespaced_service_account("default", {"metadata": {"name": "bot"}})
    assert [sa.metadata.name for sa in core.list_namespaced_service_account("default").items] == [
        "bot"
    ]
    stream = watch.Watch().stream(
        rbac.list_namespaced_role, "default", resource_version=start, timeout_seconds=1
    )
    assert [(e["type"], e["object"].metadata.name) for e in stream] == [("ADDED", "pod-reader")]
    with pytest.raises(ApiException) as changed:
        rbac.patch_namespaced_role_binding(
            "read-pods", "default", {"roleRef": {"kind": "ClusterRole", "name": "view"}}
        )
    assert changed.value.status == 422
    assert "cannot change roleRef" in status_of(changed.value)["message"]
    with pytest.raises(ApiException) as bad_rule:
        rbac.create_namespaced_role(
            "default",
            {
                "metadata": {"name": "urls"},
                "rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}],
            },
        )
    assert bad_rule.value.status == 422
    message = status_of(bad_rule.value)["message"]
    assert "rules[0].nonResourceURLs" in message and "namespaced rules" in message
    rbac.delete_namespaced_role("pod-reader", "default")
    assert rbac.list_namespaced_role("default").items == []


# --- TokenReview ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("user", "uid", "groups"),
    [
        ("viola", "uid-viola", ["system:authenticated"]),
        ("ada", "uid-ada", ["voltpack-admins", "system:authenticated"]),
        ("carol", "uid-carol", ["gpu-oncall", "sre", "system:authenticated"]),
        ("root", "uid-root", ["system:masters", "system:authenticated"]),
    ],
)
def test_token_review_authenticates_static_tokens(
    authn: client.AuthenticationV1Api, user: str, uid: str, groups: list[str]
) -> None:
    review = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=TOKENS[user]))
    answer = authn.create_token_review(review)
    assert answer.spec.token == TOKENS[user]
    assert answer.status.authenticated is True
    assert answer.status.error is None
    assert (answer.status.user.username, answer.status.user.uid) == (user, uid)
    assert answer.status.user.groups == groups


def test_token_review_rejects_unknown_and_missing_tokens(authn: client.AuthenticationV1Api) -> None:
    answer = authn.create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token="not-a-token"))
    )
    assert answer.status.authenticated is False
    assert answer.status.error == "invalid bearer token"
    assert answer.status.user.username is None
    with pytest.raises(ApiException) as missing:
        authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token="")))
    assert missing.value.status == 400
    assert status_of(missing.value)["message"] == (
        "token is required for TokenReview in authentication"
    )


# --- SubjectAccessReview -------------------------------------------------------------------


@pytest.mark.usefixtures("voltpack_roles")
def test_subject_access_review_matrix_of_the_admin_api_roles(
    authn: client.AuthenticationV1Api, authz: client.AuthorizationV1Api
) -> None:
    """What the admin API does per request: TokenReview the token, then ask per verb."""
    seen: dict[str, set[str]] = {}
    for user in ALLOWED:
        if user in TOKENS:
            token = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=TOKENS[user]))
            who = authn.create_token_review(token).status.user
            username, groups = who.username, who.groups
        else:
            username, groups = user, ["system:authenticated"]
        seen[user] = set()
        for verb in VERBS:
            answer = authz.create_subject_access_review(
                access_review(username, verb, groups=groups)
            )
            assert answer.status.denied is False
            if answer.status.allowed:
                seen[user].add(verb)
                assert answer.status.reason
            else:
                assert not answer.status.reason
    assert seen == ALLOWED


@pytest.mark.usefixtures("voltpack_roles")
def test_subject_access_review_reasons_name_the_binding(authz: client.AuthorizationV1Api) -> None:
    otto = authz.create_subject_access_review(access_review("otto", "simulate"))
    assert otto.status.reason == (
        'RBAC: allowed by ClusterRoleBinding "voltpack-operators" of ClusterRole '
        '"voltpack-operator" to User "otto"'
    )
    carol = authz.create_subject_access_review(
        access_review("carol", "dryrun", groups=["gpu-oncall"])
    )
    assert carol.status.reason.endswith('to Group "gpu-oncall"')
    root = authz.create_subject_access_review(
        access_review("root", "cap", groups=["system:masters"])
    )
    assert root.status.allowed and "system:masters" in root.status.reason
    # other resources and groups are not covered by the admin API's roles
    pods = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user="ada", resource_attributes=client.V1ResourceAttributes(verb="get", resource="pods")
        )
    )
    assert authz.create_subject_access_review(pods).status.allowed is False


@pytest.mark.usefixtures("voltpack_roles")
def test_role_binding_to_a_cluster_role_is_scoped_to_its_namespace(
    rbac: client.RbacAuthorizationV1Api, core: client.CoreV1Api, authz: client.AuthorizationV1Api
) -> None:
    core.create_namespace({"metadata": {"name": "team-a"}})
    rbac.create_namespaced_role_binding(
        "team-a",
        {
            "metadata": {"name": "otto-admin"},
            "roleRef": {"kind": "ClusterRole", "name": "voltpack-admin"},
            "subjects": [{"kind": "User", "name": "otto"}],
        },
    )
    in_team_a = authz.create_subject_access_review(access_review("otto", "cap", namespace="team-a"))
    assert in_team_a.status.allowed
    assert in_team_a.status.reason == (
        'RBAC: allowed by RoleBinding "otto-admin/team-a" of ClusterRole "voltpack-admin" to '
        'User "otto"'
    )
    elsewhere = access_review("otto", "cap", namespace="team-b")
    assert not authz.create_subject_access_review(elsewhere).status.allowed
    assert not authz.create_subject_access_review(access_review("otto", "cap")).status.allowed
    local = client.V1LocalSubjectAccessReview(
        metadata=client.V1ObjectMeta(namespace="team-a"),
        spec=access_review("otto", "apply", namespace="team-a").spec,
    )
    answer = authz.create_namespaced_local_subject_access_review("team-a", local)
    assert answer.status.allowed
    with pytest.raises(ApiException) as mismatch:
        authz.create_namespaced_local_subject_access_review(
            "team-b",
            client.V1LocalSubjectAccessReview(
                spec=access_review("otto", "apply", namespace="team-a").spec
            ),
        )
    assert mismatch.value.status == 400
    assert "must match namespace: team-b" in status_of(mismatch.value)["message"]


@pytest.mark.usefixtures("voltpack_roles")
def test_service_accounts_and_non_resource_urls(
    rbac: client.RbacAuthorizationV1Api, authz: client.AuthorizationV1Api
) -> None:
    rbac.create_cluster_role(
        {
            "metadata": {"name": "metrics-reader"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics", "/debug/*"]}],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "agents-read-metrics"},
            "roleRef": {"kind": "ClusterRole", "name": "metrics-reader"},
            "subjects": [{"kind": "Group", "name": "system:serviceaccounts:voltpack"}],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "api-viewer"},
            "roleRef": {"kind": "ClusterRole", "name": "voltpack-viewer"},
            "subjects": [{"kind": "ServiceAccount", "name": "api", "namespace": "voltpack"}],
        }
    )

    def url(user: str, path: str) -> bool:
        review = client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(
                user=user,
                non_resource_attributes=client.V1NonResourceAttributes(path=path, verb="get"),
            )
        )
        return bool(authz.create_subject_access_review(review).status.allowed)

    agent = "system:serviceaccount:voltpack:agent"
    assert url(agent, "/metrics") and url(agent, "/debug/pprof/heap")
    assert not url(agent, "/healthz")
    assert not url("system:serviceaccount:other:agent", "/metrics")
    api_sa = authz.create_subject_access_review(
        access_review("system:serviceaccount:voltpack:api", "get")
    )
    assert api_sa.status.reason.endswith('to ServiceAccount "api/voltpack"')


def raw_post(api_client: client.ApiClient, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    response = api_client.rest_client.pool_manager.request(
        "POST",
        api_client.configuration.host + path,
        body=body,
        headers={"Content-Type": "application/json"},
    )
    return response.status, json.loads(response.data)


def test_malformed_reviews_get_clear_errors(
    api_client: client.ApiClient, authz: client.AuthorizationV1Api
) -> None:
    sar_path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    code, body = raw_post(api_client, sar_path, b"{not json")
    assert code == 400 and "error decoding the request body" in body["message"]
    code, body = raw_post(
        api_client, sar_path, json.dumps({"kind": "TokenReview", "spec": {}}).encode()
    )
    assert code == 400 and "cannot be handled as a SubjectAccessReview" in body["message"]
    code, body = raw_post(
        api_client,
        sar_path,
        json.dumps({"spec": {"user": 7, "resourceAttributes": {"verb": "get"}}}).encode(),
    )
    assert code == 400 and body["message"] == (
        "error decoding SubjectAccessReview: spec.user must be a string, got 7"
    )
    with pytest.raises(ApiException) as empty:
        authz.create_subject_access_review(
            client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec())
        )
    assert empty.value.status == 422
    assert status_of(empty.value)["message"] == (
        'SubjectAccessReview.authorization.k8s.io "" is invalid: [spec.resourceAttributes: '
        "Invalid value: exactly one of nonResourceAttributes or resourceAttributes must be "
        'specified, spec.user: Invalid value: "": at least one of user or group must be '
        "specified]"
    )
    causes = status_of(empty.value)["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.resourceAttributes", "spec.user"]
    code, body = raw_post(api_client, "/apis/authentication.k8s.io/v1/tokenreviews", b"[]")
    assert code == 400 and "must be a JSON or YAML object" in body["message"]


def test_reviews_are_create_only(api_client: client.ApiClient) -> None:
    for path in (
        "/apis/authentication.k8s.io/v1/tokenreviews",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    ):
        response = api_client.rest_client.pool_manager.request(
            "GET", api_client.configuration.host + path
        )
        assert response.status == 405


# --- the requester: bearer tokens, impersonation, kubectl ---------------------------------------


@pytest.mark.usefixtures("voltpack_roles")
def test_self_subject_access_review_uses_the_bearer_token(emulator: RunningEmulator) -> None:
    def can(token: str, verb: str) -> bool:
        configuration = client.Configuration(host=emulator.url)
        configuration.api_key = {"authorization": f"Bearer {token}"}
        with client.ApiClient(configuration) as api:
            review = client.V1SelfSubjectAccessReview(
                spec=client.V1SelfSubjectAccessReviewSpec(
                    resource_attributes=client.V1ResourceAttributes(
                        group="voltpack.io", resource="adminapi", verb=verb
                    )
                )
            )
            answer = client.AuthorizationV1Api(api).create_self_subject_access_review(review)
            return bool(answer.status.allowed)

    assert can(TOKENS["viola"], "get") and not can(TOKENS["viola"], "simulate")
    assert can(TOKENS["carol"], "simulate") and not can(TOKENS["carol"], "apply")
    assert can(TOKENS["root"], "cap")
    with pytest.raises(ApiException) as unknown:
        can("not-a-token", "get")
    assert unknown.value.status == 401


@pytest.fixture
def anonymous_may_impersonate(kubectl: Kubectl) -> None:
    """RBAC that lets anonymous requests impersonate users, groups and service accounts.

    kubectl sends no bearer token to a server over plain HTTP (client-go adds credentials only
    to TLS transports), so its `--as` requests to the emulator are anonymous; kube-apiserver
    and the emulator refuse impersonation to anyone RBAC does not allow it, so the tests that
    drive `kubectl --as` grant it here, explicitly.
    """
    kubectl("create", "clusterrole", "impersonator", "--verb=impersonate",
            "--resource=users,groups,serviceaccounts")  # fmt: skip
    kubectl("create", "clusterrolebinding", "anonymous-impersonates",
            "--clusterrole=impersonator", "--user=system:anonymous")  # fmt: skip


def impersonating(emulator: RunningEmulator, token: str, user: str) -> dict[str, Any]:
    """The SelfSubjectReview's user info of a request with `token`, impersonating `user`."""
    configuration = client.Configuration(host=emulator.url)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    with client.ApiClient(configuration, "Impersonate-User", user) as api:
        review = client.AuthenticationV1Api(api).create_self_subject_review(
            client.V1SelfSubjectReview()
        )
        info: dict[str, Any] = review.status.user_info.to_dict()
        return info


@pytest.mark.usefixtures("voltpack_roles")
def test_impersonation_needs_the_impersonate_verb(
    kubectl: Kubectl, emulator: RunningEmulator, rbac: client.RbacAuthorizationV1Api
) -> None:
    """Anonymous clients and users without `impersonate` get 403, as from kube-apiserver;
    system:masters and users RBAC allows may impersonate."""
    refused = kubectl("auth", "whoami", "--as=ada", "--as-group=voltpack-admins", check=False)
    assert refused.returncode != 0 and "do not have permission" in refused.stderr
    can_i = kubectl("auth", "can-i", "get", "configmaps", "--as=ada", check=False)
    assert can_i.returncode != 0 and can_i.stdout.strip() != "yes"
    assert 'users "ada" is forbidden' in can_i.stderr, can_i.stderr
    assert 'User "system:anonymous" cannot impersonate resource "users"' in can_i.stderr
    with pytest.raises(ApiException) as viola:
        impersonating(emulator, TOKENS["viola"], "ada")
    assert viola.value.status == 403
    assert 'User "viola" cannot impersonate' in json.loads(viola.value.body)["message"]
    assert impersonating(emulator, TOKENS["root"], "ada")["username"] == "ada"
    rbac.create_cluster_role(
        {
            "metadata": {"name": "ada-impersonator"},
            "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"],
                       "resourceNames": ["ada"]}],
        }
    )  # fmt: skip
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "viola-as-ada"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "ada-impersonator"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": "viola"}],
        }
    )  # fmt: skip
    assert impersonating(emulator, TOKENS["viola"], "ada")["username"] == "ada"
    with pytest.raises(ApiException) as other:
        impersonating(emulator, TOKENS["viola"], "otto")
    assert other.value.status == 403


@pytest.mark.usefixtures("voltpack_roles", "anonymous_may_impersonate")
def test_kubectl_auth_can_i_and_whoami(kubectl: Kubectl) -> None:
    """`kubectl auth can-i` sends a SelfSubjectAccessReview with impersonation headers.

    kubectl resolves the resource through discovery first; `adminapi` is not served (it only
    carries the admin API's verbs), so kubectl would ask about a resource named
    "adminapi.voltpack.io" in the core group, against the emulator as against a real cluster.
    Ask with `--list`, or with a SubjectAccessReview as the admin API does.
    """

    def can_i(*args: str) -> str:
        return kubectl("auth", "can-i", *args, check=False).stdout.strip()

    kubectl(
        "create", "clusterrole", "configmap-editor", "--verb=get,update", "--resource=configmaps"
    )
    kubectl(
        "create",
        "clusterrolebinding",
        "oncall-cm",
        "--clusterrole=configmap-editor",
        "--group=gpu-oncall",
    )
    assert can_i("update", "configmaps", "--as=carol", "--as-group=gpu-oncall") == "yes"
    assert can_i("delete", "configmaps", "--as=carol", "--as-group=gpu-oncall") == "no"
    assert can_i("update", "configmaps", "--as=carol") == "no"
    assert can_i("delete", "nodes", "--as=x", "--as-group=system:masters") == "yes"
    assert can_i("get", "configmaps", "--as=viola") == "no"
    whoami = kubectl("auth", "whoami", "--as=carol", "--as-group=gpu-oncall", "-o", "json")
    info = json.loads(whoami.stdout)["status"]["userInfo"]
    assert info == {"username": "carol", "groups": ["gpu-oncall", "system:authenticated"]}
    listed = kubectl("auth", "can-i", "--list", "--as=otto").stdout.splitlines()
    rows = [line.split() for line in listed if line.startswith("adminapi.voltpack.io")]
    assert rows == [["adminapi.voltpack.io", "[]", "[]", "[get", "dryrun", "simulate]"]]
    viewer = kubectl("auth", "can-i", "--list", "--as=viola").stdout
    assert "[get]" in viewer and "simulate" not in viewer
    roles = kubectl("get", "clusterroles").stdout.split()
    assert {"voltpack-viewer", "voltpack-operator", "voltpack-admin"} <= set(roles)
    wide = kubectl("get", "clusterrolebinding", "voltpack-operators", "-o", "wide").stdout
    assert wide.splitlines()[1].split()[:2] == [
        "voltpack-operators",
        "ClusterRole/voltpack-operator",
    ]
    assert "gpu-oncall" in wide and "otto" in wide


@pytest.mark.usefixtures("anonymous_may_impersonate")
def test_kubectl_creates_rbac_objects_and_service_accounts(kubectl: Kubectl) -> None:
    kubectl("create", "serviceaccount", "agent")
    kubectl("create", "role", "lease-writer", "--verb=get,update", "--resource=leases")
    kubectl(
        "create",
        "rolebinding",
        "agent-leases",
        "--role=lease-writer",
        "--serviceaccount=default:agent",
    )
    assert kubectl("auth", "can-i", "update", "leases", "--as=system:serviceaccount:default:agent")
    answer = kubectl(
        "auth", "can-i", "update", "leases", "--as=system:serviceaccount:default:agent"
    ).stdout.strip()
    assert answer == "yes"
    other = kubectl(
        "auth",
        "can-i",
        "update",
        "leases",
        "-n",
        "kube-system",
        "--as=system:serviceaccount:default:agent",
        check=False,
    ).stdout.strip()
    assert other == "no"
    rows = kubectl("get", "sa,roles,rolebindings").stdout
    assert "serviceaccount/agent" in rows and "Role/lease-writer" in rows


def test_a_malformed_token_file_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text('good,alice,1,"a,b"\nonly-a-token\n', encoding="utf-8")
    with pytest.raises(EmulatorError) as error:
        EmulatorState(EmulatorConfig(token_file=path, lifecycle=False))
    assert f"{path}:2:" in str(error.value) and "at least 3 columns" in str(error.value)


# --- service-account tokens (TokenRequest) ---------------------------------------------------


def token_for(core: client.CoreV1Api, name: str, **spec: Any) -> str:
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(**spec))
    answer = core.create_namespaced_service_account_token(name, "default", request)
    assert answer.status.expiration_timestamp is not None
    return str(answer.status.token)


@pytest.mark.usefixtures("voltpack_roles")
def test_service_account_tokens_authenticate_until_the_account_is_gone(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    authn: client.AuthenticationV1Api,
    authz: client.AuthorizationV1Api,
) -> None:
    core.create_namespaced_service_account("default", {"metadata": {"name": "admin-api"}})
    token = token_for(core, "admin-api", audiences=["voltpack-admin-api"])
    review = client.V1TokenReview(
        spec=client.V1TokenReviewSpec(token=token, audiences=["voltpack-admin-api"])
    )
    status = authn.create_token_review(review).status
    assert status.authenticated is True and status.audiences == ["voltpack-admin-api"]
    assert status.user.username == "system:serviceaccount:default:admin-api"
    assert status.user.groups == [
        "system:serviceaccounts",
        "system:serviceaccounts:default",
        "system:authenticated",
    ]
    wrong_audience = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
    status = authn.create_token_review(wrong_audience).status
    assert status.authenticated is False and "is invalid for the target audiences" in status.error
    # what the service account may do follows its bindings and groups
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "sa-viewers"},
            "roleRef": {"kind": "ClusterRole", "name": "voltpack-viewer"},
            "subjects": [{"kind": "Group", "name": "system:serviceaccounts:default"}],
        }
    )
    user = authn.create_token_review(review).status.user
    allowed = authz.create_subject_access_review(
        access_review(user.username, "get", groups=user.groups)
    )
    assert allowed.status.allowed
    core.delete_namespaced_service_account("admin-api", "default")
    status = authn.create_token_review(review).status
    assert status.authenticated is False
    assert status.error == 'invalid bearer token, serviceaccounts "admin-api" not found'
    core.create_namespaced_service_account("default", {"metadata": {"name": "admin-api"}})
    status = authn.create_token_review(review).status
    assert status.authenticated is False and "does not match" in status.error


def test_token_requests_are_checked(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        token_for(core, "nobody")
    assert missing.value.status == 404
    core.create_namespaced_service_account("default", {"metadata": {"name": "bot"}})
    with pytest.raises(ApiException) as short:
        token_for(core, "bot", expiration_seconds=60)
    assert short.value.status == 422
    assert "may not specify a duration less than 10 minutes" in status_of(short.value)["message"]


def test_service_account_tokens_expire() -> None:
    now = [datetime(2025, 1, 1, tzinfo=UTC)]
    state = EmulatorState(EmulatorConfig(lifecycle=False), clock=lambda: now[0])
    with (
        running_emulator(state=state) as emulator,
        client.ApiClient(client.Configuration(host=emulator.url)) as api,
    ):
        core = client.CoreV1Api(api)
        authn = client.AuthenticationV1Api(api)
        core.create_namespaced_service_account("default", {"metadata": {"name": "bot"}})
        token = token_for(core, "bot", expiration_seconds=600)
        review = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        assert authn.create_token_review(review).status.authenticated is True
        now[0] += timedelta(seconds=600)
        status = authn.create_token_review(review).status
        assert status.authenticated is False and "expired" in status.error
        tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
        forged = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=tampered))
        assert authn.create_token_review(forged).status.error == "invalid bearer token"


def test_kubectl_create_token(kubectl: Kubectl, authn: client.AuthenticationV1Api) -> None:
    kubectl("create", "serviceaccount", "agent")
    token = kubectl("create", "token", "agent").stdout.strip()
    review = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
    user = authn.create_token_review(review).status.user
    assert user.username == "system:serviceaccount:default:agent"
