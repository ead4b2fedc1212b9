"""The emulator's RBAC evaluator: rules, subjects, namespace scoping and reasons."""

from __future__ import annotations

from typing import Any

import pytest

from voltpack.emulator.access.rbac import (
    NonResourceAttributes,
    PolicyRule,
    RbacPolicy,
    ResourceAttributes,
    UserInfo,
    service_account_groups,
    service_account_username,
    split_service_account,
)

RBAC = "rbac.authorization.k8s.io"


def cluster_role(name: str, *rules: dict[str, Any], labels: dict[str, str] | None = None) -> Any:
    return {
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels or {}},
        "rules": list(rules),
    }


def role(namespace: str, name: str, *rules: dict[str, Any]) -> Any:
    return {
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": list(rules),
    }


def subject(kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": kind, "name": name}
    if kind != "ServiceAccount":
        body["apiGroup"] = RBAC
    if namespace is not None:
        body["namespace"] = namespace
    return body


def binding(
    name: str, role_kind: str, role_name: str, *subjects: dict[str, Any], namespace: str = ""
) -> Any:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "metadata": metadata,
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role_name},
        "subjects": list(subjects),
    }


def rule(verbs: list[str], groups: list[str], resources: list[str], **extra: Any) -> Any:
    return {"verbs": verbs, "apiGroups": groups, "resources": resources, **extra}


ALICE = UserInfo("alice", groups=("system:authenticated",))


def res(verb: str, resource: str, **kwargs: str) -> ResourceAttributes:
    return ResourceAttributes(verb=verb, resource=resource, **kwargs)


# --- single rules ------------------------------------------------------------------------------


def test_rule_verbs_groups_and_resources_with_wildcards() -> None:
    exact = PolicyRule.from_json(rule(["get", "list"], [""], ["pods"]))
    assert exact.allows(res("get", "pods", namespace="x"))
    assert not exact.allows(res("delete", "pods"))
    assert not exact.allows(res("get", "pods", group="apps"))
    assert not exact.allows(res("get", "nodes"))
    star = PolicyRule.from_json(rule(["*"], ["*"], ["*"]))
    assert star.allows(res("escalate", "clusterroles", group=RBAC))
    assert star.allows(res("get", "pods", subresource="log"))
    group_star = PolicyRule.from_json(rule(["get"], ["*"], ["deployments"]))
    assert group_star.allows(res("get", "deployments", group="apps"))
    assert not group_star.allows(res("list", "deployments", group="apps"))


def test_rule_subresources() -> None:
    pods = PolicyRule.from_json(rule(["get"], [""], ["pods"]))
    assert not pods.allows(res("get", "pods", subresource="log"))
    log = PolicyRule.from_json(rule(["get"], [""], ["pods/log"]))
    assert log.allows(res("get", "pods", subresource="log"))
    assert not log.allows(res("get", "pods"))
    assert not log.allows(res("get", "pods", subresource="status"))
    any_status = PolicyRule.from_json(rule(["patch"], ["*"], ["*/status"]))
    assert any_status.allows(res("patch", "nodes", subresource="status"))
    assert any_status.allows(res("patch", "gpunodes", group="voltpack.io", subresource="status"))
    assert not any_status.allows(res("patch", "nodes"))
    assert not any_status.allows(res("patch", "pods", subresource="statuses"))


def test_rule_resource_names() -> None:
    named = PolicyRule.from_json(rule(["get", "update"], [""], ["configmaps"], resourceNames=["a"]))
    assert named.allows(res("get", "configmaps", name="a"))
    assert not named.allows(res("get", "configmaps", name="b"))
    assert not named.allows(res("list", "configmaps"))
    assert not named.allows(res("get", "configmaps"))
    unnamed = PolicyRule.from_json(rule(["get"], [""], ["configmaps"]))
    assert unnamed.allows(res("get", "configmaps", name="b"))


