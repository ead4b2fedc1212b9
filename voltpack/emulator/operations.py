"""The verbs of the API (get, list, create, update, patch, delete, bind) on the store.

This is where Kubernetes object semantics live: system metadata (uid, creationTimestamp,
resourceVersion, generation), optimistic concurrency, status subresources, dry runs,
custom-resource schemas (`schema.py`) and per-type rules (`strategies.py`); deletion is in
`deletion.py` and binding in `binding.py`. Every method runs synchronously on the server's
event-loop thread, so each is atomic.
"""

from __future__ import annotations

import base64
import binascii
import copy
import dataclasses
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from voltpack.emulator.admission import cel, priority, strategies
from voltpack.emulator.admission.schema import apply_defaults, prune
from voltpack.emulator.admission.schema import validate as validate_schema
from voltpack.emulator.admission.validation import validate_metadata
from voltpack.emulator.binding import bind
from voltpack.emulator.deletion import Deletion
from voltpack.emulator.errors import (
    STALE_OBJECT,
    ApiError,
    Cause,
    already_exists,
    bad_request,
    conflict,
    expired,
    forbidden,
    invalid,
    method_not_allowed,
    not_found,
    precondition_failed,
    unsupported_media_type,
)
from voltpack.emulator.objects import (
    Clock,
    JsonObj,
    finalizers_of,
    generated_name,
    is_deleting,
    meta,
    name_of,
    namespace_of,
    new_uid,
    resource_version_of,
    timestamp,
)
from voltpack.emulator.patch import (
    PatchApplyError,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from voltpack.emulator.resources import (
    CRDS,
    NAMESPACES,
    PODS,
    PRIORITYCLASSES,
    ResourceRegistry,
    ResourceType,
)
from voltpack.emulator.selectors import FieldSelector, LabelSelector
from voltpack.emulator.store import Store
from voltpack.model import safe_yaml

PROTECTED_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_SERVER_SET = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "managedFields",
)

_OMIT_WHEN_EMPTY = frozenset(
    {"labels", "annotations", "finalizers", "ownerReferences", "managedFields", "generateName"}
)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


@dataclass(frozen=True)
class WriteOptions:
    """`?dryRun=All` and `?fieldValidation=` (Strict, Warn or Ignore) of a write."""

    dry_run: bool = False
    field_validation: str = "Warn"


@dataclass(frozen=True)
class DeleteOptions:
    """The parts of a v1 DeleteOptions the emulator honours."""

    dry_run: bool = False
    grace_period_s: int | None = None
    propagation_policy: str | None = None
    precondition_uid: str | None = None
    precondition_rv: str | None = None

    @staticmethod
    def from_json(options: JsonObj) -> DeleteOptions:
        """From a v1 DeleteOptions body (as an Eviction's `deleteOptions` carries one)."""
        grace = options.get("gracePeriodSeconds")
        preconditions = options.get("preconditions") or {}
        return DeleteOptions(
            dry_run=bool(options.get("dryRun")),
            grace_period_s=int(grace) if grace is not None else None,
            propagation_policy=options.get("propagationPolicy"),
            precondition_uid=preconditions.get("uid"),
            precondition_rv=preconditions.get("resourceVersion"),
        )


@dataclass(frozen=True)
class ListOptions:
    labels: LabelSelector = field(default_factory=LabelSelector)
    fields: FieldSelector = field(default_factory=FieldSelector)
    limit: int | None = None
    continue_token: str | None = None


@dataclass
class Written:
    """The object a write returns, whether it was created, and warnings for the client."""

    obj: JsonObj
    created: bool = False
    warnings: list[str] = field(default_factory=list)


