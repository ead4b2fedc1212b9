"""The review APIs: TokenReview, SubjectAccessReview and their self/local variants; TokenRequest.

A review is created and answered in one call and never stored, as in kube-apiserver: the
response is the request with `status` filled in (201 Created). Bodies are checked as the API
server checks them: a wrong kind or a field of the wrong type is a 400, a review that asks
nothing (no resourceAttributes or nonResourceAttributes, no user or group) a 422 naming the
field.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from voltpack.emulator.access.auth import (
    DEFAULT_TOKEN_TTL_S,
    ISSUER,
    MIN_TOKEN_TTL_S,
    Authenticator,
)
from voltpack.emulator.access.rbac import (
    Attributes,
    NonResourceAttributes,
    RbacPolicy,
    ResourceAttributes,
    UserInfo,
    service_account_groups,
    split_service_account,
)
from voltpack.emulator.errors import Cause, bad_request, invalid
from voltpack.emulator.objects import JsonObj, timestamp
from voltpack.emulator.resources import (
    LOCALSUBJECTACCESSREVIEWS,
    SELFSUBJECTACCESSREVIEWS,
    SELFSUBJECTREVIEWS,
    SELFSUBJECTRULESREVIEWS,
    SUBJECTACCESSREVIEWS,
    TOKENREVIEWS,
    ResourceType,
)

TOKENREQUESTS = ResourceType(
    "authentication.k8s.io", "v1", "TokenRequest", "tokenrequests", "", namespaced=True
)
"""The kind of `serviceaccounts/<name>/token` bodies (not a resource of its own)."""

_RESOURCE_FIELDS = ("namespace", "verb", "group", "version", "resource", "subresource", "name")


def _decode(rtype: ResourceType, body: Any) -> JsonObj:
    if not isinstance(body, dict):
        raise bad_request(
            f"the body of a {rtype.kind} must be a JSON or YAML object with apiVersion "
            f"{rtype.api_version}, kind {rtype.kind} and a spec"
        )
    kind = body.get("kind")
    api_version = body.get("apiVersion")
    if kind and kind != rtype.kind:
        raise bad_request(
            f'{kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
            f'no kind "{kind}" is registered for the request'
        )
    if api_version and api_version != rtype.api_version:
        raise bad_request(
            f"the API version in the data ({api_version}) does not match the expected "
            f"API version ({rtype.api_version})"
        )
    spec = body.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise bad_request(f"error decoding {rtype.kind}: spec must be an object")
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise bad_request(f"error decoding {rtype.kind}: metadata must be an object")
    shown_metadata = {k: v for k, v in (metadata or {}).items() if v is not None}
    return {
        "kind": rtype.kind,
        "apiVersion": rtype.api_version,
        "metadata": shown_metadata,
        "spec": _drop_nulls(copy.deepcopy(spec)),
    }


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _string(kind: str, container: JsonObj, key: str, path: str) -> str:
    value = container.get(key, "")
    if not isinstance(value, str):
        raise bad_request(f"error decoding {kind}: {path}.{key} must be a string, got {value!r}")
    return value


def _string_list(kind: str, container: JsonObj, key: str, path: str) -> tuple[str, ...]:
    value = container.get(key) or []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise bad_request(
            f"error decoding {kind}: {path}.{key} must be a list of strings, got {value!r}"
        )
    return tuple(value)


# --- authentication ----------------------------------------------------------------------------


def token_review(body: Any, authenticator: Authenticator) -> JsonObj:
    """Answer a TokenReview: who the token belongs to, or why it is not accepted."""
    review = _decode(TOKENREVIEWS, body)
    spec = review["spec"]
    token = _string(TOKENREVIEWS.kind, spec, "token", "spec")
    audiences = _string_list(TOKENREVIEWS.kind, spec, "audiences", "spec")
    if not token:
        raise bad_request("token is required for TokenReview in authentication")
    found = authenticator.review(token)
    if isinstance(found, str):
        review["status"] = {"authenticated": False, "user": {}, "error": found}
        return review
    wanted = audiences or (ISSUER,)
    valid_for = found.audiences or (ISSUER,)
    matching = [audience for audience in wanted if audience in valid_for]
    if not matching:
        review["status"] = {
            "authenticated": False,
            "user": {},
            "error": f"token audiences {list(valid_for)} is invalid for the target audiences "
            f"{list(wanted)}",
        }
        return review
    review["status"] = {"authenticated": True, "user": found.user.to_json(), "audiences": matching}
    return review


def token_request(
    body: Any, account: JsonObj, authenticator: Authenticator, now: datetime
) -> JsonObj:
    """Issue a token for a service account (`serviceaccounts/<name>/token`)."""
    rtype = TOKENREQUESTS
    request = _decode(rtype, body)
    spec = request["spec"]
    audiences = _string_list(rtype.kind, spec, "audiences", "spec") or (ISSUER,)
    ttl_s = spec.get("expirationSeconds", DEFAULT_TOKEN_TTL_S)
    if not isinstance(ttl_s, int) or isinstance(ttl_s, bool):
        raise bad_request("error decoding TokenRequest: spec.expirationSeconds must be an integer")
    if ttl_s < MIN_TOKEN_TTL_S:
        raise invalid(
            rtype.kind,
            rtype.group,
            "",
            [
                Cause(
                    "spec.expirationSeconds",
                    "FieldValueInvalid",
                    f"Invalid value: {ttl_s}: may not specify a duration less than 10 minutes",
                )
            ],
        )
    metadata = account["metadata"]
    namespace, name = str(metadata["namespace"]), str(metadata["name"])
    token, expires = authenticator.issue(namespace, name, str(metadata["uid"]), audiences, ttl_s)
    request["metadata"] = {
        "name": name,
        "namespace": namespace,
        "creationTimestamp": timestamp(now),
    }
    request["spec"] = {"audiences": list(audiences), "expirationSeconds": ttl_s}
    request["status"] = {
        "token": token,
        "expirationTimestamp": timestamp(datetime.fromtimestamp(expires, UTC)),
    }
    return request


def self_subject_review(body: Any, requester: UserInfo, now: datetime | None = None) -> JsonObj:
    """Answer a SelfSubjectReview (`kubectl auth whoami`): the requester's user info."""
    review = _decode(SELFSUBJECTREVIEWS, body)
    review.pop("spec", None)
    review["metadata"]["creationTimestamp"] = timestamp(now or datetime.now(UTC))
    review["status"] = {"userInfo": requester.to_json()}
    return review


