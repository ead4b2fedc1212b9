"""Validation of built-in objects: object metadata, pods, config maps and CRDs.

A subset of the API server's rules, chosen for what a scheduler or operator can get wrong:
DNS-1123 names, label keys and values, pods with containers (names, images, extended-resource
requests equal to limits), config-map keys, and the CRD fields that make a CRD servable.
"""

from __future__ import annotations

import re
from typing import Any

from voltpack.emulator.admission.schema import schema_problems
from voltpack.emulator.errors import Cause
from voltpack.emulator.objects import JsonObj
from voltpack.emulator.resources import RBAC_GROUP, ResourceType

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")

LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
STANDARD_FINALIZERS = {"kubernetes", "orphan", "foregroundDeletion"}


def _invalid(field: str, value: Any, why: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return Cause(field, "FieldValueInvalid", f"Invalid value: {shown}: {why}")


def _required(field: str, why: str = "") -> Cause:
    return Cause(field, "FieldValueRequired", f"Required value: {why}" if why else "Required value")


def dns_label_problems(value: str, field: str) -> list[Cause]:
    causes: list[Cause] = []
    if len(value) > 63:
        causes.append(_invalid(field, value, "must be no more than 63 characters"))
    if not DNS1123_LABEL.match(value):
        causes.append(_invalid(field, value, LABEL_MSG))
    return causes


def dns_subdomain_problems(value: str, field: str) -> list[Cause]:
    causes: list[Cause] = []
    if len(value) > 253:
        causes.append(_invalid(field, value, "must be no more than 253 characters"))
    if not DNS1123_SUBDOMAIN.match(value):
        causes.append(_invalid(field, value, SUBDOMAIN_MSG))
    return causes


def qualified_name_problems(value: str, field: str) -> list[Cause]:
    """Label keys, annotation keys, finalizers: `[prefix/]name`."""
    prefix, _, name = value.rpartition("/")
    causes: list[Cause] = []
    if prefix:
        causes.extend(
            _invalid(field, value, f"prefix part {c.message.split(': ', 2)[-1]}")
            for c in dns_subdomain_problems(prefix, field)
        )
    if not name:
        causes.append(_invalid(field, value, "name part must be non-empty"))
    elif len(name) > 63 or not _QUALIFIED_NAME.match(name):
        causes.append(
            _invalid(
                field,
                value,
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                "start and end with an alphanumeric character, and be at most 63 characters",
            )
        )
    return causes


def validate_metadata(rtype: ResourceType, obj: JsonObj) -> list[Cause]:
    """Name, labels, annotations, finalizers and owner references of any object."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return [_required("metadata")]
    causes: list[Cause] = []
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        causes.append(_required("metadata.name", "name or generateName is required"))
    elif rtype.plural == "namespaces":
        causes.extend(dns_label_problems(name, "metadata.name"))
    elif rtype.custom or rtype.plural in ("events",) or rtype.group == RBAC_GROUP:
        if name in (".", "..") or "/" in name or "%" in name:
            causes.append(_invalid("metadata.name", name, "may not contain '/' or '%'"))
        elif rtype.custom:
            causes.extend(dns_subdomain_problems(name, "metadata.name"))
    else:
        causes.extend(dns_subdomain_problems(name, "metadata.name"))
    labels = metadata.get("labels")
    if labels is not None:
        if not isinstance(labels, dict):
            causes.append(_invalid("metadata.labels", labels, "must be a map of strings"))
        else:
            for key, value in labels.items():
                causes.extend(qualified_name_problems(str(key), "metadata.labels"))
                if not isinstance(value, str):
                    causes.append(_invalid(f"metadata.labels[{key}]", value, "must be a string"))
                elif len(value) > 63 or not _LABEL_VALUE.match(value):
                    causes.append(
                        _invalid(
                            "metadata.labels",
                            value,
                            "a valid label must be an empty string or consist of alphanumeric "
                            "characters, '-', '_' or '.', and must start and end with an "
                            "alphanumeric character, and be at most 63 characters",
                        )
                    )
    annotations = metadata.get("annotations")
    if annotations is not None:
        if not isinstance(annotations, dict):
            causes.append(_invalid("metadata.annotations", annotations, "must be a map"))
        else:
            for key, value in annotations.items():
                causes.extend(qualified_name_problems(str(key), "metadata.annotations"))
                if not isinstance(value, str):
                    causes.append(
                        _invalid(f"metadata.annotations[{key}]", value, "must be a string")
                    )
    finalizers = metadata.get("finalizers")
    if finalizers is not None:
        if not isinstance(finalizers, list):
            causes.append(_invalid("metadata.finalizers", finalizers, "must be a list"))
        else:
            for index, finalizer in enumerate(finalizers):
                field = f"metadata.finalizers[{index}]"
                if not isinstance(finalizer, str):
                    causes.append(_invalid(field, finalizer, "must be a string"))
                elif finalizer not in STANDARD_FINALIZERS:
                    causes.extend(qualified_name_problems(finalizer, field))
    owners = metadata.get("ownerReferences")
    if owners is not None:
        if not isinstance(owners, list):
            causes.append(_invalid("metadata.ownerReferences", owners, "must be a list"))
        else:
            for index, owner in enumerate(owners):
                for key in ("apiVersion", "kind", "name", "uid"):
                    if not isinstance(owner, dict) or not owner.get(key):
                        causes.append(_required(f"metadata.ownerReferences[{index}].{key}"))
    return causes


def _is_extended(resource: str) -> bool:
    if "/" not in resource:
        return False
    domain = resource.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def _container_problems(container: Any, field: str, names: set[str]) -> list[Cause]:
    if not isinstance(container, dict):
        return [_invalid(field, container, "must be an object")]
    causes: list[Cause] = []
    name = container.get("name")
    if not isinstance(name, str) or not name:
        causes.append(_required(f"{field}.name"))
    else:
        causes.extend(dns_label_problems(name, f"{field}.name"))
        if name in names:
            causes.append(
                Cause(f"{field}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"')
            )
        names.add(name)
    if not container.get("image"):
        causes.append(_required(f"{field}.image"))
    resources = container.get("resources") or {}
    if not isinstance(resources, dict):
        return [*causes, _invalid(f"{field}.resources", resources, "must be an object")]
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    for part, values in (("requests", requests), ("limits", limits)):
        if not isinstance(values, dict):
            causes.append(_invalid(f"{field}.resources.{part}", values, "must be a map"))
            continue
        for resource, quantity in values.items():
            where = f"{field}.resources.{part}[{resource}]"
            text = str(quantity)
            if not _QUANTITY.match(text):
                causes.append(_invalid(where, text, "must be a valid quantity"))
            elif _is_extended(str(resource)) and not re.fullmatch(r"\d+", text):
                causes.append(_invalid(where, text, "must be an integer"))
    if isinstance(requests, dict) and isinstance(limits, dict):
        for resource, quantity in requests.items():
            if not _is_extended(str(resource)):
                continue
            if resource not in limits:
                causes.append(
                    _required(
                        f"{field}.resources.limits",
                        "Limit must be set for non overcommitable resources",
                    )
                )
            elif str(limits[resource]) != str(quantity):
                causes.append(
                    _invalid(
                        f"{field}.resources.requests[{resource}]",
                        str(quantity),
                        f"must be equal to {resource} limit of {limits[resource]}",
                    )
                )
    return causes


def validate_pod(obj: JsonObj) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [_required("spec")]
    causes: list[Cause] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(_required("spec.containers"))
    names: set[str] = set()
    for group in ("initContainers", "containers"):
        items = spec.get(group) or []
        if not isinstance(items, list):
            causes.append(_invalid(f"spec.{group}", items, "must be a list"))
            continue
        for index, container in enumerate(items):
            causes.extend(_container_problems(container, f"spec.{group}[{index}]", names))
    policy = spec.get("restartPolicy")
    if policy not in (None, "Always", "OnFailure", "Never"):
        causes.append(
            Cause(
                "spec.restartPolicy",
                "FieldValueNotSupported",
                f'Unsupported value: "{policy}": supported values: "Always", "OnFailure", "Never"',
            )
        )
    node_name = spec.get("nodeName")
    if node_name:
        causes.extend(dns_subdomain_problems(str(node_name), "spec.nodeName"))
    return causes


def validate_configmap(obj: JsonObj) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for part in ("data", "binaryData"):
        values = obj.get(part)
        if values is None:
            continue
        if not isinstance(values, dict):
            causes.append(_invalid(part, values, "must be a map"))
            continue
        for key, value in values.items():
            if not _CONFIG_KEY.match(str(key)) or len(str(key)) > 253:
                causes.append(
                    _invalid(
                        part,
                        key,
                        "a valid config key must consist of alphanumeric characters, '-', '_' "
                        "or '.'",
                    )
                )
            if key in seen:
                causes.append(Cause(part, "FieldValueDuplicate", f'Duplicate value: "{key}"'))
            seen.add(str(key))
            if part == "data" and not isinstance(value, str):
                causes.append(_invalid(f"{part}[{key}]", value, "must be a string"))
    return causes


def _not_supported(field: str, value: Any, supported: tuple[str, ...]) -> Cause:
    listed = ", ".join(f'"{item}"' for item in supported)
    return Cause(
        field, "FieldValueNotSupported", f'Unsupported value: "{value}": supported values: {listed}'
    )


def _string_list_problems(container: JsonObj, key: str, field: str) -> list[Cause]:
    value = container.get(key)
    if value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        return []
    return [_invalid(field, value, "must be a list of strings")]


def validate_rbac_role(obj: JsonObj, *, namespaced: bool) -> list[Cause]:
    """Rules of a Role or ClusterRole, as kube-apiserver's RBAC validation checks them."""
    rules = obj.get("rules") or []
    if not isinstance(rules, list):
        return [_invalid("rules", rules, "must be a list of rules")]
    causes: list[Cause] = []
    for index, rule in enumerate(rules):
        where = f"rules[{index}]"
        if not isinstance(rule, dict):
            causes.append(_invalid(where, rule, "must be an object"))
            continue
        keys = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")
        problems = [c for key in keys for c in _string_list_problems(rule, key, f"{where}.{key}")]
        if problems:
            causes.extend(problems)
            continue
        if not rule.get("verbs"):
            causes.append(_required(f"{where}.verbs", "verbs must contain at least one value"))
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if namespaced:
                causes.append(
                    _invalid(
                        f"{where}.nonResourceURLs",
                        urls,
                        "namespaced rules cannot apply to non-resource URLs",
                    )
                )
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                causes.append(
                    _invalid(
                        f"{where}.nonResourceURLs",
                        urls,
                        "rules cannot apply to both regular resources and non-resource URLs",
                    )
                )
            continue
        if not rule.get("apiGroups"):
            causes.append(
                _required(f"{where}.apiGroups", "resource rules must supply at least one api group")
            )
        if not rule.get("resources"):
            causes.append(
                _required(f"{where}.resources", "resource rules must supply at least one resource")
            )
    return causes


def default_rbac_binding(obj: JsonObj) -> None:
    """kube-apiserver's defaults: roleRef and User/Group subjects in the RBAC API group."""
    role_ref = obj.get("roleRef")
    if isinstance(role_ref, dict) and not role_ref.get("apiGroup"):
        role_ref["apiGroup"] = RBAC_GROUP
    for subject in obj.get("subjects") or []:
        if (
            isinstance(subject, dict)
            and not subject.get("apiGroup")
            and subject.get("kind") in ("User", "Group")
        ):
            subject["apiGroup"] = RBAC_GROUP


def validate_rbac_binding(obj: JsonObj, *, namespaced: bool) -> list[Cause]:
    """roleRef and subjects of a RoleBinding (namespaced) or ClusterRoleBinding."""
    causes: list[Cause] = []
    role_ref = obj.get("roleRef")
    if not isinstance(role_ref, dict):
        return [_required("roleRef")]
    if role_ref.get("apiGroup") != RBAC_GROUP:
        causes.append(_not_supported("roleRef.apiGroup", role_ref.get("apiGroup"), (RBAC_GROUP,)))
    kinds = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)
    if role_ref.get("kind") not in kinds:
        causes.append(_not_supported("roleRef.kind", role_ref.get("kind", ""), kinds))
    name = role_ref.get("name")
    if not isinstance(name, str) or not name:
        causes.append(_required("roleRef.name"))
    subjects = obj.get("subjects") or []
    if not isinstance(subjects, list):
        return [*causes, _invalid("subjects", subjects, "must be a list of subjects")]
    for index, subject in enumerate(subjects):
        where = f"subjects[{index}]"
        if not isinstance(subject, dict):
            causes.append(_invalid(where, subject, "must be an object"))
            continue
        if not subject.get("name"):
            causes.append(_required(f"{where}.name"))
        kind = subject.get("kind")
        group = subject.get("apiGroup", "")
        if kind == "ServiceAccount":
            if group:
                causes.append(_not_supported(f"{where}.apiGroup", group, ("",)))
            if not namespaced and not subject.get("namespace"):
                causes.append(_required(f"{where}.namespace"))
        elif kind in ("User", "Group"):
            if group != RBAC_GROUP:
                causes.append(_not_supported(f"{where}.apiGroup", group, (RBAC_GROUP,)))
        else:
            causes.append(
                _not_supported(f"{where}.kind", kind or "", ("ServiceAccount", "User", "Group"))
            )
    return causes


