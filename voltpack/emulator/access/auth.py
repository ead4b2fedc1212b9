"""Who a token or a request is: static token files, and the identity of a request.

Static tokens come from a CSV file in kube-apiserver's `--token-auth-file` format, one token
a line:

    token,user,uid,"group1,group2"

(the groups column is optional; blank lines and lines starting with `#` are skipped). Every
authenticated user is also in `system:authenticated`, as kube-apiserver adds it.

Service accounts get tokens from the TokenRequest API (`serviceaccounts/<name>/token`,
`kubectl create token`): JWTs with the claims of kube-apiserver's bound tokens (`iss`, `sub`,
`aud`, `exp`, `kubernetes.io`), signed with HS256 and a key each emulator draws at start
(kube-apiserver signs with RS256 and a key pair). A token is valid until it expires or its
service account is deleted or recreated (the uid in the token no longer matches).

The emulator itself still serves anonymous requests; identities matter only for the
"self" reviews (`kubectl auth can-i`, `kubectl auth whoami`), which ask about the requester:
the user of the bearer token it sends, else `system:anonymous`, or whoever the
`Impersonate-User` / `Impersonate-Group` / `Impersonate-Uid` / `Impersonate-Extra-*` headers
name (kubectl's `--as`, `--as-group`, `--as-uid`). Impersonation is authorized as
kube-apiserver's impersonation filter does it: the requester (its token's user, or anonymous)
needs the `impersonate` verb on `users` (or `serviceaccounts` in the account's namespace),
on `groups`, on `uids` and on `userextras/<key>` (group `authentication.k8s.io`) for each
value it names, else 403; `system:masters` may impersonate anyone.
"""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
import hmac
import io
import json
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from voltpack.emulator.access.rbac import (
    ALL_AUTHENTICATED,
    ALL_UNAUTHENTICATED,
    ANONYMOUS,
    Attributes,
    Decision,
    ResourceAttributes,
    UserInfo,
    service_account_groups,
    service_account_username,
    split_service_account,
    with_group,
)
from voltpack.emulator.errors import ApiError, EmulatorError, bad_request, forbidden

ISSUER = "https://kubernetes.default.svc.cluster.local"
"""`iss` of service-account tokens, and their audience when a TokenRequest names none."""
DEFAULT_TOKEN_TTL_S = 3600
MIN_TOKEN_TTL_S = 600

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


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Authenticated:
    """A token's user and the audiences it is valid for (empty: any, as static tokens)."""

    user: UserInfo
    audiences: tuple[str, ...] = ()


ServiceAccountLookup = Callable[[str, str], str | None]
"""(namespace, name) -> the service account's uid, or None if it does not exist."""