# --- authorization -----------------------------------------------------------------------------


def _attributes(rtype: ResourceType, spec: JsonObj) -> tuple[Attributes, list[Cause]]:
    kind = rtype.kind
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    causes: list[Cause] = []
    if resource is not None and non_resource is not None:
        causes.append(
            Cause(
                "spec.nonResourceAttributes",
                "FieldValueInvalid",
                "Invalid value: cannot be specified in combination with resourceAttributes",
            )
        )
    if resource is None and non_resource is None:
        causes.append(
            Cause(
                "spec.resourceAttributes",
                "FieldValueInvalid",
                "Invalid value: exactly one of nonResourceAttributes or resourceAttributes "
                "must be specified",
            )
        )
    if resource is not None:
        if not isinstance(resource, dict):
            raise bad_request(f"error decoding {kind}: spec.resourceAttributes must be an object")
        values = {
            key: _string(kind, resource, key, "spec.resourceAttributes") for key in _RESOURCE_FIELDS
        }
        return ResourceAttributes(**values), causes
    if non_resource is not None and not isinstance(non_resource, dict):
        raise bad_request(f"error decoding {kind}: spec.nonResourceAttributes must be an object")
    fields = non_resource or {}
    return (
        NonResourceAttributes(
            verb=_string(kind, fields, "verb", "spec.nonResourceAttributes"),
            path=_string(kind, fields, "path", "spec.nonResourceAttributes"),
        ),
        causes,
    )


def _status(policy: RbacPolicy, user: UserInfo, attributes: Attributes) -> JsonObj:
    decision = policy.authorize(user, attributes)
    status: JsonObj = {"allowed": decision.allowed, "denied": decision.denied}
    if decision.reason:
        status["reason"] = decision.reason
    return status


