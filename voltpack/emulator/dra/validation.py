"""Validation of Dynamic Resource Allocation objects (`resource.k8s.io/v1`) and pod claims.

The rules are kube-apiserver's (`pkg/apis/resource/validation`, and `validatePodResourceClaims`
of `pkg/apis/core/validation`), for the parts a scheduler or driver can get wrong: required
fields, names (DNS subdomains and labels), a claim's spec immutable after creation, an
allocation immutable once set, `reservedFor` only with an allocation and at most 256 entries,
allocation results naming requests of the claim, slices with one node selection, a pool and
devices with unique names and well-formed attributes. CEL selectors are parsed, not type-checked.
"""

from __future__ import annotations

import json
import re
from typing import Any

import celpy
from celpy.celparser import CELParseError

from voltpack.emulator.admission.validation import (
    DNS1123_SUBDOMAIN,
    dns_label_problems,
    dns_subdomain_problems,
    qualified_name_problems,
)
from voltpack.emulator.errors import Cause
from voltpack.emulator.objects import JsonObj

RESERVED_FOR_MAX = 256
REQUESTS_MAX = 32
CONSTRAINTS_MAX = 32
CONFIG_MAX = 32
SELECTORS_MAX = 32
RESULTS_MAX = 32
SLICE_DEVICES_MAX = 128
ATTRIBUTES_AND_CAPACITIES_MAX = 32
ATTRIBUTE_VALUE_MAX = 64
ID_MAX = 32
DRIVER_NAME_MAX = 63
POOL_NAME_MAX = 253
CEL_EXPRESSION_MAX = 10 * 1024
POD_CLAIMS_MAX = 128

ALLOCATION_MODES = ("All", "ExactCount")
CONFIG_SOURCES = ("FromClaim", "FromClass")
IMMUTABLE = "field is immutable"
REQUEST_REF = (
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'"
)
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used "
    "for validation is '[A-Za-z_][A-Za-z0-9_]*')"
)
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$"
)
_CEL = celpy.Environment()
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")


# --- cause helpers -------------------------------------------------------------------------


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def _invalid(field: str, value: Any, why: str) -> Cause:
    return Cause(field, "FieldValueInvalid", f"Invalid value: {_shown(value)}: {why}")


def _required(field: str, why: str = "") -> Cause:
    return Cause(field, "FieldValueRequired", f"Required value: {why}" if why else "Required value")


def _forbidden(field: str, why: str) -> Cause:
    return Cause(field, "FieldValueForbidden", f"Forbidden: {why}")


def _duplicate(field: str, value: Any) -> Cause:
    return Cause(field, "FieldValueDuplicate", f"Duplicate value: {_shown(value)}")


def _too_many(field: str, count: int, limit: int) -> Cause:
    return Cause(field, "FieldValueTooMany", f"Too many: {count}: must have at most {limit} items")


def _too_long(field: str, limit: int) -> Cause:
    return Cause(field, "FieldValueTooLong", f"Too long: may not be more than {limit} bytes")


def _not_supported(field: str, value: Any, supported: tuple[str, ...]) -> Cause:
    listed = ", ".join(f'"{item}"' for item in supported)
    return Cause(
        field,
        "FieldValueNotSupported",
        f"Unsupported value: {_shown(value)}: supported values: {listed}",
    )


def _immutable(field: str, value: Any) -> Cause:
    return _invalid(field, value, IMMUTABLE)


def _dict(value: Any) -> JsonObj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _list_problems(value: Any, field: str, limit: int) -> tuple[list[Any], list[Cause]]:
    """The items of a list field, and a cause when it is not a list or too long."""
    if value is None:
        return [], []
    if not isinstance(value, list):
        return [], [_invalid(field, value, "must be a list")]
    if len(value) > limit:
        return value, [_too_many(field, len(value), limit)]
    return value, []


# --- names ---------------------------------------------------------------------------------