def test_rule_non_resource_urls() -> None:
    urls = PolicyRule.from_json({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]})
    assert urls.allows(NonResourceAttributes("get", "/healthz"))
    assert not urls.allows(NonResourceAttributes("get", "/healthz/ping"))
    assert urls.allows(NonResourceAttributes("get", "/apis/voltpack.io/v1"))
    assert urls.allows(NonResourceAttributes("get", "/apis/"))
    assert not urls.allows(NonResourceAttributes("get", "/apis"))
    assert not urls.allows(NonResourceAttributes("post", "/healthz"))
    assert not urls.allows(res("get", "healthz"))
    everything = PolicyRule.from_json({"verbs": ["*"], "nonResourceURLs": ["*"]})
    assert everything.allows(NonResourceAttributes("delete", "/anything/at/all"))
    resource_rule = PolicyRule.from_json(rule(["get"], ["*"], ["*"]))
    assert not resource_rule.allows(NonResourceAttributes("get", "/healthz"))


# --- bindings ----------------------------------------------------------------------------------


VOLTPACK_ROLES = [
    cluster_role("voltpack-viewer", rule(["get"], ["voltpack.io"], ["adminapi"])),
    cluster_role(
        "voltpack-operator", rule(["get", "dryrun", "simulate"], ["voltpack.io"], ["adminapi"])
    ),
    cluster_role(
        "voltpack-admin",
        rule(["get", "dryrun", "simulate", "apply", "cap"], ["voltpack.io"], ["adminapi"]),
    ),
]


def test_cluster_role_binding_allows_with_kube_apiserver_reason() -> None:
    policy = RbacPolicy(
        cluster_roles=VOLTPACK_ROLES,
        cluster_role_bindings=[
            binding("ops", "ClusterRole", "voltpack-operator", subject("User", "alice"))
        ],
    )
    decision = policy.authorize(ALICE, res("simulate", "adminapi", group="voltpack.io"))
    assert decision.allowed and not decision.denied
    assert decision.reason == (
        'RBAC: allowed by ClusterRoleBinding "ops" of ClusterRole "voltpack-operator" to User '
        '"alice"'
    )
    denied = policy.authorize(ALICE, res("apply", "adminapi", group="voltpack.io"))
    assert not denied.allowed and not denied.denied and denied.reason == ""
    assert not policy.authorize(
        UserInfo("bob"), res("get", "adminapi", group="voltpack.io")
    ).allowed


def test_groups_and_system_masters() -> None:
    policy = RbacPolicy(
        cluster_roles=VOLTPACK_ROLES,
        cluster_role_bindings=[
            binding("viewers", "ClusterRole", "voltpack-viewer", subject("Group", "sre"))
        ],
    )
    carol = UserInfo("carol", groups=("sre",))
    decision = policy.authorize(carol, res("get", "adminapi", group="voltpack.io"))
    assert decision.allowed and 'to Group "sre"' in decision.reason
    assert not policy.authorize(carol, res("cap", "adminapi", group="voltpack.io")).allowed
    root = UserInfo("root", groups=("system:masters",))
    assert policy.authorize(root, res("cap", "adminapi", group="voltpack.io")).allowed
    assert policy.authorize(root, NonResourceAttributes("delete", "/anything")).allowed
    assert policy.authorize(UserInfo("x", groups=("system:masters",)), res("get", "pods")).allowed
    assert not policy.authorize(UserInfo("system:masters"), res("get", "pods")).allowed


