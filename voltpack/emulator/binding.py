"""Binding a pod to a node: `POST pods/<name>/binding` or `POST bindings`, as a scheduler does.

The pod's spec.nodeName is set, the binding's annotations are copied onto the pod and its
PodScheduled condition becomes True. A pod that is already bound, or being deleted, is a 409
Conflict; the answer to a successful binding is a `v1 Status` with code 201.
"""

from __future__ import annotations

import copy
from typing import Any

from voltpack.emulator.errors import Cause, bad_request, conflict, invalid, not_found
from voltpack.emulator.objects import Clock, JsonObj, is_deleting, meta, timestamp
from voltpack.emulator.resources import PODS
from voltpack.emulator.store import Store


def bind(
    store: Store,
    clock: Clock,
    namespace: str,
    body: Any,
    pod_name: str | None = None,
    dry_run: bool = False,
) -> JsonObj:
    """POST a v1 Binding: set the pod's spec.nodeName; returns a Success Status (201)."""
    if not isinstance(body, dict):
        raise bad_request("the body of the request must be a v1 Binding")
    kind = body.get("kind")
    if kind and kind != "Binding":
        raise bad_request(f'{kind} in version "v1" cannot be handled as a Binding')
    raw_metadata = body.get("metadata")
    metadata: JsonObj = raw_metadata if isinstance(raw_metadata, dict) else {}
    name = metadata.get("name") or pod_name
    if pod_name and metadata.get("name") and metadata["name"] != pod_name:
        raise bad_request(
            f"the name of the object ({metadata['name']}) does not match the name on the "
            f"URL ({pod_name})"
        )
    if metadata.get("namespace") and metadata["namespace"] != namespace:
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    raw_target = body.get("target")
    target: JsonObj = raw_target if isinstance(raw_target, dict) else {}
    causes: list[Cause] = []
    if not name:
        causes.append(Cause("metadata.name", "FieldValueRequired", "Required value"))
    if not target.get("name"):
        causes.append(Cause("target.name", "FieldValueRequired", "Required value"))
    if target.get("kind") not in (None, "", "Node"):
        causes.append(
            Cause(
                "target.kind",
                "FieldValueInvalid",
                f"Invalid value: \"{target.get('kind')}\": must be empty or 'Node'",
            )
        )
    if causes:
        raise invalid("Binding", "", str(name or ""), causes)
    pod = store.get(PODS.key, namespace, str(name))
    if pod is None:
        raise not_found("pods", "", str(name))
    if metadata.get("uid") and metadata["uid"] != meta(pod).get("uid"):
        # kube-apiserver checks the uid as a storage precondition of the pod itself
        raise conflict(
            "pods",
            "",
            str(name),
            f"StorageError: invalid object, Code: 4, Key: /registry/pods/{namespace}/{name}, "
            f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: "
            f"{metadata['uid']}, UID in object meta: {meta(pod).get('uid')}",
        )
    if is_deleting(pod):
        raise conflict(
            "pods/binding",
            "",
            str(name),
            f"pod {name} is being deleted, cannot be assigned to a host",
        )
    node_name = (pod.get("spec") or {}).get("nodeName")
    if node_name:
        raise conflict(
            "pods/binding",
            "",
            str(name),
            f'pod {name} is already assigned to node "{node_name}"',
        )
    if (pod.get("spec") or {}).get("schedulingGates"):
        # kube-apiserver rejects binding a scheduling un-ready pod (as a storage update error)
        raise conflict(
            "pods/binding",
            "",
            str(name),
            f"pod {name} has non-empty .spec.schedulingGates",
        )
    bound = copy.deepcopy(pod)
    bound.setdefault("spec", {})["nodeName"] = target["name"]
    annotations = metadata.get("annotations")
    if isinstance(annotations, dict) and annotations:
        meta(bound).setdefault("annotations", {}).update(annotations)
    status = bound.setdefault("status", {})
    status.pop("nominatedNodeName", None)  # as kube-apiserver clears the nomination hint
    conditions = [
        c
        for c in status.get("conditions") or []
        if isinstance(c, dict) and c.get("type") != "PodScheduled"
    ]
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": timestamp(clock()),
        }
    )
    status["conditions"] = conditions
    if not dry_run:
        store.update(PODS.key, bound)
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