def driver_name_problems(value: Any, field: str) -> list[Cause]:
    """A driver name is a DNS subdomain of at most 63 characters (as a CSI driver's)."""
    if not isinstance(value, str) or not value:
        return [_required(field)]
    causes: list[Cause] = []
    if len(value) > DRIVER_NAME_MAX:
        causes.append(Cause(field, "FieldValueTooLong", "Too long: may not be more than 63 bytes"))
    if not DNS1123_SUBDOMAIN.match(value.lower()):
        causes.extend(dns_subdomain_problems(value.lower(), field))
    return causes


def pool_name_problems(value: Any, field: str) -> list[Cause]:
    """A pool name: one or more DNS subdomains separated by '/', at most 253 characters."""
    if not isinstance(value, str) or not value:
        return [_required(field)]
    causes: list[Cause] = []
    if len(value) > POOL_NAME_MAX:
        causes.append(_too_long(field, POOL_NAME_MAX))
    for part in value.split("/"):
        causes.extend(dns_subdomain_problems(part, field))
    return causes


def qualified_attribute_problems(key: str, field: str) -> list[Cause]:
    """An attribute or capacity name: `[<domain>/]<C identifier of at most 32 characters>`."""
    domain, _, ident = key.rpartition("/")
    causes: list[Cause] = []
    if domain:
        if len(domain) > 63:
            causes.append(_too_long(field, 63))
        causes.extend(dns_subdomain_problems(domain, field))
    if not ident:
        causes.append(_required(field, "the identifier is required"))
    else:
        if len(ident) > ID_MAX:
            causes.append(_too_long(field, ID_MAX))
        if not _C_IDENTIFIER.match(ident):
            causes.append(_invalid(field, ident, _C_IDENTIFIER_MSG))
    return causes


def _cel_problems(expression: Any, field: str) -> list[Cause]:
    """A CEL selector expression: present, not too long, and parseable."""
    if not isinstance(expression, str) or not expression:
        return [_required(field, "expression is required")]
    if len(expression) > CEL_EXPRESSION_MAX:
        return [_too_long(field, CEL_EXPRESSION_MAX)]
    try:
        _CEL.compile(expression)
    except CELParseError as exc:
        where = " ".join(str(exc).split())
        return [_invalid(field, expression, f"compilation failed: {where}")]
    return []


def _selectors_problems(selectors: Any, field: str) -> list[Cause]:
    items, causes = _list_problems(selectors, field, SELECTORS_MAX)
    for index, selector in enumerate(items):
        where = f"{field}[{index}]"
        cel = _dict(selector).get("cel")
        if not isinstance(cel, dict):
            causes.append(_required(f"{where}.cel"))
        else:
            causes.extend(_cel_problems(cel.get("expression"), f"{where}.cel.expression"))
    return causes


def _opaque_problems(config: Any, field: str) -> list[Cause]:
    opaque = _dict(config).get("opaque")
    if not isinstance(opaque, dict):
        return [_required(f"{field}.opaque")]
    causes = driver_name_problems(opaque.get("driver"), f"{field}.opaque.driver")
    if not isinstance(opaque.get("parameters"), dict):
        causes.append(_required(f"{field}.opaque.parameters"))
    return causes


# --- claims ----------------------------------------------------------------------------------


def request_names(spec: JsonObj) -> dict[str, set[str]]:
    """A claim spec's request names, each with the names of its `firstAvailable` subrequests."""
    names: dict[str, set[str]] = {}
    for request in _list(_dict(spec.get("devices")).get("requests")):
        if isinstance(request, dict) and isinstance(request.get("name"), str):
            subs = {
                str(sub.get("name"))
                for sub in _list(request.get("firstAvailable"))
                if isinstance(sub, dict)
            }
            names[request["name"]] = subs
    return names


def _names_request(ref: str, names: dict[str, set[str]]) -> bool:
    parts = ref.split("/")
    if len(parts) > 2 or parts[0] not in names:
        return False
    return len(parts) == 1 or parts[1] in names[parts[0]]