class Authenticator:
    """Bearer tokens the emulator knows: static tokens and service-account tokens it issued."""

    def __init__(
        self,
        tokens: Mapping[str, UserInfo] | None = None,
        *,
        service_accounts: ServiceAccountLookup | None = None,
        clock: Callable[[], datetime] | None = None,
        key: bytes | None = None,
    ) -> None:
        self._tokens = dict(tokens or {})
        self._service_accounts = service_accounts
        self._clock = clock
        self._key = key or secrets.token_bytes(32)

    def authenticate(self, token: str) -> UserInfo | None:
        """The user a token belongs to, or None for an unknown token."""
        found = self.review(token)
        return None if isinstance(found, str) else found.user

    def review(self, token: str) -> Authenticated | str:
        """Who a token is and for which audiences, or why it is not accepted."""
        user = self._tokens.get(token)
        if user is not None:
            return Authenticated(user)
        if token.count(".") == 2 and self._service_accounts is not None:
            return self._service_account(token)
        return "invalid bearer token"

    def issue(
        self, namespace: str, name: str, uid: str, audiences: tuple[str, ...], ttl_s: int
    ) -> tuple[str, int]:
        """A signed token for a service account; returns it and its expiry (Unix seconds)."""
        now = int(self._now().timestamp())
        claims = {
            "aud": list(audiences),
            "exp": now + ttl_s,
            "iat": now,
            "nbf": now,
            "iss": ISSUER,
            "sub": service_account_username(namespace, name),
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
        }
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        return f"{header}.{payload}.{self._sign(header, payload)}", now + ttl_s

    def _sign(self, header: str, payload: str) -> str:
        digest = hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return _b64(digest)

    def _now(self) -> datetime:
        if self._clock is None:
            raise EmulatorError("service-account tokens need a clock")
        return self._clock()

    def _service_account(self, token: str) -> Authenticated | str:
        header, payload, signature = token.split(".")
        if not hmac.compare_digest(signature, self._sign(header, payload)):
            return "invalid bearer token"
        try:
            claims: Any = json.loads(_unb64(payload))
            info = claims["kubernetes.io"]
            namespace = str(info["namespace"])
            name = str(info["serviceaccount"]["name"])
            uid = str(info["serviceaccount"]["uid"])
            expires = int(claims["exp"])
            audiences = tuple(str(a) for a in claims.get("aud") or [])
        except (ValueError, KeyError, TypeError, binascii.Error):
            return "invalid bearer token"
        if self._now().timestamp() >= expires:
            return "invalid bearer token, service account token has expired"
        assert self._service_accounts is not None
        current = self._service_accounts(namespace, name)
        if current is None:
            return f'invalid bearer token, serviceaccounts "{name}" not found'
        if current != uid:
            return (
                f"invalid bearer token, service account UID ({uid}) does not match the "
                f"service account's UID ({current})"
            )
        user = UserInfo(
            service_account_username(namespace, name),
            uid=uid,
            groups=service_account_groups(namespace),
        )
        return Authenticated(user, audiences)


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


Authorize = Callable[[UserInfo, Attributes], Decision]
"""Whether a user may do something (e.g. `RbacPolicy.authorize`)."""
AUTHENTICATION_GROUP = "authentication.k8s.io"


def _impersonations(identity: RequestIdentity) -> list[ResourceAttributes]:
    """What impersonating `identity` asks to be allowed, as kube-apiserver asks it."""
    assert identity.impersonate_user is not None
    username = identity.impersonate_user
    service_account = split_service_account(username)
    wanted = [
        ResourceAttributes("impersonate", "serviceaccounts", namespace=service_account[0],
                           name=service_account[1])
        if service_account is not None
        else ResourceAttributes("impersonate", "users", name=username)
    ]  # fmt: skip
    wanted += [
        ResourceAttributes("impersonate", "groups", name=g) for g in identity.impersonate_groups
    ]
    if identity.impersonate_uid:
        wanted.append(
            ResourceAttributes(
                "impersonate", "uids", group=AUTHENTICATION_GROUP, name=identity.impersonate_uid
            )
        )
    for key, value in identity.impersonate_extra:
        wanted.append(
            ResourceAttributes(
                "impersonate", "userextras", group=AUTHENTICATION_GROUP, subresource=key, name=value
            )
        )
    return wanted


def _check_impersonation(
    requester: UserInfo, identity: RequestIdentity, authorize: Authorize
) -> None:
    for attributes in _impersonations(identity):
        if not authorize(requester, attributes).allowed:
            resource = attributes.resource
            if attributes.subresource:
                resource = f"{resource}/{attributes.subresource}"
            scope = (
                f'in the namespace "{attributes.namespace}"'
                if attributes.namespace
                else "at the cluster scope"
            )
            raise forbidden(
                resource,
                attributes.group,
                attributes.name,
                f'User "{requester.username}" cannot impersonate resource "{resource}" in API '
                f'group "{attributes.group}" {scope}',
            )


def request_user(
    identity: RequestIdentity, authenticator: Authenticator, authorize: Authorize
) -> UserInfo:
    """Who a request is from: its bearer token's user (or anonymous), or whom it impersonates.

    Impersonation needs the `impersonate` verb on what it names (`authorize` decides, 403
    without). An impersonated service account (`system:serviceaccount:ns:name`) without
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
    _check_impersonation(user, identity, authorize)
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
