"""Kubernetes RBAC, evaluated as kube-apiserver's RBAC authorizer does it (pure, no I/O).

`RbacPolicy` takes the stored Roles, ClusterRoles, RoleBindings and ClusterRoleBindings (plain
JSON objects) and answers whether a user may do something (`authorize`) and which rules apply
to a user in a namespace (`rules_for`). The semantics follow `k8s.io/kubernetes/plugin/pkg/
auth/authorizer/rbac` and `pkg/apis/rbac/v1/evaluation_helpers.go`:

- ClusterRoleBindings apply everywhere; RoleBindings only to requests in their namespace, and
  a RoleBinding to a ClusterRole grants that role's rules in the binding's namespace only.
- A request for a namespaced resource across all namespaces (namespace "") and every
  non-resource request (`/healthz`, `/metrics`) are matched by ClusterRoleBindings only.
- Subjects: `User` by name, `Group` by membership, `ServiceAccount` by the username
  `system:serviceaccount:<namespace>:<name>` (a RoleBinding's subject without a namespace
  means the binding's namespace).
- Rules: verbs, apiGroups and resources with `*` wildcards, `resource/subresource` and
  `*/subresource`, resourceNames (an empty list means all names), nonResourceURLs with a
  trailing `*` matching any suffix.
- Members of `system:masters` may do everything (kube-apiserver's privileged-group
  authorizer, which runs before RBAC).
- A ClusterRole with an `aggregationRule` also has the rules of the ClusterRoles its
  selectors match, gathered when asked (kube-apiserver's controller writes them into the
  object instead; here nested aggregation is not followed and empty selectors match nothing).

RBAC only ever allows: a request no rule allows gets "no opinion", which a server with RBAC as
its only authorizer reports as not allowed (`denied` stays false).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from voltpack.emulator.objects import JsonObj

RBAC_GROUP = "rbac.authorization.k8s.io"
SYSTEM_MASTERS = "system:masters"
ALL_AUTHENTICATED = "system:authenticated"
ALL_UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"


# --- users ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class UserInfo:
    """Who asks: a user name, an optional uid, and the groups the user belongs to."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self) -> JsonObj:
        """The `UserInfo` of TokenReview and SelfSubjectReview statuses."""
        body: JsonObj = {"username": self.username}
        if self.uid:
            body["uid"] = self.uid
        if self.groups:
            body["groups"] = list(self.groups)
        if self.extra:
            body["extra"] = {key: list(values) for key, values in self.extra.items()}
        return body


def service_account_username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def split_service_account(username: str) -> tuple[str, str] | None:
    """(namespace, name) of `system:serviceaccount:<namespace>:<name>`, else None."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, sep, name = username[len(SERVICE_ACCOUNT_PREFIX) :].partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return namespace, name


def service_account_groups(namespace: str) -> tuple[str, ...]:
    """The groups every service account of a namespace is in once authenticated."""
    return (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}", ALL_AUTHENTICATED)


def with_group(groups: Iterable[str], group: str) -> tuple[str, ...]:
    listed = tuple(groups)
    return listed if group in listed else (*listed, group)


# --- what is asked -------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceAttributes:
    """A request on a resource; namespace "" asks about all namespaces (or a cluster resource)."""

    verb: str
    resource: str
    group: str = ""
    namespace: str = ""
    subresource: str = ""
    name: str = ""
    version: str = ""


@dataclass(frozen=True)
class NonResourceAttributes:
    """A request on a path that is not a resource: `/healthz`, `/metrics`, `/apis`."""

    verb: str
    path: str


Attributes = ResourceAttributes | NonResourceAttributes


@dataclass(frozen=True)
class Decision:
    """The answer to one access review; `reason` says which binding allowed it, if any."""

    allowed: bool
    reason: str = ""
    denied: bool = False


# --- rules ---------------------------------------------------------------------------------


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str))


@dataclass(frozen=True)
class PolicyRule:
    """One rule of a Role or ClusterRole."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, rule: Any) -> PolicyRule:
        if not isinstance(rule, dict):
            return cls()
        return cls(
            verbs=_strings(rule.get("verbs")),
            api_groups=_strings(rule.get("apiGroups")),
            resources=_strings(rule.get("resources")),
            resource_names=_strings(rule.get("resourceNames")),
            non_resource_urls=_strings(rule.get("nonResourceURLs")),
        )

    def to_json(self) -> JsonObj:
        body: JsonObj = {"verbs": list(self.verbs)}
        if self.api_groups:
            body["apiGroups"] = list(self.api_groups)
        if self.resources:
            body["resources"] = list(self.resources)
        if self.resource_names:
            body["resourceNames"] = list(self.resource_names)
        if self.non_resource_urls:
            body["nonResourceURLs"] = list(self.non_resource_urls)
        return body

    def verb_matches(self, verb: str) -> bool:
        return "*" in self.verbs or verb in self.verbs

    def api_group_matches(self, group: str) -> bool:
        return "*" in self.api_groups or group in self.api_groups

    def resource_matches(self, resource: str, subresource: str) -> bool:
        combined = f"{resource}/{subresource}" if subresource else resource
        for allowed in self.resources:
            if allowed in ("*", combined):
                return True
            if subresource and allowed == f"*/{subresource}":
                return True
        return False

    def resource_name_matches(self, name: str) -> bool:
        return not self.resource_names or name in self.resource_names

    def non_resource_url_matches(self, path: str) -> bool:
        for url in self.non_resource_urls:
            if url in ("*", path):
                return True
            if url.endswith("*") and path.startswith(url.rstrip("*")):
                return True
        return False

    def allows(self, attributes: Attributes) -> bool:
        if not self.verb_matches(attributes.verb):
            return False
        if isinstance(attributes, NonResourceAttributes):
            return self.non_resource_url_matches(attributes.path)
        return (
            self.api_group_matches(attributes.group)
            and self.resource_matches(attributes.resource, attributes.subresource)
            and self.resource_name_matches(attributes.name)
        )