def _request_refs_problems(refs: Any, field: str, names: dict[str, set[str]]) -> list[Cause]:
    items, causes = _list_problems(refs, field, REQUESTS_MAX)
    seen: set[str] = set()
    for index, ref in enumerate(items):
        where = f"{field}[{index}]"
        if not isinstance(ref, str) or not _names_request(ref, names):
            causes.append(_invalid(where, ref, REQUEST_REF))
        elif ref in seen:
            causes.append(_duplicate(where, ref))
        else:
            seen.add(ref)
    return causes


def _allocation_mode_problems(request: JsonObj, field: str) -> list[Cause]:
    mode = request.get("allocationMode", "ExactCount")
    count = request.get("count", 0)
    if mode == "All":
        if count:
            return [
                _invalid(
                    f"{field}.count", count, "must not be specified when allocationMode is 'All'"
                )
            ]
        return []
    if mode == "ExactCount":
        if not isinstance(count, int) or count <= 0:
            return [_invalid(f"{field}.count", count, "must be greater than zero")]
        return []
    return [_not_supported(f"{field}.allocationMode", mode, ALLOCATION_MODES)]


def _device_request_problems(request: JsonObj, field: str) -> list[Cause]:
    causes: list[Cause] = []
    class_name = request.get("deviceClassName")
    if not isinstance(class_name, str) or not class_name:
        causes.append(_required(f"{field}.deviceClassName"))
    else:
        causes.extend(dns_subdomain_problems(class_name, f"{field}.deviceClassName"))
    causes.extend(_selectors_problems(request.get("selectors"), f"{field}.selectors"))
    causes.extend(_allocation_mode_problems(request, field))
    return causes


def _request_problems(request: Any, field: str) -> list[Cause]:
    if not isinstance(request, dict):
        return [_invalid(field, request, "must be an object")]
    name = request.get("name")
    causes = (
        [_required(f"{field}.name")]
        if not isinstance(name, str) or not name
        else dns_label_problems(name, f"{field}.name")
    )
    exactly = request.get("exactly")
    first = request.get("firstAvailable")
    if exactly is None and not first:
        causes.append(_required(field, "exactly one of `exactly` or `firstAvailable` is required"))
    elif exactly is not None and first:
        causes.append(
            _invalid(
                field,
                None,
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields "
                "are set",
            )
        )
    elif exactly is not None:
        causes.extend(_device_request_problems(_dict(exactly), f"{field}.exactly"))
    else:
        subs, sub_causes = _list_problems(first, f"{field}.firstAvailable", 8)
        causes.extend(sub_causes)
        seen: set[str] = set()
        for index, sub in enumerate(subs):
            where = f"{field}.firstAvailable[{index}]"
            sub_name = _dict(sub).get("name")
            if not isinstance(sub_name, str) or not sub_name:
                causes.append(_required(f"{where}.name"))
            else:
                causes.extend(dns_label_problems(sub_name, f"{where}.name"))
                if sub_name in seen:
                    causes.append(_duplicate(where, sub_name))
                seen.add(sub_name)
            causes.extend(_device_request_problems(_dict(sub), where))
    return causes


