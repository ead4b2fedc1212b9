"""kube-controller-manager's ResourceClaim controller, as the emulator runs it.

For every `spec.resourceClaims` entry of a pod that names a `resourceClaimTemplateName`, it
creates a ResourceClaim from the template (generateName `<pod>-<claim>-`, owned by the pod, with
the annotation `resource.kubernetes.io/pod-claim-name`) and records it in the pod's
`status.resourceClaimStatuses`. It keeps claims' `status.reservedFor` honest: a pod that is gone,
replaced (another uid) or done (Succeeded/Failed, or deleted before it was bound) is removed.
When that leaves a claim reserved for nobody and the claim carries the finalizer
`resource.kubernetes.io/delete-protection` (which kube-scheduler adds when it allocates), the
allocation is cleared and the finalizer removed, as v1.34 does; a claim without the finalizer
keeps its allocation. A deleted claim with the finalizer and no consumers is deallocated and
released. A claim generated for a pod that will not run (done or replaced) is deleted; one whose
pod is deleted goes with it (garbage collection of the owner reference).
"""

from __future__ import annotations

import asyncio
import copy
import logging

from voltpack.emulator.dra.kubelet import pod_claim_names
from voltpack.emulator.errors import ApiError
from voltpack.emulator.objects import JsonObj, is_deleting, meta, name_of, namespace_of
from voltpack.emulator.operations import Operations
from voltpack.emulator.resources import PODS, RESOURCECLAIMS, RESOURCECLAIMTEMPLATES
from voltpack.emulator.store import DELETED, Event

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
GENERATE_NAME_BASE_MAX = 57
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

log = logging.getLogger(__name__)


def is_pod_done(pod: JsonObj) -> bool:
    """No container of the pod runs or ever will: terminal, or deleted before being bound."""
    phase = (pod.get("status") or {}).get("phase")
    unbound = not (pod.get("spec") or {}).get("nodeName")
    return phase in TERMINAL_PHASES or (is_deleting(pod) and unbound)


def owning_pod(claim: JsonObj) -> tuple[str, str] | None:
    """(name, uid) of the pod that controls a claim generated from a template, if any."""
    for owner in meta(claim).get("ownerReferences") or []:
        if (
            isinstance(owner, dict)
            and owner.get("controller") is True
            and owner.get("apiVersion") == "v1"
            and owner.get("kind") == "Pod"
        ):
            return str(owner.get("name")), str(owner.get("uid"))
    return None