# --- bindings ------------------------------------------------------------------------------


def _subject_applies(subject: Any, user: UserInfo, binding_namespace: str) -> bool:
    if not isinstance(subject, dict):
        return False
    kind = subject.get("kind")
    name = subject.get("name")
    if not isinstance(name, str):
        return False
    if kind == "User":
        return user.username == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        if not namespace:
            return False
        return user.username == service_account_username(str(namespace), name)
    return False


def describe_subject(subject: JsonObj, binding_namespace: str) -> str:
    """`User "alice"`, `Group "ops"`, `ServiceAccount "agent/voltpack"` (as kube-apiserver)."""
    kind = subject.get("kind")
    name = subject.get("name")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or binding_namespace}"'
    return f'{kind} "{name}"'


def _name(obj: JsonObj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _namespace(obj: JsonObj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


@dataclass(frozen=True)
class _Grant:
    """Rules that reach a user through one binding, with how they got there."""

    source: str
    rules: tuple[PolicyRule, ...]


class RbacPolicy:
    """A snapshot of the RBAC objects of a cluster, ready to answer access reviews."""

    def __init__(
        self,
        *,
        cluster_roles: Iterable[JsonObj] = (),
        roles: Iterable[JsonObj] = (),
        cluster_role_bindings: Iterable[JsonObj] = (),
        role_bindings: Iterable[JsonObj] = (),
    ) -> None:
        self._cluster_roles = {_name(obj): obj for obj in cluster_roles}
        self._roles = {(_namespace(obj), _name(obj)): obj for obj in roles}
        self._cluster_role_bindings = sorted(cluster_role_bindings, key=_name)
        self._role_bindings = sorted(role_bindings, key=lambda obj: (_namespace(obj), _name(obj)))

    def _role_rules(self, role_ref: Any, namespace: str) -> tuple[PolicyRule, ...] | str:
        """The rules a roleRef names, or the error if the role does not exist."""
        ref = role_ref if isinstance(role_ref, dict) else {}
        kind = ref.get("kind")
        name = str(ref.get("name") or "")
        if kind == "ClusterRole":
            role = self._cluster_roles.get(name)
            if role is None:
                return f'clusterrole.{RBAC_GROUP} "{name}" not found'
            return self._cluster_role_rules(role)
        if kind == "Role":
            role = self._roles.get((namespace, name))
            if role is None:
                return f'role.{RBAC_GROUP} "{name}" not found'
            return tuple(PolicyRule.from_json(rule) for rule in role.get("rules") or [])
        return f"unsupported role reference kind: {kind!r}"

    def _cluster_role_rules(self, role: JsonObj) -> tuple[PolicyRule, ...]:
        rules = [PolicyRule.from_json(rule) for rule in role.get("rules") or []]
        aggregation = role.get("aggregationRule")
        if isinstance(aggregation, dict):
            selectors = [s for s in aggregation.get("clusterRoleSelectors") or [] if s]
            for other_name, other in sorted(self._cluster_roles.items()):
                if other_name == _name(role) or other.get("aggregationRule"):
                    continue
                labels = (other.get("metadata") or {}).get("labels") or {}
                if any(label_selector_matches(selector, labels) for selector in selectors):
                    rules.extend(PolicyRule.from_json(rule) for rule in other.get("rules") or [])
        return tuple(rules)

    def _grants(self, user: UserInfo, namespace: str) -> tuple[list[_Grant], list[str]]:
        """Every binding that applies to `user` in `namespace`, in kube-apiserver's order."""
        grants: list[_Grant] = []
        errors: list[str] = []
        for binding in self._cluster_role_bindings:
            subject = _first_applying(binding, user, "")
            if subject is None:
                continue
            rules = self._role_rules(binding.get("roleRef"), "")
            if isinstance(rules, str):
                errors.append(rules)
                continue
            ref = binding.get("roleRef") or {}
            source = (
                f'ClusterRoleBinding "{_name(binding)}" of {ref.get("kind")} '
                f'"{ref.get("name")}" to {describe_subject(subject, "")}'
            )
            grants.append(_Grant(source, rules))
        if namespace:
            for binding in self._role_bindings:
                if _namespace(binding) != namespace:
                    continue
                subject = _first_applying(binding, user, namespace)
                if subject is None:
                    continue
                rules = self._role_rules(binding.get("roleRef"), namespace)
                if isinstance(rules, str):
                    errors.append(rules)
                    continue
                ref = binding.get("roleRef") or {}
                source = (
                    f'RoleBinding "{_name(binding)}/{namespace}" of {ref.get("kind")} '
                    f'"{ref.get("name")}" to {describe_subject(subject, namespace)}'
                )
                grants.append(_Grant(source, rules))
        return grants, errors

    def authorize(self, user: UserInfo, attributes: Attributes) -> Decision:
        """Whether `user` may do what `attributes` describe, and which binding allows it."""
        if SYSTEM_MASTERS in user.groups:
            return Decision(True, f'allowed: member of group "{SYSTEM_MASTERS}"')
        namespace = attributes.namespace if isinstance(attributes, ResourceAttributes) else ""
        grants, errors = self._grants(user, namespace)
        for grant in grants:
            if any(rule.allows(attributes) for rule in grant.rules):
                return Decision(True, f"RBAC: allowed by {grant.source}")
        if not errors:
            return Decision(False)
        listed = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        return Decision(False, f"RBAC: {listed}")

    def rules_for(
        self, user: UserInfo, namespace: str
    ) -> tuple[list[PolicyRule], list[PolicyRule], list[str]]:
        """(resource rules, non-resource rules, errors) that apply to `user` in `namespace`."""
        if SYSTEM_MASTERS in user.groups:
            everything = PolicyRule(verbs=("*",), api_groups=("*",), resources=("*",))
            return [everything], [PolicyRule(verbs=("*",), non_resource_urls=("*",))], []
        grants, errors = self._grants(user, namespace)
        resource_rules: list[PolicyRule] = []
        non_resource_rules: list[PolicyRule] = []
        for grant in grants:
            for rule in grant.rules:
                if rule.resources:
                    resource_rules.append(rule)
                if rule.non_resource_urls:
                    non_resource_rules.append(rule)
        return resource_rules, non_resource_rules, errors


def _first_applying(binding: JsonObj, user: UserInfo, namespace: str) -> JsonObj | None:
    for subject in binding.get("subjects") or []:
        if _subject_applies(subject, user, namespace):
            return dict(subject)
    return None


def label_selector_matches(selector: Any, labels: Mapping[str, Any]) -> bool:
    """A `metav1.LabelSelector` (matchLabels, matchExpressions) against labels."""
    if not isinstance(selector, dict):
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        if not isinstance(expression, dict):
            return False
        key = str(expression.get("key") or "")
        operator = expression.get("operator")
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True