def claim_spec_problems(spec: Any, field: str) -> list[Cause]:
    """A ResourceClaimSpec: its requests, constraints and configuration."""
    if not isinstance(spec, dict):
        return [_required(field)]
    devices = _dict(spec.get("devices"))
    where = f"{field}.devices"
    requests, causes = _list_problems(devices.get("requests"), f"{where}.requests", REQUESTS_MAX)
    seen: set[str] = set()
    for index, request in enumerate(requests):
        causes.extend(_request_problems(request, f"{where}.requests[{index}]"))
        name = _dict(request).get("name")
        if isinstance(name, str) and name:
            if name in seen:
                causes.append(_duplicate(f"{where}.requests[{index}]", name))
            seen.add(name)
    names = request_names(spec)
    constraints, more = _list_problems(
        devices.get("constraints"), f"{where}.constraints", CONSTRAINTS_MAX
    )
    causes.extend(more)
    for index, item in enumerate(constraints):
        at = f"{where}.constraints[{index}]"
        constraint = _dict(item)
        causes.extend(_request_refs_problems(constraint.get("requests"), f"{at}.requests", names))
        attribute = constraint.get("matchAttribute")
        if not isinstance(attribute, str) or not attribute:
            causes.append(_required(f"{at}.matchAttribute"))
        elif "/" not in attribute:
            causes.append(_invalid(f"{at}.matchAttribute", attribute, "must include a domain"))
        else:
            causes.extend(qualified_attribute_problems(attribute, f"{at}.matchAttribute"))
    configs, more = _list_problems(devices.get("config"), f"{where}.config", CONFIG_MAX)
    causes.extend(more)
    for index, config in enumerate(configs):
        at = f"{where}.config[{index}]"
        causes.extend(
            _request_refs_problems(_dict(config).get("requests"), f"{at}.requests", names)
        )
        causes.extend(_opaque_problems(config, at))
    return causes


def default_claim_spec(spec: Any) -> None:
    """v1 defaults of a claim spec: `allocationMode: ExactCount` with `count: 1`."""
    for request in _list(_dict(_dict(spec).get("devices")).get("requests")):
        if not isinstance(request, dict):
            continue
        targets = [request.get("exactly"), *_list(request.get("firstAvailable"))]
        for target in targets:
            if isinstance(target, dict):
                target.setdefault("allocationMode", "ExactCount")
                if target["allocationMode"] == "ExactCount":
                    target.setdefault("count", 1)
                for toleration in _list(target.get("tolerations")):
                    if isinstance(toleration, dict):
                        toleration.setdefault("operator", "Equal")


def validate_resource_claim(obj: JsonObj) -> list[Cause]:
    return claim_spec_problems(obj.get("spec"), "spec")


def _consumer_problems(ref: Any, field: str) -> list[Cause]:
    ref = _dict(ref)
    return [_required(f"{field}.{key}") for key in ("resource", "name", "uid") if not ref.get(key)]


def _allocation_problems(
    allocation: JsonObj, field: str, names: dict[str, set[str]]
) -> list[Cause]:
    devices = _dict(allocation.get("devices"))
    where = f"{field}.devices"
    results, causes = _list_problems(devices.get("results"), f"{where}.results", RESULTS_MAX)
    for index, item in enumerate(results):
        at = f"{where}.results[{index}]"
        result = _dict(item)
        request = result.get("request")
        if not isinstance(request, str) or not request:
            causes.append(_required(f"{at}.request"))
        elif not _names_request(request, names):
            causes.append(_invalid(f"{at}.request", request, REQUEST_REF))
        causes.extend(driver_name_problems(result.get("driver"), f"{at}.driver"))
        causes.extend(pool_name_problems(result.get("pool"), f"{at}.pool"))
        device = result.get("device")
        if not isinstance(device, str) or not device:
            causes.append(_required(f"{at}.device"))
        else:
            causes.extend(dns_label_problems(device, f"{at}.device"))
    configs, more = _list_problems(devices.get("config"), f"{where}.config", 2 * CONFIG_MAX)
    causes.extend(more)
    for index, config in enumerate(configs):
        at = f"{where}.config[{index}]"
        source = _dict(config).get("source")
        if not source:
            causes.append(_required(f"{at}.source"))
        elif source not in CONFIG_SOURCES:
            causes.append(_not_supported(f"{at}.source", source, CONFIG_SOURCES))
        causes.extend(
            _request_refs_problems(_dict(config).get("requests"), f"{at}.requests", names)
        )
        causes.extend(_opaque_problems(config, at))
    return causes