def claim_from_template(pod: JsonObj, pod_claim: str, template: JsonObj) -> JsonObj:
    """The ResourceClaim the controller creates for a pod's claim from a template."""
    template_spec = template.get("spec") or {}
    template_meta = template_spec.get("metadata") or {}
    base = f"{name_of(pod)}-{pod_claim}"[:GENERATE_NAME_BASE_MAX]
    annotations = dict(template_meta.get("annotations") or {})
    annotations[POD_CLAIM_NAME_ANNOTATION] = pod_claim
    metadata: JsonObj = {
        "generateName": f"{base}-",
        "namespace": namespace_of(pod),
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": name_of(pod),
                "uid": meta(pod).get("uid"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if template_meta.get("labels"):
        metadata["labels"] = dict(template_meta["labels"])
    return {
        "apiVersion": RESOURCECLAIMS.api_version,
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": copy.deepcopy(template_spec.get("spec") or {}),
    }


class ResourceClaimController:
    """Runs the controller's syncs on the server's loop, after the store changes."""

    def __init__(self, ops: Operations) -> None:
        self._ops = ops
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[tuple[str, str, str]] = set()
        ops.store.subscribe(self._on_event)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        for pod in self._ops.store.objects(PODS.key):
            self._enqueue("pod", namespace_of(pod), name_of(pod))
        for claim in self._ops.store.objects(RESOURCECLAIMS.key):
            self._enqueue("claim", namespace_of(claim), name_of(claim))

    def stop(self) -> None:
        self._loop = None
        self._pending.clear()

    # --- queue -------------------------------------------------------------------------------

    def _enqueue(self, kind: str, namespace: str, name: str) -> None:
        if self._loop is None:
            return
        item = (kind, namespace, name)
        if item in self._pending:
            return
        self._pending.add(item)
        self._loop.call_soon(self._run, item)

    def _run(self, item: tuple[str, str, str]) -> None:
        self._pending.discard(item)
        if self._loop is None:
            return
        kind, namespace, name = item
        try:
            if kind == "pod":
                self._sync_pod(namespace, name)
            else:
                self._sync_claim(namespace, name)
        except ApiError as error:
            log.warning("resourceclaim controller: %s %s/%s: %s", kind, namespace, name, error)
        except Exception:
            log.exception("resourceclaim controller: %s %s/%s failed", kind, namespace, name)

    def _on_event(self, event: Event) -> None:
        if self._loop is None:
            return
        namespace, name = namespace_of(event.obj), name_of(event.obj)
        if event.key == PODS.key:
            if event.type != DELETED and (event.obj.get("spec") or {}).get("resourceClaims"):
                self._enqueue("pod", namespace, name)
            self._claims_reserved_for(event.obj)
        elif event.key == RESOURCECLAIMS.key and event.type != DELETED:
            self._enqueue("claim", namespace, name)
        elif event.key == RESOURCECLAIMTEMPLATES.key and event.type != DELETED:
            for pod in self._ops.store.objects(PODS.key, namespace):
                if (pod.get("spec") or {}).get("resourceClaims"):
                    self._enqueue("pod", namespace, name_of(pod))

    def _claims_reserved_for(self, pod: JsonObj) -> None:
        """Queue the claims that list this pod, and those generated for it."""
        uid = meta(pod).get("uid")
        namespace = namespace_of(pod)
        for claim in self._ops.store.objects(RESOURCECLAIMS.key, namespace):
            status = claim.get("status") or {}
            reserved = any(
                isinstance(ref, dict) and ref.get("uid") == uid
                for ref in status.get("reservedFor") or []
            )
            owner = owning_pod(claim)
            if reserved or (owner is not None and owner[1] == uid):
                self._enqueue("claim", namespace, name_of(claim))

    # --- syncs -------------------------------------------------------------------------------

    def _sync_pod(self, namespace: str, name: str) -> None:
        pod = self._ops.store.get(PODS.key, namespace, name)
        if pod is None or is_deleting(pod) or is_pod_done(pod):
            return
        templates = {
            str(c.get("name")): str(c.get("resourceClaimTemplateName"))
            for c in (pod.get("spec") or {}).get("resourceClaims") or []
            if isinstance(c, dict) and c.get("resourceClaimTemplateName")
        }
        missing = [claim for claim, generated in pod_claim_names(pod) if generated is None]
        created: list[JsonObj] = []
        for pod_claim in missing:
            if pod_claim not in templates:
                continue
            existing = self._generated_claim(pod, pod_claim)
            if existing is None:
                template = self._ops.store.get(
                    RESOURCECLAIMTEMPLATES.key, namespace, templates[pod_claim]
                )
                if template is None:
                    continue  # retried when the template is created
                body = claim_from_template(pod, pod_claim, template)
                existing = self._ops.create(RESOURCECLAIMS, namespace, body).obj
            created.append({"name": pod_claim, "resourceClaimName": name_of(existing)})
        if not created:
            return
        uid = meta(pod).get("uid")

        def record(current: JsonObj) -> None:
            if meta(current).get("uid") != uid:
                return
            status = current.setdefault("status", {})
            statuses = list(status.get("resourceClaimStatuses") or [])
            known = {entry.get("name") for entry in statuses if isinstance(entry, dict)}
            statuses.extend(entry for entry in created if entry["name"] not in known)
            status["resourceClaimStatuses"] = statuses

        self._ops.write_status(PODS, namespace, name, record)

    def _generated_claim(self, pod: JsonObj, pod_claim: str) -> JsonObj | None:
        uid = meta(pod).get("uid")
        for claim in self._ops.store.objects(RESOURCECLAIMS.key, namespace_of(pod)):
            owner = owning_pod(claim)
            annotations = meta(claim).get("annotations") or {}
            if (
                owner is not None
                and owner[1] == uid
                and annotations.get(POD_CLAIM_NAME_ANNOTATION) == pod_claim
            ):
                return claim
        return None

    def _consumer_alive(self, namespace: str, ref: JsonObj) -> bool:
        if ref.get("resource") != "pods" or ref.get("apiGroup"):
            return True  # only pods are checked, as by kube-controller-manager
        pod = self._ops.store.get(PODS.key, namespace, str(ref.get("name")))
        return pod is not None and meta(pod).get("uid") == ref.get("uid") and not is_pod_done(pod)

    def _sync_claim(self, namespace: str, name: str) -> None:
        claim = self._ops.store.get(RESOURCECLAIMS.key, namespace, name)
        if claim is None:
            return
        status = claim.get("status") or {}
        reserved = [r for r in status.get("reservedFor") or [] if isinstance(r, dict)]
        valid = [r for r in reserved if self._consumer_alive(namespace, r)]
        protected = DELETE_PROTECTION_FINALIZER in (meta(claim).get("finalizers") or [])
        if len(valid) < len(reserved) or (protected and is_deleting(claim) and not valid):
            new_status = copy.deepcopy(status)
            if valid:
                new_status["reservedFor"] = valid
            else:
                new_status.pop("reservedFor", None)
                if protected:
                    new_status.pop("allocation", None)
            if new_status != status:
                updated = copy.deepcopy(claim)
                updated["status"] = new_status
                claim = self._ops.update(
                    RESOURCECLAIMS, namespace, name, updated, subresource="status"
                ).obj
            if protected and not (claim.get("status") or {}).get("allocation"):
                released = copy.deepcopy(claim)
                meta(released)["finalizers"] = [
                    f
                    for f in meta(claim).get("finalizers") or []
                    if f != DELETE_PROTECTION_FINALIZER
                ]
                self._ops.update(RESOURCECLAIMS, namespace, name, released)
        if valid or is_deleting(claim):
            return
        owner = owning_pod(claim)
        if owner is None:
            return
        pod = self._ops.store.get(PODS.key, namespace, owner[0])
        if pod is not None and (meta(pod).get("uid") != owner[1] or is_pod_done(pod)):
            self._ops.delete(RESOURCECLAIMS, namespace, name)
