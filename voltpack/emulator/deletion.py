"""Deletion: finalizers, graceful pod deletion, garbage collection, namespace and CRD teardown.

An object without finalizers is removed at once (a DELETED event); one with finalizers gets a
deletionTimestamp and stays until an update removes the last finalizer. Removing an object
garbage-collects the objects that list it in their ownerReferences (background propagation;
`Foreground` is treated as `Background`, `Orphan` strips the references instead). Deleting a
namespace marks it Terminating, deletes its content and removes it once empty; deleting a CRD
does the same with its custom resources and then stops serving them.
"""

from __future__ import annotations

import copy
from datetime import timedelta

from voltpack.emulator.objects import (
    Clock,
    JsonObj,
    finalizers_of,
    is_deleting,
    meta,
    name_of,
    namespace_of,
    timestamp,
)
from voltpack.emulator.resources import (
    CRDS,
    NAMESPACES,
    PODS,
    ResourceRegistry,
    ResourceType,
)
from voltpack.emulator.store import Store

CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
"""Put on a deleted CRD until its custom resources are gone (by kube-apiserver)."""


class Deletion:
    """The deletion machinery shared by DELETE requests, updates and the lifecycle simulator."""

    def __init__(self, store: Store, registry: ResourceRegistry, clock: Clock) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock

    def success_status(self, rtype: ResourceType, obj: JsonObj) -> JsonObj:
        details: JsonObj = {"name": name_of(obj)}
        if rtype.group:
            details["group"] = rtype.group
        details["kind"] = rtype.plural
        details["uid"] = meta(obj).get("uid", "")
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }

    def mark_deleting(self, rtype: ResourceType, obj: JsonObj, grace_s: int) -> JsonObj:
        if is_deleting(obj):
            return obj
        marked = copy.deepcopy(obj)
        moment = self.clock() + timedelta(seconds=grace_s)
        meta(marked)["deletionTimestamp"] = timestamp(moment)
        meta(marked)["deletionGracePeriodSeconds"] = grace_s
        generation = meta(marked).get("generation")
        if isinstance(generation, int) and generation > 0:
            meta(marked)["generation"] = generation + 1  # as kube-apiserver marks a deletion
        return self.store.update(rtype.key, marked)

    def delete_object(self, rtype: ResourceType, obj: JsonObj) -> JsonObj:
        """Remove an object now, or mark it deleting when finalizers remain."""
        if finalizers_of(obj):
            return self.mark_deleting(rtype, obj, 0)
        return self.remove(rtype, obj, "Background")

    def finish_pod_deletion(self, namespace: str, name: str) -> None:
        """The "kubelet" has stopped a gracefully deleted pod: remove it (unless finalizers)."""
        pod = self.store.get(PODS.key, namespace, name)
        if pod is None or not is_deleting(pod) or finalizers_of(pod):
            return
        self.remove(PODS, pod, "Background")

    def remove(self, rtype: ResourceType, obj: JsonObj, policy: str) -> JsonObj:
        namespace, name = namespace_of(obj), name_of(obj)
        gone = self.store.delete(rtype.key, namespace, name, final=obj)
        if gone is None:
            return obj
        if rtype.key == CRDS.key:
            self.registry.unregister_crd(name)
        uid = meta(obj).get("uid")
        if isinstance(uid, str):
            self._collect_dependents(uid, orphan=policy == "Orphan")
        if rtype.namespaced:
            self._maybe_finish_namespace(namespace)
        if rtype.custom:
            self._maybe_finish_crd(rtype.crd_name)
        return gone

    def orphan_dependents(self, owner: JsonObj) -> None:
        uid = meta(owner).get("uid")
        if isinstance(uid, str):
            self._collect_dependents(uid, orphan=True)

    def _collect_dependents(self, owner_uid: str, *, orphan: bool) -> None:
        """Garbage-collect (or orphan) the objects owned by a removed owner."""
        for key, namespace, name in self.store.dependents(owner_uid):
            dependent = self.store.get(key, namespace, name)
            dtype = self.registry.by_key(key)
            if dependent is None or dtype is None:
                continue
            refs = meta(dependent).get("ownerReferences") or []
            others = [r for r in refs if isinstance(r, dict) and r.get("uid") != owner_uid]
            alive = [r for r in others if self.store.find_uid(str(r.get("uid"))) is not None]
            if orphan or alive:
                updated = copy.deepcopy(dependent)
                if others:
                    meta(updated)["ownerReferences"] = others
                else:
                    meta(updated).pop("ownerReferences", None)
                self.store.update(key, updated)
            elif not is_deleting(dependent):
                self.delete_object(dtype, dependent)

    def delete_namespace(self, ns_obj: JsonObj) -> JsonObj:
        name = name_of(ns_obj)
        if not is_deleting(ns_obj):
            marked = copy.deepcopy(ns_obj)
            meta(marked)["deletionTimestamp"] = timestamp(self.clock())
            marked.setdefault("status", {})["phase"] = "Terminating"
            ns_obj = self.store.update(NAMESPACES.key, marked)
        for key in self.store.keys_in_use():
            rtype = self.registry.by_key(key)
            if rtype is None or not rtype.namespaced:
                continue
            for obj in self.store.objects(key, name):
                if not is_deleting(obj):
                    self.delete_object(rtype, obj)
        self._maybe_finish_namespace(name)
        return self.store.get(NAMESPACES.key, "", name) or ns_obj

    def _maybe_finish_namespace(self, name: str) -> None:
        ns_obj = self.store.get(NAMESPACES.key, "", name)
        if ns_obj is None or not is_deleting(ns_obj) or finalizers_of(ns_obj):
            return
        for key in self.store.keys_in_use():
            rtype = self.registry.by_key(key)
            if rtype is not None and rtype.namespaced and self.store.count(key, name):
                return
        final = copy.deepcopy(ns_obj)
        final["spec"] = {}
        self.remove(NAMESPACES, final, "Background")

    def delete_crd(self, crd: JsonObj) -> JsonObj:
        name = name_of(crd)
        if not is_deleting(crd):
            marked = copy.deepcopy(crd)
            meta(marked)["deletionTimestamp"] = timestamp(self.clock())
            finalizers = meta(marked).setdefault("finalizers", [])
            if CRD_CLEANUP_FINALIZER not in finalizers:
                finalizers.append(CRD_CLEANUP_FINALIZER)
            conditions = marked.setdefault("status", {}).setdefault("conditions", [])
            conditions.append(
                {
                    "type": "Terminating",
                    "status": "True",
                    "lastTransitionTime": timestamp(self.clock()),
                    "reason": "InstanceDeletionPending",
                    "message": "CustomResourceDefinition marked for deletion; CustomResource "
                    "deletion will begin soon",
                }
            )
            crd = self.store.update(CRDS.key, marked)
        for rtype in self.registry.custom_types(name)[:1]:
            for obj in self.store.objects(rtype.key):
                if not is_deleting(obj):
                    self.delete_object(rtype, obj)
        self._maybe_finish_crd(name)
        return self.store.get(CRDS.key, "", name) or crd

    def _maybe_finish_crd(self, name: str) -> None:
        crd = self.store.get(CRDS.key, "", name)
        if crd is None or not is_deleting(crd):
            return
        if set(finalizers_of(crd)) - {CRD_CLEANUP_FINALIZER}:
            return
        types = self.registry.custom_types(name)
        if types and self.store.count(types[0].key):
            return
        self.remove(CRDS, crd, "Background")  # the cleanup finalizer's work is done
