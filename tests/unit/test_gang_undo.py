"""Which pods make a gang partly bound (`gang_undo.partial_gangs`): one binding attempt with
members both bound and pending; everything else (a whole gang, a finished member, a pod being
deleted, a rejoining worker without the attempt) is not."""

from __future__ import annotations

from typing import Any

from voltpack.operator.kube.conventions import GANG_BINDING_ANNOTATION
from voltpack.operator.scheduling.gang_undo import partial_gangs


def pod(name: str, attempt: str | None, node: str | None = None, **extra: Any) -> dict[str, Any]:
    annotations = {GANG_BINDING_ANNOTATION: attempt} if attempt else {}
    spec: dict[str, Any] = {"schedulerName": "voltpack"}
    if node:
        spec["nodeName"] = node
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "annotations": annotations}
    meta.update(extra.pop("metadata", {}))
    return {"metadata": meta, "spec": spec, **extra}


def test_bound_and_pending_members_of_one_attempt_are_a_partial_gang() -> None:
    found = partial_gangs([pod("a", "x/3", "n1"), pod("b", "x/3", "n1"), pod("c", "x/3")])
    assert list(found) == ["ml/x/3"]
    assert [p["metadata"]["name"] for p in found["ml/x/3"].bound] == ["a", "b"]
    assert "2 of 3 members bound" in found["ml/x/3"].describe()


def test_whole_finished_deleting_and_unmarked_pods_are_not() -> None:
    assert not partial_gangs([pod("a", "x/2", "n1"), pod("b", "x/2", "n1")])  # whole
    assert not partial_gangs([pod("a", "x/2"), pod("b", "x/2")])  # none bound yet
    done = {"status": {"phase": "Succeeded"}}
    assert not partial_gangs([pod("a", "x/2", "n1", **done), pod("b", "x/2")])
    going = {"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"}}
    assert not partial_gangs([pod("a", "x/2", "n1", **going), pod("b", "x/2")])
    # an elastic job's rejoining worker is a new pod, without the old attempt
    assert not partial_gangs([pod("a", "x/2", "n1"), pod("b", "x/2", "n1"), pod("c", None)])
    # the same attempt text in two namespaces is two attempts
    other = pod("b", "x/2")
    other["metadata"]["namespace"] = "other"
    assert not partial_gangs([pod("a", "x/2", "n1"), other])