def validate_crd(obj: JsonObj) -> list[Cause]:
    """The fields that decide what a CRD serves: group, names, scope, versions, schemas."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [_required("spec")]
    causes: list[Cause] = []
    group = spec.get("group")
    if not isinstance(group, str) or not group:
        causes.append(_required("spec.group"))
    elif "." not in group:
        causes.append(_invalid("spec.group", group, "should be a domain with at least one dot"))
    else:
        causes.extend(dns_subdomain_problems(group, "spec.group"))
    names = spec.get("names")
    if not isinstance(names, dict):
        causes.append(_required("spec.names"))
        names = {}
    plural = names.get("plural")
    if not isinstance(plural, str) or not plural:
        causes.append(_required("spec.names.plural"))
    else:
        causes.extend(dns_label_problems(plural, "spec.names.plural"))
    kind = names.get("kind")
    if not isinstance(kind, str) or not kind:
        causes.append(_required("spec.names.kind"))
    singular = names.get("singular")
    if isinstance(singular, str) and singular:
        causes.extend(dns_label_problems(singular, "spec.names.singular"))
    for index, short in enumerate(names.get("shortNames") or []):
        causes.extend(dns_label_problems(str(short), f"spec.names.shortNames[{index}]"))
    name = obj.get("metadata", {}).get("name")
    if isinstance(plural, str) and isinstance(group, str) and name != f"{plural}.{group}":
        causes.append(_invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    scope = spec.get("scope")
    if scope not in ("Namespaced", "Cluster"):
        causes.append(
            Cause(
                "spec.scope",
                "FieldValueNotSupported",
                f'Unsupported value: "{scope}": supported values: "Cluster", "Namespaced"',
            )
        )
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        causes.append(
            _required("spec.versions", "must have exactly one version marked as storage version")
        )
        return causes
    storage = 0
    seen: set[str] = set()
    for index, version in enumerate(versions):
        field = f"spec.versions[{index}]"
        if not isinstance(version, dict):
            causes.append(_invalid(field, version, "must be an object"))
            continue
        vname = version.get("name")
        if not isinstance(vname, str) or not vname:
            causes.append(_required(f"{field}.name"))
        else:
            causes.extend(dns_label_problems(vname, f"{field}.name"))
            if vname in seen:
                causes.append(
                    Cause(f"{field}.name", "FieldValueDuplicate", f'Duplicate value: "{vname}"')
                )
            seen.add(vname)
        if "served" not in version:
            causes.append(_required(f"{field}.served"))
        if "storage" not in version:
            causes.append(_required(f"{field}.storage"))
        if version.get("storage") is True:
            storage += 1
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        where = f"{field}.schema.openAPIV3Schema"
        if schema is None:
            causes.append(_required(where, "schemas are required"))
        else:
            for subpath, message in schema_problems(schema):
                reason = (
                    "FieldValueRequired" if message.startswith("Required") else "FieldValueInvalid"
                )
                causes.append(Cause(where + subpath, reason, message))
    if storage != 1:
        causes.append(
            _invalid(
                "spec.versions", storage, "must have exactly one version marked as storage version"
            )
        )
    return causes