def test_role_binding_scopes_rules_to_its_namespace() -> None:
    policy = RbacPolicy(
        cluster_roles=VOLTPACK_ROLES,
        roles=[role("team-a", "pod-reader", rule(["get", "list"], [""], ["pods"]))],
        role_bindings=[
            binding(
                "read-pods", "Role", "pod-reader", subject("User", "alice"), namespace="team-a"
            ),
            binding(
                "admins",
                "ClusterRole",
                "voltpack-admin",
                subject("User", "alice"),
                namespace="team-a",
            ),
        ],
    )
    allowed = policy.authorize(ALICE, res("list", "pods", namespace="team-a"))
    assert allowed.reason == (
        'RBAC: allowed by RoleBinding "read-pods/team-a" of Role "pod-reader" to User "alice"'
    )
    assert not policy.authorize(ALICE, res("list", "pods", namespace="team-b")).allowed
    assert not policy.authorize(ALICE, res("list", "pods")).allowed  # all namespaces
    cap = res("cap", "adminapi", group="voltpack.io", namespace="team-a")
    assert policy.authorize(ALICE, cap).allowed
    assert 'of ClusterRole "voltpack-admin"' in policy.authorize(ALICE, cap).reason
    assert not policy.authorize(ALICE, res("cap", "adminapi", group="voltpack.io")).allowed
    other = res("cap", "adminapi", group="voltpack.io", namespace="team-b")
    assert not policy.authorize(ALICE, other).allowed


def test_role_binding_cannot_grant_non_resource_urls() -> None:
    health = cluster_role("health", {"verbs": ["get"], "nonResourceURLs": ["/healthz"]})
    policy = RbacPolicy(
        cluster_roles=[health],
        role_bindings=[
            binding("h", "ClusterRole", "health", subject("User", "alice"), namespace="team-a")
        ],
    )
    assert not policy.authorize(ALICE, NonResourceAttributes("get", "/healthz")).allowed
    policy = RbacPolicy(
        cluster_roles=[health],
        cluster_role_bindings=[binding("h", "ClusterRole", "health", subject("User", "alice"))],
    )
    assert policy.authorize(ALICE, NonResourceAttributes("get", "/healthz")).allowed


def test_service_account_subjects_and_groups() -> None:
    assert service_account_username("agents", "voltpack") == (
        "system:serviceaccount:agents:voltpack"
    )
    assert split_service_account("system:serviceaccount:agents:voltpack") == ("agents", "voltpack")
    assert split_service_account("system:serviceaccount:agents") is None
    assert split_service_account("alice") is None
    agent = UserInfo(
        "system:serviceaccount:agents:voltpack", groups=service_account_groups("agents")
    )
    assert agent.groups == (
        "system:serviceaccounts",
        "system:serviceaccounts:agents",
        "system:authenticated",
    )
    policy = RbacPolicy(
        cluster_roles=VOLTPACK_ROLES,
        roles=[role("agents", "leases", rule(["update"], ["coordination.k8s.io"], ["leases"]))],
        cluster_role_bindings=[
            binding(
                "agent-viewer",
                "ClusterRole",
                "voltpack-viewer",
                subject("ServiceAccount", "voltpack", "agents"),
            ),
            binding(
                "sa-operators",
                "ClusterRole",
                "voltpack-operator",
                subject("Group", "system:serviceaccounts:agents"),
            ),
        ],
        role_bindings=[
            # no namespace on the subject: the binding's namespace
            binding(
                "leases",
                "Role",
                "leases",
                subject("ServiceAccount", "voltpack"),
                namespace="agents",
            )
        ],
    )
    get = policy.authorize(agent, res("get", "adminapi", group="voltpack.io"))
    assert get.reason == (
        'RBAC: allowed by ClusterRoleBinding "agent-viewer" of ClusterRole "voltpack-viewer" to '
        'ServiceAccount "voltpack/agents"'
    )
    simulate = policy.authorize(agent, res("simulate", "adminapi", group="voltpack.io"))
    assert 'to Group "system:serviceaccounts:agents"' in simulate.reason
    lease = res("update", "leases", group="coordination.k8s.io", namespace="agents")
    assert policy.authorize(agent, lease).reason == (
        'RBAC: allowed by RoleBinding "leases/agents" of Role "leases" to ServiceAccount '
        '"voltpack/agents"'
    )
    stranger = UserInfo(
        "system:serviceaccount:other:voltpack", groups=service_account_groups("other")
    )
    assert not policy.authorize(stranger, res("get", "adminapi", group="voltpack.io")).allowed
    assert not policy.authorize(UserInfo("voltpack"), lease).allowed


