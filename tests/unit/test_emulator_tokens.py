"""Static token files (kube-apiserver's `--token-auth-file`) and who a request is."""

from __future__ import annotations

from typing import Any

import pytest

from voltpack.emulator.access.auth import (
    ANONYMOUS_USER,
    Authenticator,
    RequestIdentity,
    parse_token_file,
    request_user,
)
from voltpack.emulator.access.rbac import RbacPolicy, UserInfo
from voltpack.emulator.errors import ApiError, EmulatorError


def test_token_file_columns_groups_comments_and_blank_lines() -> None:
    tokens = parse_token_file(
        '# demo\n\nt1,alice,u1,"ops, dev"\n  t2 , bob , u2\nt3,carol,,sre,ignored\n', "f.csv"
    )
    assert tokens == {
        "t1": UserInfo("alice", "u1", ("ops", "dev", "system:authenticated")),
        "t2": UserInfo("bob", "u2", ("system:authenticated",)),
        "t3": UserInfo("carol", "", ("sre", "system:authenticated")),
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("t1,alice\n", "tokens.csv:1: expected token,user,uid"),
        ("ok,a,1\n\nt1\n", "tokens.csv:3: expected token,user,uid"),
        (",alice,1\n", "tokens.csv:1: the token (column 1) is empty"),
        ("t1,,1\n", "tokens.csv:1: the user name (column 2) is empty"),
        ("t1,a,1\nt1,b,2\n", "tokens.csv:2: the same token as line 1"),
        ('t1,a,1,"ops\n', "tokens.csv:1: not valid CSV"),
    ],
)
def test_malformed_token_files_name_file_and_line(text: str, message: str) -> None:
    with pytest.raises(EmulatorError) as error:
        parse_token_file(text, "tokens.csv")
    assert str(error.value).startswith(f"token file {message}")


AUTH = Authenticator(
    parse_token_file("t1,alice,u1,ops\nt2,root,u2,system:masters\nt3,imp,u3\n", "f")
)
# user imp may impersonate user bob and group a, nothing else (kube-apiserver's verbs)
IMPERSONATOR = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "bob-impersonator"},
    "rules": [
        {
            "apiGroups": [""],
            "resources": ["users"],
            "verbs": ["impersonate"],
            "resourceNames": ["bob"],
        },
        {
            "apiGroups": [""],
            "resources": ["groups"],
            "verbs": ["impersonate"],
            "resourceNames": ["a"],
        },
    ],
}
BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": "imp"},
    "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "bob-impersonator",
    },
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "imp"}],
}
RBAC = RbacPolicy(cluster_roles=[IMPERSONATOR], cluster_role_bindings=[BINDING]).authorize
ROOT = ("Authorization", "Bearer t2")


def test_requests_without_credentials_are_anonymous() -> None:
    assert request_user(RequestIdentity(), AUTH, RBAC) == ANONYMOUS_USER
    assert ANONYMOUS_USER.groups == ("system:unauthenticated",)


def test_bearer_tokens_name_the_requester() -> None:
    user = request_user(RequestIdentity(authorization="Bearer t1"), AUTH, RBAC)
    assert (user.username, user.groups) == ("alice", ("ops", "system:authenticated"))
    with pytest.raises(ApiError) as unknown:
        request_user(RequestIdentity(authorization="Bearer nope"), AUTH, RBAC)
    assert unknown.value.code == 401


def test_impersonation_headers() -> None:
    headers = [
        ROOT,
        ("Impersonate-User", "bob"),
        ("Impersonate-Group", "a"),
        ("impersonate-group", "b"),
        ("Impersonate-Uid", "42"),
        ("Impersonate-Extra-Team%2Fname", "gpu"),
    ]
    user = request_user(RequestIdentity.from_headers(headers), AUTH, RBAC)
    assert user == UserInfo(
        "bob", "42", ("a", "b", "system:authenticated"), {"team/name": ("gpu",)}
    )
    service_account = request_user(
        RequestIdentity("Bearer t2", impersonate_user="system:serviceaccount:ns:sa"), AUTH, RBAC
    )
    assert service_account.groups == (
        "system:serviceaccounts",
        "system:serviceaccounts:ns",
        "system:authenticated",
    )
    anonymous = request_user(
        RequestIdentity("Bearer t2", impersonate_user="system:anonymous"), AUTH, RBAC
    )
    assert anonymous.groups == ()
    with pytest.raises(ApiError) as groups_only:
        request_user(RequestIdentity(impersonate_groups=("a",)), AUTH, RBAC)
    assert groups_only.value.code == 400 and "Impersonate-User" in groups_only.value.message


def forbidden_impersonation(identity: RequestIdentity) -> str:
    with pytest.raises(ApiError) as refused:
        request_user(identity, AUTH, RBAC)
    assert refused.value.code == 403
    return refused.value.message


def test_anonymous_clients_cannot_impersonate() -> None:
    message = forbidden_impersonation(RequestIdentity(impersonate_user="voltpack-admin"))
    assert message == (
        'users "voltpack-admin" is forbidden: User "system:anonymous" cannot impersonate '
        'resource "users" in API group "" at the cluster scope'
    )
    masters = RequestIdentity(impersonate_user="x", impersonate_groups=("system:masters",))
    assert "cannot impersonate" in forbidden_impersonation(masters)


def test_impersonation_needs_the_verb_on_each_user_group_uid_and_extra() -> None:
    def as_imp(**fields: Any) -> RequestIdentity:
        return RequestIdentity("Bearer t3", **fields)

    bob = request_user(as_imp(impersonate_user="bob", impersonate_groups=("a",)), AUTH, RBAC)
    assert (bob.username, bob.groups) == ("bob", ("a", "system:authenticated"))
    assert 'users "carol"' in forbidden_impersonation(as_imp(impersonate_user="carol"))
    group = as_imp(impersonate_user="bob", impersonate_groups=("a", "system:masters"))
    assert 'groups "system:masters"' in forbidden_impersonation(group)
    uid = as_imp(impersonate_user="bob", impersonate_uid="42")
    assert 'uids.authentication.k8s.io "42"' in forbidden_impersonation(uid)
    extra = as_imp(impersonate_user="bob", impersonate_extra=(("team", "gpu"),))
    assert 'resource "userextras/team"' in forbidden_impersonation(extra)
    account = as_imp(impersonate_user="system:serviceaccount:ns:sa")
    assert 'in the namespace "ns"' in forbidden_impersonation(account)