def claim_status_problems(new: JsonObj, old: JsonObj) -> list[Cause]:
    """A claim's status against its previous status (kube-apiserver's status-update rules)."""
    status = _dict(new.get("status"))
    old_status = _dict(old.get("status"))
    reserved, causes = _list_problems(
        status.get("reservedFor"), "status.reservedFor", RESERVED_FOR_MAX
    )
    uids: set[str] = set()
    for index, ref in enumerate(reserved):
        at = f"status.reservedFor[{index}]"
        causes.extend(_consumer_problems(ref, at))
        uid = _dict(ref).get("uid")
        if uid:
            if uid in uids:
                causes.append(_duplicate(at, _dict(ref)))
            uids.add(str(uid))
    allocation = status.get("allocation")
    old_allocation = old_status.get("allocation")
    if reserved:
        if allocation is None:
            causes.append(
                _forbidden("status.reservedFor", "may not be specified when `allocated` is not set")
            )
        elif _dict(new.get("metadata")).get("deletionTimestamp"):
            old_uids = {str(_dict(r).get("uid")) for r in _list(old_status.get("reservedFor"))}
            if uids - old_uids:
                causes.append(
                    _forbidden(
                        "status.reservedFor",
                        "new entries may not be added while `deallocationRequested` or "
                        "`deletionTimestamp` are set",
                    )
                )
    if allocation is not None and old_allocation is not None:
        if allocation != old_allocation:
            causes.append(_immutable("status.allocation", allocation))
    elif isinstance(allocation, dict):
        causes.extend(
            _allocation_problems(
                allocation, "status.allocation", request_names(_dict(new.get("spec")))
            )
        )
    elif allocation is not None:
        causes.append(_invalid("status.allocation", allocation, "must be an object"))
    return causes


def validate_resource_claim_update(new: JsonObj, old: JsonObj) -> list[Cause]:
    """The spec is immutable; the status follows `claim_status_problems`."""
    causes: list[Cause] = []
    if new.get("spec") != old.get("spec"):
        causes.append(_immutable("spec", new.get("spec")))
    causes.extend(claim_status_problems(new, old))
    return causes


# --- templates and classes -------------------------------------------------------------------


def validate_resource_claim_template(obj: JsonObj) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [_required("spec")]
    causes: list[Cause] = []
    metadata = _dict(spec.get("metadata"))
    for part in ("labels", "annotations"):
        for key in _dict(metadata.get(part)):
            causes.extend(qualified_name_problems(str(key), f"spec.metadata.{part}"))
    causes.extend(claim_spec_problems(spec.get("spec"), "spec.spec"))
    return causes


def validate_resource_claim_template_update(new: JsonObj, old: JsonObj) -> list[Cause]:
    if new.get("spec") != old.get("spec"):
        return [_immutable("spec", new.get("spec"))]
    return []


def validate_device_class(obj: JsonObj) -> list[Cause]:
    spec = obj.get("spec")
    if spec is None:
        return []
    if not isinstance(spec, dict):
        return [_invalid("spec", spec, "must be an object")]
    causes = _selectors_problems(spec.get("selectors"), "spec.selectors")
    configs, more = _list_problems(spec.get("config"), "spec.config", CONFIG_MAX)
    causes.extend(more)
    for index, config in enumerate(configs):
        causes.extend(_opaque_problems(config, f"spec.config[{index}]"))
    return causes


# --- slices ----------------------------------------------------------------------------------

_ATTRIBUTE_TYPES = ("bool", "int", "string", "version")


