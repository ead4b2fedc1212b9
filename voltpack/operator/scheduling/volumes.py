"""A pending pod's PersistentVolumeClaims, as kube-scheduler's VolumeBinding reads them: a claim
bound to a volume pinned to nodes (local volumes, zonal disks) allows only the nodes its
volume's required node affinity matches; a claim that is missing, or unbound with `Immediate`
binding, keeps the pod waiting with kube-scheduler's reason. voltpack does not bind or
provision volumes: a pod whose claim waits for its first consumer (`WaitForFirstConsumer`)
also waits, saying so, rather than being bound where no volume may follow it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from voltpack.model.constraints.label_selectors import NodeSelectorTerm
from voltpack.model.errors import InvalidRequestError
from voltpack.model.workload import Pod
from voltpack.operator.kube.pod_constraints import node_selector_terms
from voltpack.operator.kube.translate import pod_key

UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


def claim_names(pod: dict[str, Any]) -> list[str]:
    """The claims a pod's volumes use (generic ephemeral volumes' claims by their name)."""
    names = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, dict) and claim.get("claimName"):
            names.append(str(claim["claimName"]))
        elif volume.get("ephemeral") is not None:
            names.append(f"{pod['metadata']['name']}-{volume.get('name')}")
    return names


class VolumeView:
    """The cluster's claims, volumes and storage classes, read for pending pods."""

    def __init__(
        self,
        claims: Iterable[dict[str, Any]],
        volumes: Iterable[dict[str, Any]],
        classes: Iterable[dict[str, Any]],
    ) -> None:
        self.claims = {
            f"{c['metadata'].get('namespace', 'default')}/{c['metadata']['name']}": c
            for c in claims
        }
        self.volumes = {v["metadata"]["name"]: v for v in volumes}
        self.classes = {c["metadata"]["name"]: c for c in classes}

    def request(self, pod: dict[str, Any], request: Pod) -> Pod:
        """`request` with its bound volumes' node affinity; raises InvalidRequestError with the
        reason the pod waits."""
        names = claim_names(pod)
        if not names or request.constraints is None:
            return request
        key = pod_key(pod)
        namespace = pod["metadata"].get("namespace", "default")
        terms: list[tuple[NodeSelectorTerm, ...]] = []
        for name in names:
            claim = self.claims.get(f"{namespace}/{name}")
            if claim is None:
                raise InvalidRequestError(f'persistentvolumeclaim "{name}" not found')
            volume_name = (claim.get("spec") or {}).get("volumeName")
            if not volume_name:
                raise InvalidRequestError(self._unbound(name, claim))
            volume = self.volumes.get(volume_name)
            if volume is None:
                raise InvalidRequestError(
                    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
                )
            required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required")
            if required is not None:
                terms.append(node_selector_terms(required, key, f"PersistentVolume {volume_name}"))
        if not terms:
            return request
        constraints = request.constraints.model_copy(update={"volume_node_terms": tuple(terms)})
        return request.model_copy(update={"constraints": constraints})

    def _unbound(self, name: str, claim: dict[str, Any]) -> str:
        class_name = (claim.get("spec") or {}).get("storageClassName")
        storage_class = self.classes.get(class_name or "")
        mode = (storage_class or {}).get("volumeBindingMode") or "Immediate"
        if mode == WAIT_FOR_FIRST_CONSUMER:
            return (
                f"PersistentVolumeClaim {name} waits for its first consumer (StorageClass "
                f"{class_name}, {WAIT_FOR_FIRST_CONSUMER}); voltpack does not bind or provision "
                "volumes: bind the claim, or let kube-scheduler place this pod"
            )
        return UNBOUND_IMMEDIATE