def test_missing_roles_are_reported_but_do_not_hide_other_bindings() -> None:
    policy = RbacPolicy(
        cluster_roles=VOLTPACK_ROLES,
        cluster_role_bindings=[
            binding("dangling", "ClusterRole", "gone", subject("User", "alice")),
            binding("viewer", "ClusterRole", "voltpack-viewer", subject("User", "alice")),
        ],
        role_bindings=[
            binding("r", "Role", "missing", subject("User", "alice"), namespace="ns"),
        ],
    )
    assert policy.authorize(ALICE, res("get", "adminapi", group="voltpack.io")).allowed
    denied = policy.authorize(ALICE, res("cap", "adminapi", group="voltpack.io", namespace="ns"))
    assert not denied.allowed
    assert denied.reason == (
        'RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, '
        'role.rbac.authorization.k8s.io "missing" not found]'
    )


def test_a_role_binding_does_not_reach_roles_of_other_namespaces() -> None:
    policy = RbacPolicy(
        roles=[role("team-b", "reader", rule(["get"], [""], ["pods"]))],
        role_bindings=[
            binding("r", "Role", "reader", subject("User", "alice"), namespace="team-a")
        ],
    )
    decision = policy.authorize(ALICE, res("get", "pods", namespace="team-a"))
    assert not decision.allowed
    assert decision.reason == 'RBAC: role.rbac.authorization.k8s.io "reader" not found'


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"matchLabels": {"voltpack.io/aggregate-to-viewer": "true"}}, True),
        ({"matchLabels": {"voltpack.io/aggregate-to-viewer": "false"}}, False),
        (
            {
                "matchExpressions": [
                    {"key": "voltpack.io/aggregate-to-viewer", "operator": "Exists"}
                ]
            },
            True,
        ),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]}, False),
    ],
)
def test_aggregated_cluster_roles_collect_labelled_rules(
    selector: dict[str, Any], expected: bool
) -> None:
    aggregate = cluster_role("viewer-all")
    aggregate["aggregationRule"] = {"clusterRoleSelectors": [selector]}
    part = cluster_role(
        "viewer-part",
        rule(["get"], ["voltpack.io"], ["adminapi"]),
        labels={"voltpack.io/aggregate-to-viewer": "true"},
    )
    policy = RbacPolicy(
        cluster_roles=[aggregate, part],
        cluster_role_bindings=[binding("b", "ClusterRole", "viewer-all", subject("User", "alice"))],
    )
    decision = policy.authorize(ALICE, res("get", "adminapi", group="voltpack.io"))
    assert decision.allowed is expected


def test_rules_for_lists_what_applies_in_a_namespace() -> None:
    policy = RbacPolicy(
        cluster_roles=[
            *VOLTPACK_ROLES,
            cluster_role("health", {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}),
        ],
        roles=[role("team-a", "pod-reader", rule(["list"], [""], ["pods"]))],
        cluster_role_bindings=[
            binding("v", "ClusterRole", "voltpack-viewer", subject("User", "alice")),
            binding("h", "ClusterRole", "health", subject("Group", "system:authenticated")),
        ],
        role_bindings=[
            binding("p", "Role", "pod-reader", subject("User", "alice"), namespace="team-a")
        ],
    )
    resources, urls, errors = policy.rules_for(ALICE, "team-a")
    assert [r.resources for r in resources] == [("adminapi",), ("pods",)]
    assert [r.non_resource_urls for r in urls] == [("/healthz",)]
    assert errors == []
    resources, _, _ = policy.rules_for(ALICE, "team-b")
    assert [r.resources for r in resources] == [("adminapi",)]
