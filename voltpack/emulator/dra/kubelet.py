"""The kubelet's side of Dynamic Resource Allocation: may a pod's containers start yet?

A kubelet prepares a pod's ResourceClaims (through the drivers' `NodePrepareResources`) before
it starts the containers, and refuses while a claim does not exist, is not allocated, or is not
reserved for the pod (`status.reservedFor`); it reports that as a Warning Event
`FailedPrepareDynamicResources` and leaves the pod Pending.
"""

from __future__ import annotations

from voltpack.emulator.objects import JsonObj, name_of, namespace_of
from voltpack.emulator.resources import RESOURCECLAIMS
from voltpack.emulator.store import Store

FAILED_PREPARE_REASON = "FailedPrepareDynamicResources"


def pod_claim_names(pod: JsonObj) -> list[tuple[str, str | None]]:
    """(pod claim name, ResourceClaim name) per `spec.resourceClaims` entry; the ResourceClaim
    name is None while a template's claim has not been generated (no `resourceClaimStatuses`)."""
    spec = pod.get("spec") or {}
    statuses = {
        entry.get("name"): entry.get("resourceClaimName")
        for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        if isinstance(entry, dict)
    }
    names: list[tuple[str, str | None]] = []
    for claim in spec.get("resourceClaims") or []:
        if not isinstance(claim, dict):
            continue
        name = str(claim.get("name", ""))
        if claim.get("resourceClaimName"):
            names.append((name, str(claim["resourceClaimName"])))
        else:
            generated = statuses.get(name)
            names.append((name, str(generated) if generated else None))
    return names


def unprepared_claim(store: Store, pod: JsonObj) -> str | None:
    """Why the kubelet cannot prepare the pod's claims yet, or None when every claim exists,
    is allocated and is reserved for the pod."""
    namespace = namespace_of(pod)
    uid = (pod.get("metadata") or {}).get("uid")
    for pod_claim, claim_name in pod_claim_names(pod):
        if claim_name is None:
            return f'ResourceClaim for pod claim "{pod_claim}" has not been created yet'
        claim = store.get(RESOURCECLAIMS.key, namespace, claim_name)
        if claim is None:
            return (
                f"failed to fetch ResourceClaim {claim_name} referenced by pod "
                f'{namespace}/{name_of(pod)}: resourceclaims.resource.k8s.io "{claim_name}" '
                "not found"
            )
        status = claim.get("status") or {}
        if not status.get("allocation"):
            return f"ResourceClaim {claim_name} is not allocated"
        reserved = {
            ref.get("uid") for ref in status.get("reservedFor") or [] if isinstance(ref, dict)
        }
        if uid not in reserved:
            return (
                f"pod {namespace}/{name_of(pod)} ({uid}) is not allowed to use ResourceClaim "
                f"{claim_name}: it is not reserved for the pod"
            )
    return None
