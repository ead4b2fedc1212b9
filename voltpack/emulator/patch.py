"""The three PATCH formats: JSON merge patch, JSON patch and (simplified) strategic merge patch.

Strategic merge patch is simplified: lists named in `MERGE_KEYS` (containers, env, volumes,
conditions, ...) merge their items by that key, `finalizers` merges as a set, every other list
is replaced; the directives `$patch` (replace/delete/merge), `$deleteFromPrimitiveList/<field>`
and `$retainKeys` are honoured and `$setElementOrder/<field>` is accepted but ignored (merged
items keep the existing order, new items go last).
"""

from __future__ import annotations

import copy
from typing import Any

from voltpack.emulator.errors import ApiError, bad_request


class PatchApplyError(Exception):
    """A well-formed patch that cannot be applied to the object (422 on the server)."""


MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "topologySpreadConstraints": "topologyKey",
    "conditions": "type",
    "addresses": "type",
    "podIPs": "ip",
    "hostIPs": "ip",
    "ownerReferences": "uid",
}
"""List fields of built-in types merged item by item, and the key that identifies an item."""

SET_LISTS = frozenset({"finalizers"})
"""Lists of scalars merged as sets."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null deletes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- RFC 6902 JSON patch ---------------------------------------------------------------------


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise bad_request(f"invalid JSON pointer {path!r} in JSON patch")
    if path == "":
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], part: str, *, allow_end: bool) -> int:
    if part == "-" and allow_end:
        return len(container)
    if not part.isdigit() or (len(part) > 1 and part.startswith("0")):
        raise PatchApplyError(f"invalid array index {part!r}")
    index = int(part)
    limit = len(container) if allow_end else len(container) - 1
    if index > limit:
        raise PatchApplyError(f"array index {index} out of bounds")
    return index


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    current = doc
    for part in parts[:-1]:
        if isinstance(current, dict):
            if part not in current:
                raise PatchApplyError(f"doc is missing path: {path!r}")
            current = current[part]
        elif isinstance(current, list):
            current = current[_index(current, part, allow_end=False)]
        else:
            raise PatchApplyError(f"doc is missing path: {path!r}")
    return current


def _get(doc: Any, parts: list[str], path: str) -> Any:
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchApplyError(f"doc is missing path: {path!r}: missing value")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, allow_end=False)]
    raise PatchApplyError(f"doc is missing path: {path!r}")


def _remove(doc: Any, parts: list[str], path: str) -> Any:
    if not parts:
        raise PatchApplyError("cannot remove the whole document")
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchApplyError(f"unable to remove nonexistent key: {last}: missing value")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, allow_end=False))
    raise PatchApplyError(f"doc is missing path: {path!r}")


def _add(doc: Any, parts: list[str], value: Any, path: str, *, replace: bool) -> Any:
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchApplyError(f"replace operation does not apply: doc is missing key: {path}")
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(parent, last, allow_end=False)] = value
        else:
            parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise PatchApplyError(f"doc is missing path: {path!r}")
    return doc


def json_patch(document: Any, operations: Any) -> Any:
    """Apply an RFC 6902 JSON patch; malformed patches raise 400, failing ones PatchApplyError."""
    if not isinstance(operations, list):
        raise bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch "
            "(a JSON patch is a list of operations)"
        )
    doc = copy.deepcopy(document)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation:
            raise bad_request(f"invalid JSON patch operation: {operation!r}")
        op = operation["op"]
        path = operation.get("path")
        parts = _pointer(path)
        if op in ("add", "replace", "test") and "value" not in operation:
            raise bad_request(f"JSON patch operation {op!r} at {path!r} has no value")
        path = str(path)
        if op == "add":
            doc = _add(doc, parts, copy.deepcopy(operation["value"]), path, replace=False)
        elif op == "replace":
            doc = _add(doc, parts, copy.deepcopy(operation["value"]), path, replace=True)
        elif op == "remove":
            _remove(doc, parts, path)
        elif op == "test":
            if _get(doc, parts, path) != operation["value"]:
                raise PatchApplyError(f"testing value {path} failed: test failed")
        elif op in ("move", "copy"):
            origin = str(operation.get("from"))
            source = _pointer(operation.get("from"))
            if op == "move":
                value = _remove(doc, source, origin)
            else:
                value = copy.deepcopy(_get(doc, source, origin))
            doc = _add(doc, parts, value, path, replace=False)
        else:
            raise bad_request(f"unexpected JSON patch operation {op!r}")
    return doc


# --- strategic merge patch (simplified) ------------------------------------------------------

_DELETE_FROM = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


def strip_directives(value: Any) -> Any:
    """A copy of a patch fragment without `$...` directives (for `$patch: replace`)."""
    if isinstance(value, dict):
        return {
            key: strip_directives(item) for key, item in value.items() if not key.startswith("$")
        }
    if isinstance(value, list):
        return [
            strip_directives(item)
            for item in value
            if not (isinstance(item, dict) and item.get("$patch") == "delete")
        ]
    return copy.deepcopy(value)


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch to a built-in object (see the module docstring)."""
    if not isinstance(patch, dict):
        raise bad_request("strategic merge patch must be a JSON object")
    merged = _merge_map(target if isinstance(target, dict) else {}, patch)
    return merged if merged is not None else {}


def _merge_map(original: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any] | None:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        replaced: dict[str, Any] = strip_directives(patch)
        return replaced
    if directive not in (None, "merge"):
        raise bad_request(f"unknown patch directive $patch: {directive!r}")
    result = dict(original)
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith(_SET_ORDER):
            continue
        if key.startswith(_DELETE_FROM):
            field_name = key[len(_DELETE_FROM) :]
            current = result.get(field_name)
            if isinstance(current, list) and isinstance(value, list):
                result[field_name] = [item for item in current if item not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            merged = _merge_map(current if isinstance(current, dict) else {}, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = copy.deepcopy(value)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(field_name: str, original: Any, patch: list[Any]) -> list[Any]:
    current = original if isinstance(original, list) else []
    if field_name in SET_LISTS:
        merged = list(current)
        for item in patch:
            if item not in merged:
                merged.append(copy.deepcopy(item))
        return merged
    merge_key = MERGE_KEYS.get(field_name)
    if merge_key is None or not all(isinstance(item, dict) for item in patch):
        return [strip_directives(item) for item in patch]
    if any(item.get("$patch") == "replace" for item in patch):
        return [
            strip_directives(item)
            for item in patch
            if item.get("$patch") not in ("replace", "delete")
        ]
    result = [copy.deepcopy(item) for item in current]
    for item in patch:
        if merge_key not in item:
            raise ApiError(
                422,
                "Invalid",
                f"map: {item} does not contain declared merge key: {merge_key}",
            )
        position = next(
            (
                i
                for i, existing in enumerate(result)
                if isinstance(existing, dict) and existing.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if position is not None:
                result.pop(position)
            continue
        if position is None:
            result.append(strip_directives(item))
        else:
            merged_item = _merge_map(result[position], item)
            if merged_item is None:
                result.pop(position)
            else:
                result[position] = merged_item
    return result