def _attribute_problems(value: Any, field: str) -> list[Cause]:
    if not isinstance(value, dict):
        return [_invalid(field, value, "exactly one value must be specified")]
    present = [kind for kind in _ATTRIBUTE_TYPES if kind in value]
    if len(present) != 1:
        return [_invalid(field, value, "exactly one value must be specified")]
    kind = present[0]
    item = value[kind]
    where = f"{field}.{kind}"
    if kind == "bool" and not isinstance(item, bool):
        return [_invalid(where, item, "must be a boolean")]
    if kind == "int" and (isinstance(item, bool) or not isinstance(item, int)):
        return [_invalid(where, item, "must be an integer")]
    if kind in ("string", "version"):
        if not isinstance(item, str):
            return [_invalid(where, item, "must be a string")]
        causes = []
        if kind == "version" and not _SEMVER.match(item):
            causes.append(
                _invalid(where, item, "must be a string compatible with semver.org spec 2.0.0")
            )
        if len(item) > ATTRIBUTE_VALUE_MAX:
            causes.append(_too_long(where, ATTRIBUTE_VALUE_MAX))
        return causes
    return []


def _device_problems(device: Any, field: str) -> list[Cause]:
    if not isinstance(device, dict):
        return [_invalid(field, device, "must be an object")]
    causes: list[Cause] = []
    name = device.get("name")
    if not isinstance(name, str) or not name:
        causes.append(_required(f"{field}.name"))
    else:
        causes.extend(dns_label_problems(name, f"{field}.name"))
    attributes = _dict(device.get("attributes"))
    capacity = _dict(device.get("capacity"))
    total = len(attributes) + len(capacity)
    if total > ATTRIBUTES_AND_CAPACITIES_MAX:
        causes.append(
            _invalid(
                field,
                total,
                "the total number of attributes and capacities must not exceed "
                f"{ATTRIBUTES_AND_CAPACITIES_MAX}",
            )
        )
    for key, value in attributes.items():
        where = f"{field}.attributes[{key}]"
        causes.extend(qualified_attribute_problems(str(key), f"{field}.attributes"))
        causes.extend(_attribute_problems(value, where))
    for key, value in capacity.items():
        causes.extend(qualified_attribute_problems(str(key), f"{field}.capacity"))
        quantity = _dict(value).get("value")
        if not isinstance(quantity, str | int) or not _QUANTITY.match(str(quantity)):
            causes.append(
                _invalid(f"{field}.capacity[{key}].value", quantity, "must be a valid quantity")
            )
    if any(key in device for key in ("nodeName", "nodeSelector", "allNodes")):
        causes.append(
            _invalid(
                field,
                None,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            )
        )
    return causes


def _node_selection_problems(spec: JsonObj) -> list[Cause]:
    causes: list[Cause] = []
    chosen: list[str] = []
    node_name = spec.get("nodeName")
    if node_name is not None:
        if node_name == "":
            causes.append(
                _invalid("spec.nodeName", "", "must be either unset or set to a non-empty string")
            )
        else:
            chosen.append("`nodeName`")
            causes.extend(dns_subdomain_problems(str(node_name), "spec.nodeName"))
    if spec.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        terms = _list(_dict(spec.get("nodeSelector")).get("nodeSelectorTerms"))
        if len(terms) != 1:
            causes.append(
                _invalid(
                    "spec.nodeSelector.nodeSelectorTerms",
                    terms,
                    "must have exactly one node selector term",
                )
            )
    for key in ("allNodes", "perDeviceNodeSelection"):
        value = spec.get(key)
        if value is True:
            chosen.append(f"`{key}`")
        elif value is not None:
            causes.append(_invalid(f"spec.{key}", value, "must be either unset or set to true"))
    which = (
        "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is "
        "required"
    )
    if not chosen:
        causes.append(_required("spec", which))
    elif len(chosen) > 1:
        causes.append(
            _invalid("spec", "{" + ", ".join(chosen) + "}", which + ", but multiple fields are set")
        )
    return causes


