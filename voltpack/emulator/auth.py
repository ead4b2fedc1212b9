"""Who a token or a request is: static token files, and the identity of a request.

Static tokens come from a CSV file in kube-apiserver's `--token-auth-file` format, one token
a line:

    token,user,uid,"group1,group2"

(the groups column is optional; blank lines and lines starting with `#` are skipped). Every
authenticated user is also in `system:authenticated`, as kube-apiserver adds it.

The emulator itself still serves anonymous requests; identities matter only for the
"self" reviews (`kubectl auth can-i`, `kubectl auth whoami`), which ask about the requester:
the user of the bearer token it sends, else `system:anonymous`, or whoever the
`Impersonate-User` / `Impersonate-Group` / `Impersonate-Uid` / `Impersonate-Extra-*` headers
name (kubectl's `--as`, `--as-group`, `--as-uid`). Impersonation is trusted as sent: no
`impersonate` permission is checked.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from voltpack.emulator.errors import ApiError, EmulatorError, bad_request
from voltpack.emulator.rbac import (
    ALL_AUTHENTICATED,
    ALL_UNAUTHENTICATED,
    ANONYMOUS,
    UserInfo,
    service_account_groups,
    split_service_account,
    with_group,
)

ANONYMOUS_USER = UserInfo(ANONYMOUS, groups=(ALL_UNAUTHENTICATED,))


def parse_token_file(text: str, source: str) -> dict[str, UserInfo]:
    """Tokens of a `--token-auth-file`; errors name `source:line` and what is wrong."""
    tokens: dict[str, UserInfo] = {}
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"token file {source}:{number}"
        try:
            rows = list(csv.reader(io.StringIO(line), skipinitialspace=True, strict=True))
        except csv.Error as exc:
            raise EmulatorError(f"{where}: not valid CSV ({exc})") from None
        if len(rows) != 1:
            raise EmulatorError(f"{where}: not valid CSV (a quoted field spans lines?)")
        row = [field.strip() for field in rows[0]]
        if len(row) < 3:
            raise EmulatorError(
                f'{where}: expected token,user,uid[,"group1,group2"] (at least 3 columns), '
                f"found {len(row)}"
            )
        token, username, uid = row[0], row[1], row[2]
        if not token:
            raise EmulatorError(f"{where}: the token (column 1) is empty")
        if not username:
            raise EmulatorError(f"{where}: the user name (column 2) is empty")
        if token in tokens:
            raise EmulatorError(
                f"{where}: the same token as line {lines[token]} (tokens must be unique)"
            )
        groups = [g.strip() for g in row[3].split(",")] if len(row) > 3 else []
        tokens[token] = UserInfo(
            username, uid=uid, groups=with_group([g for g in groups if g], ALL_AUTHENTICATED)
        )
        lines[token] = number
    return tokens


def load_token_file(path: Path) -> dict[str, UserInfo]:
    """Read a `--token-auth-file` (see `parse_token_file`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EmulatorError(f"cannot read token file {path}: {exc}") from None
    return parse_token_file(text, str(path))


class Authenticator:
    """Bearer tokens the emulator knows: static tokens (and, if set, a second source)."""

    def __init__(self, tokens: Mapping[str, UserInfo] | None = None) -> None:
        self._tokens = dict(tokens or {})

    def authenticate(self, token: str) -> UserInfo | None:
        """The user a token belongs to, or None for an unknown token."""
        return self._tokens.get(token)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


@dataclass(frozen=True)
class RequestIdentity:
    """The identity headers of one request."""

    authorization: str | None = None
    impersonate_user: str | None = None
    impersonate_groups: tuple[str, ...] = ()
    impersonate_uid: str | None = None
    impersonate_extra: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_headers(cls, items: Iterable[tuple[str, str]]) -> RequestIdentity:
        authorization = None
        user = None
        uid = None
        groups: list[str] = []
        extra: list[tuple[str, str]] = []
        for name, value in items:
            lowered = name.lower()
            if lowered == "authorization":
                authorization = value
            elif lowered == "impersonate-user":
                user = value
            elif lowered == "impersonate-group":
                groups.append(value)
            elif lowered == "impersonate-uid":
                uid = value
            elif lowered.startswith("impersonate-extra-"):
                extra.append((unquote(lowered[len("impersonate-extra-") :]), value))
        return cls(authorization, user, tuple(groups), uid, tuple(extra))


def request_user(identity: RequestIdentity, authenticator: Authenticator) -> UserInfo:
    """Who a request is from: its bearer token's user (or anonymous), or whom it impersonates.

    An impersonated service account (`system:serviceaccount:ns:name`) without
    `Impersonate-Group` headers gets the service-account groups, and every impersonated user
    but `system:anonymous` is in `system:authenticated`, as in kube-apiserver.
    """
    user = ANONYMOUS_USER
    if identity.authorization is not None:
        scheme, _, token = identity.authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            found = authenticator.authenticate(token.strip())
            if found is None:
                raise unauthorized()
            user = found
    if identity.impersonate_user is None:
        if identity.impersonate_groups or identity.impersonate_uid or identity.impersonate_extra:
            raise bad_request(
                "Impersonate-Group, Impersonate-Uid and Impersonate-Extra-* need an "
                "Impersonate-User header"
            )
        return user
    username = identity.impersonate_user
    groups = identity.impersonate_groups
    service_account = split_service_account(username)
    if service_account is not None and not groups:
        groups = service_account_groups(service_account[0])
    if username != ANONYMOUS:
        groups = with_group(groups, ALL_AUTHENTICATED)
    extra: dict[str, tuple[str, ...]] = {}
    for key, value in identity.impersonate_extra:
        extra[key] = (*extra.get(key, ()), value)
    return UserInfo(username, uid=identity.impersonate_uid or "", groups=groups, extra=extra)
