"""Per-resource rules the API server applies on create and update (its "strategies").

Defaults (pods, namespaces, CRDs), what a create resets (pod and custom-resource status),
which updates are allowed (pod specs are immutable but for images and a few fields), and the
validation that goes with each type.
"""

from __future__ import annotations

import base64
import copy
from datetime import datetime
from typing import Any

from voltpack.emulator.admission import priority
from voltpack.emulator.admission.kind_validation import validate_core_event, validate_lease
from voltpack.emulator.admission.validation import (
    default_rbac_binding,
    validate_configmap,
    validate_crd,
    validate_pod,
    validate_rbac_binding,
    validate_rbac_role,
)
from voltpack.emulator.dra import validation as dra
from voltpack.emulator.errors import Cause
from voltpack.emulator.objects import JsonObj, timestamp
from voltpack.emulator.resources import PRIORITYCLASSES, ResourceType

_RBAC_ROLES = ("roles.rbac.authorization.k8s.io", "clusterroles.rbac.authorization.k8s.io")
_RBAC_BINDINGS = (
    "rolebindings.rbac.authorization.k8s.io",
    "clusterrolebindings.rbac.authorization.k8s.io",
)
_CLAIMS = "resourceclaims.resource.k8s.io"
_CLAIM_TEMPLATES = "resourceclaimtemplates.resource.k8s.io"
_SLICES = "resourceslices.resource.k8s.io"
_DRA_VALIDATORS = {
    _CLAIMS: dra.validate_resource_claim,
    _CLAIM_TEMPLATES: dra.validate_resource_claim_template,
    _SLICES: dra.validate_resource_slice,
    "deviceclasses.resource.k8s.io": dra.validate_device_class,
}

DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)

_POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def _image_pull_policy(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def qos_class(spec: JsonObj) -> str:
    """Guaranteed, Burstable or BestEffort, from the containers' requests and limits."""
    containers = [c for group in ("containers", "initContainers") for c in spec.get(group) or []]
    any_set = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        if requests or limits:
            any_set = True
        for resource in ("cpu", "memory"):
            if resource not in limits or str(requests.get(resource, limits[resource])) != str(
                limits[resource]
            ):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _default_container(container: Any) -> None:
    if not isinstance(container, dict):
        return
    image = container.get("image")
    if isinstance(image, str) and image:
        container.setdefault("imagePullPolicy", _image_pull_policy(image))
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    if isinstance(resources, dict):
        limits = resources.get("limits")
        if isinstance(limits, dict) and limits:
            requests = resources.setdefault("requests", {})
            if isinstance(requests, dict):
                for resource, quantity in limits.items():
                    requests.setdefault(resource, quantity)


def default_pod(obj: JsonObj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            _default_container(container)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    if "priority" not in spec and not spec.get("priorityClassName"):
        spec["priority"] = 0
    tolerations = spec.setdefault("tolerations", [])
    if isinstance(tolerations, list):
        keys = {t.get("key") for t in tolerations if isinstance(t, dict)}
        for toleration in DEFAULT_TOLERATIONS:
            if toleration["key"] not in keys:
                tolerations.append(dict(toleration))


def default_crd(obj: JsonObj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and isinstance(names.get("kind"), str):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
    spec.setdefault("conversion", {"strategy": "None"})
    for version in spec.get("versions") or []:
        if isinstance(version, dict):
            version.setdefault("served", True)


def crd_status(obj: JsonObj, now: datetime, old_status: JsonObj | None) -> JsonObj:
    """The status the CRD controllers would write: names accepted, established."""
    spec = obj.get("spec", {})
    names = copy.deepcopy(spec.get("names", {}))
    versions = spec.get("versions") or []
    storage = [v.get("name") for v in versions if isinstance(v, dict) and v.get("storage")]
    stored = list((old_status or {}).get("storedVersions") or [])
    for name in storage:
        if name not in stored:
            stored.append(name)
    old_conditions = {
        c.get("type"): c for c in (old_status or {}).get("conditions") or [] if isinstance(c, dict)
    }
    conditions = []
    for ctype, reason, message in (
        ("NamesAccepted", "NoConflicts", "no conflicts found"),
        ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
    ):
        previous = old_conditions.get(ctype)
        since = previous.get("lastTransitionTime") if previous else None
        conditions.append(
            {
                "type": ctype,
                "status": "True",
                "lastTransitionTime": since or timestamp(now),
                "reason": reason,
                "message": message,
            }
        )
    return {"conditions": conditions, "acceptedNames": names, "storedVersions": stored}


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def label_namespace(obj: JsonObj) -> None:
    """kube-apiserver labels every namespace with its own name (and keeps the label so)."""
    metadata = obj.setdefault("metadata", {})
    labels = metadata.get("labels")
    if not isinstance(labels, dict):
        labels = metadata["labels"] = {}
    labels[NAMESPACE_NAME_LABEL] = metadata.get("name", "")


def fold_string_data(secret: JsonObj) -> None:
    """A Secret's write-only `stringData` is merged into `data` (base64), as the API does."""
    strings = secret.pop("stringData", None)
    if isinstance(strings, dict) and strings:
        existing = secret.get("data")
        data: JsonObj = existing if isinstance(existing, dict) else {}
        for key, value in strings.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        secret["data"] = data


def serialized_nulls(rtype: ResourceType, obj: JsonObj) -> None:
    """The null fields a real server writes out: a pod condition's times, an events.k8s.io
    Event's deprecated fields are not omitempty."""
    if rtype.key == "events.events.k8s.io":
        obj.setdefault("deprecatedSource", {})
        obj.setdefault("deprecatedFirstTimestamp", None)
        obj.setdefault("deprecatedLastTimestamp", None)
    if rtype.key != "pods":
        return
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for condition in conditions or []:
        if isinstance(condition, dict):
            condition.setdefault("lastProbeTime", None)
            condition.setdefault("lastTransitionTime", None)


def prepare_create(rtype: ResourceType, obj: JsonObj, now: datetime) -> None:
    """Defaults and status resets of a create, in place."""
    if rtype.custom:
        if rtype.has_status:
            obj.pop("status", None)
        return
    if rtype.key == "pods":
        default_pod(obj)
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec or {})}
    elif rtype.key == "namespaces":
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
        label_namespace(obj)
    elif rtype.key == "customresourcedefinitions.apiextensions.k8s.io":
        default_crd(obj)
        obj["status"] = crd_status(obj, now, None)
    elif rtype.key == PRIORITYCLASSES.key:
        priority.default_priority_class(obj)
    elif rtype.key == "secrets":
        obj.setdefault("type", "Opaque")
        fold_string_data(obj)
    elif rtype.key in _RBAC_BINDINGS:
        default_rbac_binding(obj)
    elif rtype.key == _CLAIMS:
        obj.pop("status", None)  # a claim is created unallocated, whatever the body says
        dra.default_claim_spec(obj.get("spec"))
    elif rtype.key == _CLAIM_TEMPLATES:
        dra.default_claim_spec((obj.get("spec") or {}).get("spec"))
    elif rtype.key == _SLICES:
        dra.default_resource_slice(obj)


def prepare_status_update(rtype: ResourceType, new: JsonObj, sent: JsonObj, old: JsonObj) -> None:
    """A pod's status update as kube-apiserver's pod status strategy makes it: the QoS class
    stays, `podIPs` follows `podIP`. (kube-apiserver also takes labels and annotations from the
    request; the emulator keeps the stored ones, see docs/emulator-conformance.md.)"""
    if rtype.key != "pods":
        return
    status = new.get("status")
    if not isinstance(status, dict):
        return
    old_qos = (old.get("status") or {}).get("qosClass")
    if old_qos and not status.get("qosClass"):
        status["qosClass"] = old_qos
    if status.get("podIP") and not status.get("podIPs"):
        status["podIPs"] = [{"ip": status["podIP"]}]


def prepare_update(rtype: ResourceType, new: JsonObj, old: JsonObj, now: datetime) -> None:
    """Defaults of an update of the main resource, in place."""
    if rtype.key == "pods":
        default_pod(new)
    elif rtype.key == PRIORITYCLASSES.key:
        priority.default_priority_class(new)
    elif rtype.key == "namespaces":
        new["spec"] = copy.deepcopy(old.get("spec", {}))
        label_namespace(new)
    elif rtype.key == "secrets":
        fold_string_data(new)
    elif rtype.key == "customresourcedefinitions.apiextensions.k8s.io":
        default_crd(new)
        new["status"] = crd_status(new, now, old.get("status"))
    elif rtype.key in _RBAC_BINDINGS:
        default_rbac_binding(new)
    elif rtype.key == _CLAIMS:
        dra.default_claim_spec(new.get("spec"))
    elif rtype.key == _CLAIM_TEMPLATES:
        dra.default_claim_spec((new.get("spec") or {}).get("spec"))
    elif rtype.key == _SLICES:
        dra.default_resource_slice(new)


def validate(rtype: ResourceType, obj: JsonObj) -> list[Cause]:
    if rtype.key == "pods":
        spec = obj.get("spec")
        return validate_pod(obj) + (dra.pod_claim_problems(spec) if isinstance(spec, dict) else [])
    if rtype.key in _DRA_VALIDATORS:
        return _DRA_VALIDATORS[rtype.key](obj)
    if rtype.key == "configmaps":
        return validate_configmap(obj)
    if rtype.key == "customresourcedefinitions.apiextensions.k8s.io":
        return validate_crd(obj)
    if rtype.key in _RBAC_ROLES:
        return validate_rbac_role(obj, namespaced=rtype.namespaced)
    if rtype.key in _RBAC_BINDINGS:
        return validate_rbac_binding(obj, namespaced=rtype.namespaced)
    if rtype.key == "leases.coordination.k8s.io":
        return validate_lease(obj)
    if rtype.key == "events":
        return validate_core_event(obj)
    if rtype.key == PRIORITYCLASSES.key:
        return priority.validate_priority_class(obj)
    return []


def _munged_pod_spec(spec: JsonObj, old: JsonObj) -> JsonObj:
    munged = copy.deepcopy(spec)
    for group in ("containers", "initContainers"):
        new_list = munged.get(group) or []
        old_list = old.get(group) or []
        for index, container in enumerate(new_list):
            if isinstance(container, dict) and index < len(old_list):
                container["image"] = old_list[index].get("image")
    for field in ("activeDeadlineSeconds", "tolerations", "schedulingGates"):
        if field in old:
            munged[field] = copy.deepcopy(old[field])
        else:
            munged.pop(field, None)
    return munged


def validate_update(rtype: ResourceType, new: JsonObj, old: JsonObj) -> list[Cause]:
    if rtype.key == _CLAIMS:
        return dra.validate_resource_claim_update(new, old)
    if rtype.key == _CLAIM_TEMPLATES:
        return dra.validate_resource_claim_template_update(new, old)
    if rtype.key == _SLICES:
        return dra.validate_resource_slice_update(new, old)
    if rtype.key == PRIORITYCLASSES.key:
        return priority.validate_priority_class_update(new, old)
    causes = validate(rtype, new)
    if rtype.key == "pods":
        new_spec = new.get("spec") or {}
        old_spec = old.get("spec") or {}
        if _munged_pod_spec(new_spec, old_spec) != old_spec:
            causes.append(
                Cause("spec", "FieldValueForbidden", f"Forbidden: {_POD_UPDATE_FORBIDDEN}")
            )
    elif rtype.key == "configmaps":
        if old.get("immutable") is True:
            for field in ("data", "binaryData", "immutable"):
                if new.get(field) != old.get(field):
                    causes.append(
                        Cause(
                            field,
                            "FieldValueForbidden",
                            "Forbidden: field is immutable when `immutable` is set",
                        )
                    )
    elif rtype.key in _RBAC_BINDINGS:
        if new.get("roleRef") != old.get("roleRef"):
            causes.append(
                Cause("roleRef", "FieldValueInvalid", "Invalid value: cannot change roleRef")
            )
    elif rtype.key == "customresourcedefinitions.apiextensions.k8s.io":
        for field in ("group", "scope"):
            if (new.get("spec") or {}).get(field) != (old.get("spec") or {}).get(field):
                value = (new.get("spec") or {}).get(field)
                causes.append(
                    Cause(
                        f"spec.{field}",
                        "FieldValueInvalid",
                        f'Invalid value: "{value}": field is immutable',
                    )
                )
    return causes


def spec_changed(rtype: ResourceType, new: JsonObj, old: JsonObj) -> bool:
    """Whether an update changes what `metadata.generation` counts."""
    if rtype.custom:
        strip = ("metadata", "status")
        return {k: v for k, v in new.items() if k not in strip} != {
            k: v for k, v in old.items() if k not in strip
        }
    return new.get("spec") != old.get("spec")
