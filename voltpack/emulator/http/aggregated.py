"""Aggregated discovery (`apidiscovery.k8s.io/v2`): every group, version and resource at once.

kubectl (since 1.30) and client-go ask `/api` and `/apis` for an `APIGroupDiscoveryList` with
`Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`, and fall back to
one request per group version when a server answers the plain documents. Built-in resources
name their kind with an empty group and version (as kube-apiserver writes them), custom ones
with their own.
"""

from __future__ import annotations

from voltpack.emulator.http.discovery import verbs_of
from voltpack.emulator.objects import JsonObj
from voltpack.emulator.resources import SUBRESOURCE_VERBS, ResourceRegistry, ResourceType

MEDIA_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
_SUBRESOURCE_KINDS = {
    "binding": ("", "", "Binding"),
    "token": ("authentication.k8s.io", "v1", "TokenRequest"),
    "eviction": ("policy", "v1", "Eviction"),
}


def wanted(accept: str) -> bool:
    """Whether an Accept header asks for aggregated discovery (v2)."""
    for media in accept.split(","):
        params = {p.strip() for p in media.split(";")[1:]}
        if {"g=apidiscovery.k8s.io", "v=v2", "as=APIGroupDiscoveryList"} <= params:
            return True
    return False


def _kind(rtype: ResourceType, kind: str) -> JsonObj:
    if rtype.custom:
        return {"group": rtype.group, "version": rtype.version, "kind": kind}
    return {"group": "", "version": "", "kind": kind}


def _resource(rtype: ResourceType) -> JsonObj:
    entry: JsonObj = {
        "resource": rtype.plural,
        "responseKind": _kind(rtype, rtype.kind),
        "scope": "Namespaced" if rtype.namespaced else "Cluster",
        "singularResource": rtype.singular,
        "verbs": verbs_of(rtype),
    }
    if rtype.short_names:
        entry["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        entry["categories"] = list(rtype.categories)
    subresources = []
    for sub in sorted(rtype.subresources):
        group, version, kind = _SUBRESOURCE_KINDS.get(sub, ("", "", rtype.kind))
        response = {"group": group, "version": version, "kind": kind} if group else None
        subresources.append(
            {
                "subresource": sub,
                "responseKind": response or _kind(rtype, kind),
                "verbs": list(SUBRESOURCE_VERBS[sub]),
            }
        )
    if subresources:
        entry["subresources"] = subresources
    return entry


def _version(registry: ResourceRegistry, group: str, version: str) -> JsonObj:
    types = sorted(registry.resources_in(group, version), key=lambda t: t.plural)
    return {
        "version": version,
        "resources": [_resource(rtype) for rtype in types],
        "freshness": "Current",
    }


def discovery_list(registry: ResourceRegistry, *, legacy: bool) -> JsonObj:
    """The APIGroupDiscoveryList of `/api` (legacy: the core group) or of `/apis`."""
    if legacy:
        items: list[JsonObj] = [{"metadata": {}, "versions": [_version(registry, "", "v1")]}]
    else:
        items = [
            {
                "metadata": {"name": group},
                "versions": [_version(registry, group, version) for version in versions],
            }
            for group, versions in registry.group_versions().items()
        ]
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }
