"""Discovery documents: /version, /api, /apis, resource lists and a minimal /openapi/v3.

Discovery is served in the legacy (unaggregated) format whatever the Accept header asks for;
clients that prefer the aggregated format (kubectl >= 1.26) see a plain `application/json`
answer and fall back to the legacy documents, as they do against older servers.

The OpenAPI v3 documents declare, per group/version, the PATCH operation of every resource
with its `x-kubernetes-group-version-kind` and the `fieldValidation` query parameter; that is
all `kubectl apply` needs to validate on the server (`fieldValidation=Strict`), so no
`--validate=false` is required. Schemas are not published (`/openapi/v2` is 404), so kubectl
computes patches from its compiled-in types (built-ins) or as JSON merge patches (CRs).
"""

from __future__ import annotations

import base64
import hashlib
import json

from voltpack.emulator.objects import JsonObj
from voltpack.emulator.resources import SUBRESOURCE_VERBS, ResourceRegistry, ResourceType

KUBERNETES_VERSION = "v1.32.0"


def version_info(git_version: str = KUBERNETES_VERSION) -> JsonObj:
    major, minor = git_version.lstrip("v").split(".")[:2]
    return {
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2024-12-11T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
        "emulator": "voltpack",
    }


def api_versions(server_address: str) -> JsonObj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> JsonObj:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: ResourceRegistry) -> JsonObj:
    groups = [_group(name, versions) for name, versions in registry.group_versions().items()]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: ResourceRegistry, name: str) -> JsonObj | None:
    versions = registry.group_versions().get(name)
    if not versions:
        return None
    body = _group(name, versions)
    body.update({"kind": "APIGroup", "apiVersion": "v1"})
    return body


CUSTOM_VERB_ORDER = (
    "delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"
)  # fmt: skip
"""The order kube-apiserver lists a custom resource's verbs in."""


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """kube-apiserver's `storageVersionHash`: base64 of the first 8 bytes of
    sha256("group/version/kind") of the storage version."""
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def verbs_of(rtype: ResourceType) -> list[str]:
    if not rtype.custom:
        return list(rtype.verbs)
    return [verb for verb in CUSTOM_VERB_ORDER if verb in rtype.verbs]


def _resource_entry(rtype: ResourceType) -> list[JsonObj]:
    entry: JsonObj = {
        "name": rtype.plural,
        "singularName": rtype.singular,
        "namespaced": rtype.namespaced,
        "kind": rtype.kind,
        "verbs": verbs_of(rtype),
    }
    if rtype.short_names:
        entry["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        entry["categories"] = list(rtype.categories)
    if rtype.verbs != ("create",):  # nothing is stored of a create-only kind (bindings)
        version = rtype.storage_version or rtype.version
        entry["storageVersionHash"] = storage_version_hash(rtype.group, version, rtype.kind)
    entries = [entry]
    for sub in sorted(rtype.subresources):
        sub_entry: JsonObj = {
            "name": f"{rtype.plural}/{sub}",
            "singularName": "",
            "namespaced": rtype.namespaced,
            "kind": {"binding": "Binding", "token": "TokenRequest", "eviction": "Eviction"}.get(
                sub, rtype.kind
            ),
            "verbs": list(SUBRESOURCE_VERBS[sub]),
        }
        if sub == "token":
            sub_entry["group"] = "authentication.k8s.io"
            sub_entry["version"] = "v1"
        if sub == "eviction":
            sub_entry["group"] = "policy"
            sub_entry["version"] = "v1"
        entries.append(sub_entry)
    return entries


def resource_list(registry: ResourceRegistry, group: str, version: str) -> JsonObj | None:
    types = registry.resources_in(group, version)
    if not types:
        return None
    resources: list[JsonObj] = []
    for rtype in types:
        resources.extend(_resource_entry(rtype))
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


# --- OpenAPI v3 (just enough for kubectl's server-side field validation check) -------------


def _openapi_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _builtin_group_versions(registry: ResourceRegistry) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for rtype in registry.all_types():
        pair = (rtype.group, rtype.version)
        if not rtype.custom and pair not in seen:
            seen.append(pair)
    return seen


def openapi_document(registry: ResourceRegistry, group: str, version: str) -> JsonObj | None:
    if (group, version) not in _builtin_group_versions(registry):
        return None
    paths: JsonObj = {}
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    for rtype in registry.resources_in(group, version):
        if "patch" not in rtype.verbs:
            continue
        scope = "/namespaces/{namespace}" if rtype.namespaced else ""
        parameters = [
            {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
            {"name": "force", "in": "query", "schema": {"type": "boolean"}},
        ]
        if rtype.namespaced:
            parameters.insert(
                1,
                {"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}},
            )
        paths[f"{prefix}{scope}/{rtype.plural}/{{name}}"] = {
            "patch": {
                "operationId": f"patch{rtype.kind}",
                "parameters": parameters,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {
                    "group": rtype.group,
                    "version": rtype.version,
                    "kind": rtype.kind,
                },
            }
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION},
        "paths": paths,
        "components": {},
    }


def openapi_root(registry: ResourceRegistry) -> JsonObj:
    paths: JsonObj = {}
    for group, version in _builtin_group_versions(registry):
        document = openapi_document(registry, group, version)
        digest = hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
        path = _openapi_path(group, version)
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest[:32].upper()}"}
    return {"paths": paths}