def validate_resource_slice(obj: JsonObj) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [_required("spec")]
    causes = driver_name_problems(spec.get("driver"), "spec.driver")
    pool = spec.get("pool")
    if not isinstance(pool, dict):
        causes.append(_required("spec.pool.name"))
        causes.append(_invalid("spec.pool.resourceSliceCount", 0, "must be greater than zero"))
    else:
        causes.extend(pool_name_problems(pool.get("name"), "spec.pool.name"))
        count = pool.get("resourceSliceCount", 0)
        if not isinstance(count, int) or count <= 0:
            causes.append(
                _invalid("spec.pool.resourceSliceCount", count, "must be greater than zero")
            )
        generation = pool.get("generation", 0)
        if not isinstance(generation, int) or generation < 0:
            causes.append(
                _invalid(
                    "spec.pool.generation", generation, "must be greater than or equal to zero"
                )
            )
    causes.extend(_node_selection_problems(spec))
    devices, more = _list_problems(spec.get("devices"), "spec.devices", SLICE_DEVICES_MAX)
    causes.extend(more)
    seen: set[str] = set()
    for index, device in enumerate(devices):
        where = f"spec.devices[{index}]"
        causes.extend(_device_problems(device, where))
        name = _dict(device).get("name")
        if isinstance(name, str) and name:
            if name in seen:
                causes.append(_duplicate(where, name))
            seen.add(name)
    return causes


def validate_resource_slice_update(new: JsonObj, old: JsonObj) -> list[Cause]:
    causes = validate_resource_slice(new)
    new_spec, old_spec = _dict(new.get("spec")), _dict(old.get("spec"))
    new_pool = _dict(new_spec.get("pool")).get("name")
    if new_pool != _dict(old_spec.get("pool")).get("name"):
        causes.append(_immutable("spec.pool.name", new_pool))
    for key in ("driver", "nodeName"):
        if new_spec.get(key) != old_spec.get(key):
            causes.append(_immutable(f"spec.{key}", new_spec.get(key)))
    return causes


def default_resource_slice(obj: JsonObj) -> None:
    """`pool.generation` is a plain integer in the API: absent means 0."""
    pool = _dict(obj.get("spec")).get("pool")
    if isinstance(pool, dict):
        pool.setdefault("generation", 0)


# --- pods ------------------------------------------------------------------------------------


def pod_claim_problems(spec: JsonObj) -> list[Cause]:
    """`spec.resourceClaims` and the containers' `resources.claims` that refer to them."""
    claims, causes = _list_problems(
        spec.get("resourceClaims"), "spec.resourceClaims", POD_CLAIMS_MAX
    )
    names: set[str] = set()
    for index, item in enumerate(claims):
        where = f"spec.resourceClaims[{index}]"
        claim = _dict(item)
        name = claim.get("name")
        if not isinstance(name, str) or not name:
            causes.append(_required(f"{where}.name"))
        else:
            causes.extend(dns_label_problems(name, f"{where}.name"))
            if name in names:
                causes.append(_duplicate(f"{where}.name", name))
            names.add(name)
        by_name = claim.get("resourceClaimName")
        by_template = claim.get("resourceClaimTemplateName")
        if by_name and by_template:
            causes.append(
                _invalid(
                    where,
                    claim,
                    "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be set",
                )
            )
        elif not by_name and not by_template:
            causes.append(
                _required(
                    where, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
                )
            )
        else:
            field = "resourceClaimName" if by_name else "resourceClaimTemplateName"
            causes.extend(dns_subdomain_problems(str(by_name or by_template), f"{where}.{field}"))
    for group in ("initContainers", "containers"):
        for index, container in enumerate(_list(spec.get(group))):
            refs = _list(_dict(_dict(container).get("resources")).get("claims"))
            seen: set[str] = set()
            for ref_index, ref in enumerate(refs):
                where = f"spec.{group}[{index}].resources.claims[{ref_index}]"
                name = _dict(ref).get("name")
                if not name:
                    causes.append(_required(where))
                elif name not in names:
                    causes.append(
                        Cause(
                            where,
                            "FieldValueNotFound",
                            f'Not found: "{name}": must be one of the names in '
                            "pod.spec.resourceClaims",
                        )
                    )
                else:
                    key = f"{name}/{_dict(ref).get('request', '')}"
                    if key in seen:
                        causes.append(_duplicate(where, name))
                    seen.add(key)
    return causes
