"""Who calls the API, and may they: bearer tokens, roles and voltpack's own verbs.

Every route needs one verb on voltpack's virtual resource `adminapi` in the API group
`voltpack.io`: `get` (role viewer), `dryrun` and `simulate` (role operator), `apply` and `cap`
(role admin). Two back ends:

- Kubernetes: the token is checked with a TokenReview, the verb with a SubjectAccessReview, so
  RBAC (ClusterRoles binding those verbs) decides; this is what the Helm chart installs.
- A static token file (for the demo and for clusters without that RBAC): CSV lines
  `token,user,role`; each role includes the verbs of the roles before it.
"""

from __future__ import annotations

import csv
import hmac
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from kubernetes.client import (
    AuthenticationV1Api,
    AuthorizationV1Api,
    V1ResourceAttributes,
    V1SubjectAccessReview,
    V1SubjectAccessReviewSpec,
    V1TokenReview,
    V1TokenReviewSpec,
)
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from voltpack.model.errors import VoltpackError

API_GROUP = "voltpack.io"
API_RESOURCE = "adminapi"
Verb = Literal["get", "dryrun", "simulate", "apply", "cap"]
ROLE_VERBS: dict[str, tuple[Verb, ...]] = {
    "viewer": ("get",),
    "operator": ("get", "dryrun", "simulate"),
    "admin": ("get", "dryrun", "simulate", "apply", "cap"),
}


class AuthConfigError(VoltpackError):
    """The token file (or the auth settings) cannot be used."""


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""


@dataclass(frozen=True)
class Verdict:
    """An authorization answer with its reason."""

    allowed: bool
    reason: str


class AuthUnavailableError(Exception):
    """The authentication or authorization back end could not be asked."""


class Authenticator(Protocol):
    """Turns a bearer token into a principal (None: not authenticated)."""

    def authenticate(self, token: str) -> Principal | None: ...


class Authorizer(Protocol):
    """Decides whether a principal may use a verb."""

    def authorize(self, principal: Principal, verb: Verb) -> Verdict: ...


@dataclass
class StaticTokens:
    """Tokens from a CSV file `token,user,role`; authenticates and authorizes by role."""

    roles_by_token: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def from_file(cls, path: Path) -> StaticTokens:
        """Read the file; AuthConfigError naming the line for a malformed entry."""
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise AuthConfigError(f"{path}: cannot read the token file: {exc.strerror}") from None
        tokens: dict[str, tuple[str, str]] = {}
        for line, row in enumerate(csv.reader(text.splitlines()), start=1):
            if not row or row[0].startswith("#"):
                continue
            if len(row) != 3:
                raise AuthConfigError(f"{path}:{line}: expected token,user,role")
            token, user, role = (part.strip() for part in row)
            if not token or not user:
                raise AuthConfigError(f"{path}:{line}: token and user must not be empty")
            if role not in ROLE_VERBS:
                raise AuthConfigError(
                    f"{path}:{line}: role {role!r} is not one of {', '.join(ROLE_VERBS)}"
                )
            if token in tokens:
                raise AuthConfigError(f"{path}:{line}: the token repeats an earlier line's")
            tokens[token] = (user, role)
        if not tokens:
            raise AuthConfigError(f"{path}: no tokens")
        return cls(tokens)

    def authenticate(self, token: str) -> Principal | None:
        """The token's user, compared in constant time."""
        for known, (user, role) in self.roles_by_token.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return Principal(user=user, groups=(f"voltpack:{role}",))
        return None

    def authorize(self, principal: Principal, verb: Verb) -> Verdict:
        """Allowed when the principal's role includes the verb."""
        for group in principal.groups:
            role = group.removeprefix("voltpack:")
            if verb in ROLE_VERBS.get(role, ()):
                return Verdict(True, f"role {role} of user {principal.user} includes {verb}")
        roles = [g.removeprefix("voltpack:") for g in principal.groups]
        return Verdict(False, f"user {principal.user} (roles {roles}) may not {verb}")


class KubernetesAuth:
    """TokenReview and SubjectAccessReview through the official Kubernetes client."""

    def __init__(self, api_client: object) -> None:
        self._authn = AuthenticationV1Api(api_client)
        self._authz = AuthorizationV1Api(api_client)

    def authenticate(self, token: str) -> Principal | None:
        """Ask the API server who holds this token."""
        review = V1TokenReview(spec=V1TokenReviewSpec(token=token))
        try:
            answer = self._authn.create_token_review(review)
        except (ApiException, HTTPError, OSError) as exc:
            raise AuthUnavailableError(f"TokenReview failed: {exc}") from None
        status = answer.status
        if status is None or not status.authenticated or status.user is None:
            return None
        user = status.user
        return Principal(
            user=user.username or "", groups=tuple(user.groups or ()), uid=user.uid or ""
        )

    def authorize(self, principal: Principal, verb: Verb) -> Verdict:
        """Ask the API server's authorizer (RBAC) about voltpack's verb."""
        review = V1SubjectAccessReview(
            spec=V1SubjectAccessReviewSpec(
                user=principal.user,
                groups=list(principal.groups),
                uid=principal.uid or None,
                resource_attributes=V1ResourceAttributes(
                    group=API_GROUP, resource=API_RESOURCE, verb=verb
                ),
            )
        )
        try:
            answer = self._authz.create_subject_access_review(review)
        except (ApiException, HTTPError, OSError) as exc:
            raise AuthUnavailableError(f"SubjectAccessReview failed: {exc}") from None
        status = answer.status
        allowed = bool(status and status.allowed)
        reason = (status.reason if status else None) or ("allowed" if allowed else "denied")
        return Verdict(allowed, reason)
