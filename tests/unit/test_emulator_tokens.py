"""Static token files (kube-apiserver's `--token-auth-file`) and who a request is."""

from __future__ import annotations

import pytest

from voltpack.emulator.auth import (
    ANONYMOUS_USER,
    Authenticator,
    RequestIdentity,
    parse_token_file,
    request_user,
)
from voltpack.emulator.errors import ApiError, EmulatorError
from voltpack.emulator.rbac import UserInfo


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


AUTH = Authenticator(parse_token_file("t1,alice,u1,ops\n", "f"))


def test_requests_without_credentials_are_anonymous() -> None:
    assert request_user(RequestIdentity(), AUTH) == ANONYMOUS_USER
    assert ANONYMOUS_USER.groups == ("system:unauthenticated",)


def test_bearer_tokens_name_the_requester() -> None:
    user = request_user(RequestIdentity(authorization="Bearer t1"), AUTH)
    assert (user.username, user.groups) == ("alice", ("ops", "system:authenticated"))
    with pytest.raises(ApiError) as unknown:
        request_user(RequestIdentity(authorization="Bearer nope"), AUTH)
    assert unknown.value.code == 401


def test_impersonation_headers() -> None:
    headers = [
        ("Impersonate-User", "bob"),
        ("Impersonate-Group", "a"),
        ("impersonate-group", "b"),
        ("Impersonate-Uid", "42"),
        ("Impersonate-Extra-Team%2Fname", "gpu"),
    ]
    user = request_user(RequestIdentity.from_headers(headers), AUTH)
    assert user == UserInfo(
        "bob", "42", ("a", "b", "system:authenticated"), {"team/name": ("gpu",)}
    )
    service_account = request_user(
        RequestIdentity(impersonate_user="system:serviceaccount:ns:sa"), AUTH
    )
    assert service_account.groups == (
        "system:serviceaccounts",
        "system:serviceaccounts:ns",
        "system:authenticated",
    )
    anonymous = request_user(RequestIdentity(impersonate_user="system:anonymous"), AUTH)
    assert anonymous.groups == ()
    with pytest.raises(ApiError) as groups_only:
        request_user(RequestIdentity(impersonate_groups=("a",)), AUTH)
    assert groups_only.value.code == 400 and "Impersonate-User" in groups_only.value.message