def _user_of_spec(kind: str, spec: JsonObj) -> UserInfo:
    """The user a (Local)SubjectAccessReview asks about.

    A service account given without groups is taken with its service-account groups
    (`system:serviceaccounts`, `system:serviceaccounts:<ns>`, `system:authenticated`), as
    if it had authenticated; kube-apiserver evaluates exactly the groups sent.
    """
    username = _string(kind, spec, "user", "spec")
    groups = _string_list(kind, spec, "groups", "spec")
    uid = _string(kind, spec, "uid", "spec")
    extra_raw = spec.get("extra") or {}
    if not isinstance(extra_raw, dict):
        raise bad_request(f"error decoding {kind}: spec.extra must be a map of string lists")
    extra = {str(key): _string_list(kind, extra_raw, key, "spec.extra") for key in extra_raw}
    service_account = split_service_account(username)
    if service_account is not None and not groups:
        groups = service_account_groups(service_account[0])
    return UserInfo(username, uid=uid, groups=groups, extra=extra)


def subject_access_review(body: Any, policy: RbacPolicy) -> JsonObj:
    """Answer a SubjectAccessReview: may `spec.user` (in `spec.groups`) do this?"""
    review = _decode(SUBJECTACCESSREVIEWS, body)
    spec = review["spec"]
    attributes, causes = _attributes(SUBJECTACCESSREVIEWS, spec)
    user = _user_of_spec(SUBJECTACCESSREVIEWS.kind, spec)
    if not user.username and not user.groups:
        causes.append(
            Cause(
                "spec.user",
                "FieldValueInvalid",
                'Invalid value: "": at least one of user or group must be specified',
            )
        )
    if causes:
        raise invalid(SUBJECTACCESSREVIEWS.kind, SUBJECTACCESSREVIEWS.group, "", causes)
    review["status"] = _status(policy, user, attributes)
    return review


def local_subject_access_review(body: Any, namespace: str, policy: RbacPolicy) -> JsonObj:
    """A SubjectAccessReview limited to one namespace (the namespace of the URL)."""
    rtype = LOCALSUBJECTACCESSREVIEWS
    review = _decode(rtype, body)
    given = review["metadata"].get("namespace")
    if given and given != namespace:
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    review["metadata"]["namespace"] = namespace
    spec = review["spec"]
    attributes, causes = _attributes(rtype, spec)
    if spec.get("nonResourceAttributes") is not None:
        causes.append(
            Cause(
                "spec.nonResourceAttributes",
                "FieldValueInvalid",
                "Invalid value: disallowed on this kind of request",
            )
        )
    elif isinstance(attributes, ResourceAttributes) and attributes.namespace != namespace:
        raise bad_request(f"spec.resourceAttributes.namespace must match namespace: {namespace}")
    user = _user_of_spec(rtype.kind, spec)
    if not user.username and not user.groups:
        causes.append(
            Cause(
                "spec.user",
                "FieldValueInvalid",
                'Invalid value: "": at least one of user or group must be specified',
            )
        )
    if causes:
        raise invalid(rtype.kind, rtype.group, "", causes)
    review["status"] = _status(policy, user, attributes)
    return review


def self_subject_access_review(body: Any, requester: UserInfo, policy: RbacPolicy) -> JsonObj:
    """May the requester do this? (`kubectl auth can-i`)"""
    review = _decode(SELFSUBJECTACCESSREVIEWS, body)
    attributes, causes = _attributes(SELFSUBJECTACCESSREVIEWS, review["spec"])
    if causes:
        raise invalid(SELFSUBJECTACCESSREVIEWS.kind, SELFSUBJECTACCESSREVIEWS.group, "", causes)
    review["status"] = _status(policy, requester, attributes)
    return review


def self_subject_rules_review(body: Any, requester: UserInfo, policy: RbacPolicy) -> JsonObj:
    """Which rules apply to the requester in a namespace? (`kubectl auth can-i --list`)"""
    rtype = SELFSUBJECTRULESREVIEWS
    review = _decode(rtype, body)
    namespace = _string(rtype.kind, review["spec"], "namespace", "spec")
    if not namespace:
        raise bad_request("no namespace on request: spec.namespace is required")
    resource_rules, non_resource_rules, errors = policy.rules_for(requester, namespace)
    status: JsonObj = {
        "resourceRules": [
            {
                "verbs": list(rule.verbs),
                "apiGroups": list(rule.api_groups),
                "resources": list(rule.resources),
                **({"resourceNames": list(rule.resource_names)} if rule.resource_names else {}),
            }
            for rule in resource_rules
        ],
        "nonResourceRules": [
            {"verbs": list(rule.verbs), "nonResourceURLs": list(rule.non_resource_urls)}
            for rule in non_resource_rules
        ],
        "incomplete": False,
    }
    if errors:
        status["evaluationError"] = ", ".join(errors)
    review["status"] = status
    return review