def _encode_continue(rv: int, namespace: str, name: str) -> str:
    raw = json.dumps({"rv": rv, "ns": namespace, "name": name}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> tuple[int, str, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), str(data["ns"]), str(data["name"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise bad_request(f"invalid continue token {token!r}") from None


class Operations:
    """API verbs with Kubernetes semantics over a `Store` and a `ResourceRegistry`."""

    def __init__(
        self, store: Store, registry: ResourceRegistry, clock: Clock, rng: random.Random
    ) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self.rng = rng
        self.deletion = Deletion(store, registry, clock)
        self.graceful_pod_deletion: Callable[[JsonObj], bool] = lambda pod: False
        """Set by the lifecycle simulator: whether deleting this pod waits for its "kubelet"."""

    # --- helpers ---------------------------------------------------------------------------

    @staticmethod
    def present(rtype: ResourceType, obj: JsonObj) -> JsonObj:
        """The stored object as the requested version shows it (custom resources convert)."""
        if obj.get("apiVersion") == rtype.api_version and obj.get("kind") == rtype.kind:
            return obj
        shown = dict(obj)
        shown["apiVersion"] = rtype.api_version
        shown["kind"] = rtype.kind
        return shown

    @staticmethod
    def _stored_form(rtype: ResourceType, obj: JsonObj) -> JsonObj:
        if rtype.custom and rtype.storage_version and rtype.version != rtype.storage_version:
            obj["apiVersion"] = f"{rtype.group}/{rtype.storage_version}"
        return obj

    @staticmethod
    def _scope(rtype: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if rtype.namespaced else ""

    def _now(self) -> str:
        return timestamp(self.clock())

    def _invalid(self, rtype: ResourceType, name: str, causes: list[Cause]) -> ApiError:
        return invalid(rtype.kind, rtype.group, name, causes)

    def _check_uid(self, rtype: ResourceType, name: str, new: JsonObj, old: JsonObj) -> None:
        """A uid in an update or patch must be the object's own (it is how clients say
        "this object, not one re-created under its name"); else 422, as kube-apiserver."""
        uid = new.get("uid")
        if uid and uid != old.get("uid"):
            why = f'Invalid value: "{uid}": field is immutable'
            raise self._invalid(rtype, name, [Cause("metadata.uid", "FieldValueInvalid", why)])

    def _require(self, rtype: ResourceType, namespace: str, name: str) -> JsonObj:
        obj = self.store.get(rtype.key, namespace, name)
        if obj is None:
            raise not_found(rtype.plural, rtype.group, name)
        return obj

    def _decode(self, rtype: ResourceType, body: Any) -> JsonObj:
        if not isinstance(body, dict):
            raise bad_request(
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json, application/yaml"
            )
        obj = copy.deepcopy(body) if rtype.custom else self._drop_nulls(body)
        kind = obj.get("kind")
        api_version = obj.get("apiVersion")
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
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        if not isinstance(obj.get("metadata"), dict):
            obj["metadata"] = {}
        return obj

    @staticmethod
    def _drop_nulls(value: Any) -> Any:
        """Built-in objects cannot hold JSON nulls (the server's typed decoding omits them)."""
        if isinstance(value, dict):
            return {k: Operations._drop_nulls(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [Operations._drop_nulls(v) for v in value]
        return value

    @staticmethod
    def _normalize_metadata(obj: JsonObj) -> None:
        """Drop empty and null metadata fields, as the server's encoding omits them."""
        metadata = meta(obj)
        for key in list(metadata):
            value = metadata[key]
            if value is None or (key in _OMIT_WHEN_EMPTY and not value):
                del metadata[key]

    def _check_namespace(self, rtype: ResourceType, namespace: str, obj: JsonObj) -> None:
        metadata = meta(obj)
        if not rtype.namespaced:
            metadata.pop("namespace", None)
            return
        given = metadata.get("namespace")
        if given and given != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        metadata["namespace"] = namespace

    def _apply_schema(self, rtype: ResourceType, obj: JsonObj, options: WriteOptions) -> list[str]:
        """Prune, default and validate a custom resource; returns warnings."""
        if rtype.schema is None:
            return []
        pruned = prune(obj, rtype.schema)
        warnings: list[str] = []
        if pruned:
            if options.field_validation == "Strict":
                listed = ", ".join(f'unknown field "{path}"' for path in pruned)
                raise bad_request(f"strict decoding error: {listed}")
            if options.field_validation != "Ignore":
                warnings.extend(f'unknown field "{path}"' for path in pruned)
        apply_defaults(obj, rtype.schema)
        causes = validate_schema(obj, rtype.schema)
        if causes and cel.has_rules(rtype.schema):
            causes.append(Cause("<nil>", "FieldValueInvalid", cel.SKIPPED_RULES_MESSAGE))
        if not causes:
            causes = cel.rule_causes(obj, rtype.schema)
        if causes:
            raise self._invalid(rtype, name_of(obj), causes)
        return warnings

    def _validate(self, rtype: ResourceType, obj: JsonObj, old: JsonObj | None) -> None:
        causes = validate_metadata(rtype, obj)
        if old is None:
            causes.extend(strategies.validate(rtype, obj))
        else:
            causes.extend(strategies.validate_update(rtype, obj, old))
        if causes:
            raise self._invalid(rtype, name_of(obj), causes)

    def _admit(self, rtype: ResourceType, obj: JsonObj) -> None:
        """The admission plugins that change or refuse a new object (Priority)."""
        if rtype.key == PODS.key:
            priority.admit_pod(obj, self.store.objects(PRIORITYCLASSES.key))
        elif rtype.key == PRIORITYCLASSES.key:
            priority.admit_priority_class(obj, self.store.objects(PRIORITYCLASSES.key))

    def _check_can_create_in(self, rtype: ResourceType, obj: JsonObj) -> None:
        if rtype.namespaced:
            namespace = namespace_of(obj)
            ns_obj = self.store.get(NAMESPACES.key, "", namespace)
            if ns_obj is None:
                raise not_found("namespaces", "", namespace)
            if is_deleting(ns_obj):
                raise forbidden(
                    rtype.plural,
                    rtype.group,
                    name_of(obj),
                    f"unable to create new content in namespace {namespace} because it is "
                    "being terminated",
                )
        if rtype.custom:
            crd = self.store.get(CRDS.key, "", rtype.crd_name)
            if crd is not None and is_deleting(crd):
                raise method_not_allowed(
                    f'create not allowed while custom resource definition "{rtype.crd_name}" '
                    "is terminating"
                )

    def _after_write(self, rtype: ResourceType, stored: JsonObj) -> None:
        if rtype.key == CRDS.key:
            self.registry.register_crd(stored)

    # --- reads -----------------------------------------------------------------------------

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> JsonObj:
        return self.present(rtype, self._require(rtype, self._scope(rtype, namespace), name))

    def list(self, rtype: ResourceType, namespace: str | None, options: ListOptions) -> JsonObj:
        """A `<Kind>List` at the current resourceVersion, filtered and optionally paged."""
        scope = namespace if rtype.namespaced and namespace else None
        items = [
            obj
            for obj in self.store.objects(rtype.key, scope)
            if options.labels.matches(obj) and options.fields.matches(rtype, obj)
        ]
        list_rv = self.store.resource_version
        if options.continue_token:
            token_rv, after_ns, after_name = _decode_continue(options.continue_token)
            if token_rv < self.store.compacted_rv:
                raise expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."
                )
            list_rv = token_rv
            items = [o for o in items if (namespace_of(o), name_of(o)) > (after_ns, after_name)]
        list_meta: JsonObj = {"resourceVersion": str(list_rv)}
        if options.limit and options.limit > 0 and len(items) > options.limit:
            remaining = len(items) - options.limit
            items = items[: options.limit]
            last = items[-1]
            list_meta["continue"] = _encode_continue(list_rv, namespace_of(last), name_of(last))
            if options.labels.empty and options.fields.empty:
                # kube-apiserver counts what remains only when no selector filters the list
                list_meta["remainingItemCount"] = remaining
        if rtype.custom:
            list_meta.setdefault("continue", "")  # an unstructured list always writes it
        shown = [self.present(rtype, obj) for obj in items]
        if not rtype.custom:
            shown = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in shown]
        return {
            "kind": rtype.list_kind,
            "apiVersion": rtype.api_version,
            "metadata": list_meta,
            "items": shown,
        }

    # --- create ----------------------------------------------------------------------------

    def create(
        self,
        rtype: ResourceType,
        namespace: str | None,
        body: Any,
        options: WriteOptions | None = None,
    ) -> Written:
        options = options or WriteOptions()
        if "create" not in rtype.verbs or rtype.key == "bindings":
            raise method_not_allowed()
        obj = self._decode(rtype, body)
        self._check_namespace(rtype, self._scope(rtype, namespace), obj)
        metadata = meta(obj)
        if metadata.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        if not metadata.get("name") and metadata.get("generateName"):
            for _ in range(10):
                candidate = generated_name(str(metadata["generateName"]), self.rng)
                if self.store.get(rtype.key, namespace_of(obj), candidate) is None:
                    break
            metadata["name"] = candidate
        for key in _SERVER_SET:
            metadata.pop(key, None)
        metadata["uid"] = new_uid()
        metadata["creationTimestamp"] = self._now()
        if rtype.tracks_generation:
            metadata["generation"] = 1
        self._admit(rtype, obj)
        strategies.prepare_create(rtype, obj, self.clock())
        strategies.serialized_nulls(rtype, obj)
        self._normalize_metadata(obj)
        warnings = self._apply_schema(rtype, obj, options) if rtype.custom else []
        self._validate(rtype, obj, None)
        self._check_can_create_in(rtype, obj)
        if self.store.get(rtype.key, namespace_of(obj), name_of(obj)) is not None:
            raise already_exists(rtype.plural, rtype.group, name_of(obj))
        if options.dry_run:
            return Written(obj, created=True, warnings=warnings)
        stored = self.store.create(rtype.key, self._stored_form(rtype, obj))
        self._after_write(rtype, stored)
        return Written(self.present(rtype, stored), created=True, warnings=warnings)

    # --- update and patch ------------------------------------------------------------------

    def update(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str = "",
        options: WriteOptions | None = None,
    ) -> Written:
        options = options or WriteOptions()
        scope = self._scope(rtype, namespace)
        old = self._require(rtype, scope, name)
        obj = self._decode(rtype, body)
        return self._update_from(rtype, scope, name, obj, old, subresource, options, patch=False)

    def _update_from(
        self,
        rtype: ResourceType,
        scope: str,
        name: str,
        obj: JsonObj,
        old: JsonObj,
        subresource: str,
        options: WriteOptions,
        *,
        patch: bool,
    ) -> Written:
        metadata = meta(obj)
        body_name = metadata.get("name")
        if body_name and body_name != name:
            raise bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        metadata["name"] = name
        self._check_namespace(rtype, scope, obj)
        requested_rv = metadata.get("resourceVersion")
        if requested_rv and requested_rv != resource_version_of(old):
            raise conflict(rtype.plural, rtype.group, name, STALE_OBJECT)
        if not requested_rv and not patch and not rtype.allow_unconditional_update:
            # kube-apiserver names a custom resource by its plural here, with the value 0
            value = "0" if rtype.custom else "0x0"
            why = f"Invalid value: {value}: must be specified for an update"
            cause = Cause("metadata.resourceVersion", "FieldValueInvalid", why)
            kind = rtype.plural if rtype.custom else rtype.kind
            raise invalid(kind, rtype.group, name, [cause])
        old_view = copy.deepcopy(self.present(rtype, old))
        if subresource == "status":
            self._check_uid(rtype, name, meta(obj), meta(old_view))
            new = copy.deepcopy(old_view)
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            strategies.prepare_status_update(rtype, new, obj, old_view)
        else:
            new = obj
            new_meta = meta(new)
            old_meta = meta(old_view)
            self._check_uid(rtype, name, new_meta, old_meta)
            for key in _SERVER_SET:
                if key in old_meta:
                    new_meta[key] = copy.deepcopy(old_meta[key])
                else:
                    new_meta.pop(key, None)
            if rtype.has_status:
                if "status" in old_view:
                    new["status"] = copy.deepcopy(old_view["status"])
                else:
                    new.pop("status", None)
            strategies.prepare_update(rtype, new, old_view, self.clock())
        strategies.serialized_nulls(rtype, new)
        meta(new)["resourceVersion"] = resource_version_of(old)
        self._normalize_metadata(new)
        warnings = self._apply_schema(rtype, new, options) if rtype.custom else []
        self._validate(rtype, new, old_view)
        if is_deleting(old):
            added = set(finalizers_of(new)) - set(finalizers_of(old))
            if added:
                raise self._invalid(
                    rtype,
                    name,
                    [
                        Cause(
                            "metadata.finalizers",
                            "FieldValueForbidden",
                            "Forbidden: no new finalizers can be added if the object is being "
                            f"deleted, found new finalizers {sorted(added)}",
                        )
                    ],
                )
        if rtype.tracks_generation and strategies.spec_changed(rtype, new, old_view):
            meta(new)["generation"] = int(meta(old_view).get("generation") or 0) + 1
        if new == old_view:
            return Written(self.present(rtype, old), warnings=warnings)
        if options.dry_run:
            return Written(new, warnings=warnings)
        if is_deleting(old) and not finalizers_of(new):
            gone = self.deletion.remove(rtype, self._stored_form(rtype, new), "Background")
            return Written(self.present(rtype, gone), warnings=warnings)
        stored = self.store.update(rtype.key, self._stored_form(rtype, new))
        self._after_write(rtype, stored)
        return Written(self.present(rtype, stored), warnings=warnings)

    def patch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        raw: bytes,
        subresource: str = "",
        options: WriteOptions | None = None,
    ) -> Written:
        options = options or WriteOptions()
        scope = self._scope(rtype, namespace)
        if patch_type == APPLY_PATCH:
            return self._apply(rtype, scope, name, raw, subresource, options)
        if patch_type not in PATCH_TYPES:
            raise unsupported_media_type(
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join(PATCH_TYPES)}"
            )
        if patch_type == STRATEGIC_PATCH and not rtype.strategic_merge:
            # as kube-apiserver answers it: no details, the media types a custom resource takes
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types "
                f"include: {JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}",
            )
        try:
            document = json.loads(raw or b"null")
        except ValueError as exc:
            raise bad_request(f"error decoding patch: {exc}") from None
        old = self._require(rtype, scope, name)
        current = copy.deepcopy(self.present(rtype, old))
        try:
            if patch_type == JSON_PATCH:
                patched = json_patch(current, document)
            elif patch_type == MERGE_PATCH:
                if not isinstance(document, dict):
                    raise bad_request("a merge patch must be a JSON object")
                patched = merge_patch(current, document)
            else:
                patched = strategic_merge_patch(current, document)
        except PatchApplyError as exc:
            raise ApiError(422, "Invalid", str(exc), {}) from None
        if not isinstance(patched, dict):
            raise ApiError(422, "Invalid", "the patched document is not a JSON object")
        obj = self._decode(rtype, patched)
        return self._update_from(rtype, scope, name, obj, old, subresource, options, patch=True)

    def _apply(
        self,
        rtype: ResourceType,
        scope: str,
        name: str,
        raw: bytes,
        subresource: str,
        options: WriteOptions,
    ) -> Written:
        """Server-side apply, simplified: create if absent, else merge the applied fields in."""
        try:
            applied = safe_yaml.safe_load(raw.decode("utf-8") or "null")
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise bad_request(f"error decoding YAML: {exc}") from None
        obj = self._decode(rtype, applied)
        old = self.store.get(rtype.key, scope, name)
        if old is None:
            if subresource:
                raise not_found(rtype.plural, rtype.group, name)
            meta(obj).setdefault("name", name)
            return self.create(rtype, scope, obj, options)
        current = copy.deepcopy(self.present(rtype, old))
        merged = self._decode(rtype, merge_patch(current, obj))
        meta(merged)["resourceVersion"] = meta(obj).get("resourceVersion") or resource_version_of(
            old
        )
        return self._update_from(rtype, scope, name, merged, old, subresource, options, patch=True)

    # --- delete ----------------------------------------------------------------------------

    def delete(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        options: DeleteOptions | None = None,
    ) -> JsonObj:
        """Delete (or start deleting) an object; returns the object or a Success Status."""
        options = options or DeleteOptions()
        scope = self._scope(rtype, namespace)
        old = self._require(rtype, scope, name)
        old_meta = old.get("metadata", {})
        if options.precondition_uid and options.precondition_uid != old_meta.get("uid"):
            raise precondition_failed(
                rtype.kind,
                rtype.group,
                name,
                f"the UID in the precondition ({options.precondition_uid}) does not match the "
                f"UID in record ({old_meta.get('uid')}). The object might have been deleted "
                "and then recreated",
            )
        if options.precondition_rv and options.precondition_rv != old_meta.get("resourceVersion"):
            raise precondition_failed(
                rtype.kind,
                rtype.group,
                name,
                f"the ResourceVersion in the precondition ({options.precondition_rv}) does not "
                f"match the ResourceVersion in record ({old_meta.get('resourceVersion')}). The "
                "object might have been modified",
            )
        if rtype.key == NAMESPACES.key and name in PROTECTED_NAMESPACES:
            raise forbidden("namespaces", "", name, "this namespace may not be deleted")
        if options.dry_run:
            return self.present(rtype, old)
        if rtype.key == NAMESPACES.key:
            return self.present(rtype, self.deletion.delete_namespace(old))
        if rtype.key == CRDS.key:
            return self.present(rtype, self.deletion.delete_crd(old))
        if rtype.key == PODS.key and not finalizers_of(old):
            grace = options.grace_period_s
            if grace is None:
                grace = int((old.get("spec") or {}).get("terminationGracePeriodSeconds") or 0)
            if grace > 0 and self.graceful_pod_deletion(old):
                return self.present(rtype, self.deletion.mark_deleting(rtype, old, grace))
        if options.propagation_policy == "Orphan":
            self.deletion.orphan_dependents(old)
        result = self.deletion.delete_object(rtype, old)
        if is_deleting(result) and self.store.get(rtype.key, scope, name) is not None:
            return self.present(rtype, result)
        if rtype.return_deleted_object:
            return self.present(rtype, result)
        return self.deletion.success_status(rtype, result)

    def delete_collection(
        self,
        rtype: ResourceType,
        namespace: str | None,
        list_options: ListOptions,
        options: DeleteOptions | None = None,
    ) -> JsonObj:
        """DELETE on a collection: delete every matching object; returns them as a list."""
        if "deletecollection" not in rtype.verbs:
            raise method_not_allowed()
        listed = self.list(rtype, namespace, ListOptions(list_options.labels, list_options.fields))
        deleted = []
        for item in listed["items"]:
            ns = item.get("metadata", {}).get("namespace")
            try:
                result = self.delete(rtype, ns, name_of(item), options)
            except ApiError as exc:
                if exc.code == 404:
                    continue
                raise
            # the list names every deleted object, also kinds whose DELETE answers a Status
            shown = item if result.get("kind") == "Status" else result
            if not rtype.custom:
                shown = {k: v for k, v in shown.items() if k not in ("kind", "apiVersion")}
            deleted.append(shown)
        listed["items"] = deleted
        listed["metadata"] = {"resourceVersion": str(self.store.resource_version)}
        return listed

    # --- binding ---------------------------------------------------------------------------

    def bind(
        self,
        namespace: str,
        body: Any,
        pod_name: str | None = None,
        options: WriteOptions | None = None,
    ) -> JsonObj:
        """POST a v1 Binding (see `binding.bind`); returns the 201 Success Status."""
        dry_run = options.dry_run if options is not None else False
        return bind(self.store, self.clock, namespace, body, pod_name, dry_run)

    def evict(
        self, namespace: str, name: str, body: Any, options: WriteOptions | None = None
    ) -> JsonObj:
        """POST pods/<name>/eviction (policy/v1 Eviction): no PodDisruptionBudgets exist here,
        so the eviction is always allowed and deletes the pod; returns a 201 Success Status."""
        if not isinstance(body, dict) or body.get("kind") not in (None, "", "Eviction"):
            raise bad_request("the body of the request must be a policy/v1 Eviction")
        given = (body.get("metadata") or {}).get("name")
        if given and given != name:
            raise bad_request(
                f"name in URL does not match name in Eviction object ({given} != {name})"
            )
        raw = body.get("deleteOptions")
        delete = DeleteOptions.from_json(raw if isinstance(raw, dict) else {})
        if options is not None and options.dry_run:
            delete = dataclasses.replace(delete, dry_run=True)
        self.delete(PODS, namespace, name, delete)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    def finish_pod_deletion(self, namespace: str, name: str) -> None:
        """The "kubelet" has stopped a gracefully deleted pod: remove it (unless finalizers)."""
        self.deletion.finish_pod_deletion(namespace, name)

    # --- internal writers (lifecycle simulator, bootstrap) ---------------------------------

    def ensure_namespace(self, name: str) -> None:
        if self.store.get(NAMESPACES.key, "", name) is None:
            self.create(NAMESPACES, None, {"metadata": {"name": name}})

    def write_status(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        mutate: Callable[[JsonObj], None],
    ) -> JsonObj | None:
        """Change an object's status as a controller would (a MODIFIED event); None if gone."""
        current = self.store.get(rtype.key, namespace, name)
        if current is None:
            return None
        updated = copy.deepcopy(current)
        mutate(updated)
        if updated == current:
            return current
        return self.store.update(rtype.key, updated)
