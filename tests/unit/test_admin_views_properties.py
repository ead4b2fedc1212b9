"""The admin API's incremental views equal the whole recomputation, for any sequence of watch
events (adds, changes, deletes, relists) with reads in between, whichever scheduler names are
served, and their pages walk the list exactly once in key order."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.operator.admin.views import (
    AdminViews,
    full_domain_views,
    full_job_views,
    full_node_views,
)
from voltpack.operator.kube.cache import object_key
from voltpack.operator.kube.conventions import (
    GPU_INDICES_ANNOTATION,
    MANUAL_CAP_ANNOTATION,
    PLACEMENT_REASON_ANNOTATION,
    POD_GROUP_ANNOTATION,
    SCHEDULER_NAME,
    SERVED_SCHEDULERS,
)
from voltpack.operator.kube.translate import GPU_MODEL_LABELS, GPU_RESOURCE

Obj = dict[str, Any]
NODES = [f"n{i}" for i in range(3)]
NAMESPACES = ["default", "ml"]


def node(name: str, rack: int, gpus: int, ready: bool, model: str) -> Obj:
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", GPU_RESOURCE: str(gpus)}
    return {
        "metadata": {"name": name, "labels": {"rack": f"r{rack}", GPU_MODEL_LABELS[0]: model}},
        "status": {
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    namespace: str,
    node_name: str | None,
    ours: bool,
    group: str | None,
    gpus: int,
    indices: str | None,
    phase: str,
    reason: str | None,
    queue: str | None = None,
) -> Obj:
    annotations: dict[str, str] = {} if queue is None else {"voltpack.io/queue": queue}
    if group:
        annotations[POD_GROUP_ANNOTATION] = group
    if indices is not None:
        annotations[GPU_INDICES_ANNOTATION] = indices
    if reason:
        annotations[PLACEMENT_REASON_ANNOTATION] = reason
    resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    if gpus:
        resources["limits"] = {GPU_RESOURCE: str(gpus)}
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME if ours else "default-scheduler",
        "containers": [{"name": "main", "image": "x", "resources": resources}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": spec,
        "status": {"phase": phase},
    }


def gpunode(name: str, powers: list[float | None]) -> Obj:
    gpus = [
        {"index": i, "powerDrawW": p, "health": "Healthy"}
        for i, p in enumerate(powers)
        if p is not None or i % 2
    ]
    return {"metadata": {"name": name}, "status": {"gpus": gpus}}


def budget(name: str, rack: int | None, power_w: float | None, manual: float | None) -> Obj:
    selector = {"matchLabels": {"rack": f"r{rack}"}} if rack is not None else {}
    obj: Obj = {
        "metadata": {"name": name, "annotations": {}},
        "spec": {"nodeSelector": selector, "budgetW": 10_000},
        "status": {} if power_w is None else {"powerW": power_w},
    }
    if manual is not None:
        obj["metadata"]["annotations"][MANUAL_CAP_ANNOTATION] = f"{manual:g}"
    return obj


def gpujob(name: str, namespace: str, queue: str, phase: str) -> Obj:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"queue": queue, "priority": 3},
        "status": {"phase": phase, "recovery": {"message": "restarted"}},
    }


def event(name: str, pod_name: str, namespace: str, second: int, message: str) -> Obj:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": namespace},
        "reason": "FailedScheduling",
        "lastTimestamp": f"2025-01-01T00:00:{second:02d}+00:00",
        "message": message,
    }


group_names = st.sampled_from(["g0", "g1", "p0", "p1"])
objects_of = {
    "nodes": st.builds(
        node,
        st.sampled_from(NODES),
        st.integers(0, 1),
        st.sampled_from([0, 2, 4]),
        st.booleans(),
        st.sampled_from(["A100", "H100"]),
    ),
    "pods": st.builds(
        pod,
        st.sampled_from([f"p{i}" for i in range(4)]),
        st.sampled_from(NAMESPACES),
        st.sampled_from([None, None, *NODES, "gone"]),
        st.sampled_from([True, True, False]),
        st.sampled_from([None, "g0", "g1"]),
        st.integers(0, 2),
        st.sampled_from([None, "0", "1", "0,1", "3"]),
        st.sampled_from(["Running", "Pending", "Succeeded"]),
        st.sampled_from([None, "bin-packed"]),
        st.sampled_from([None, "a", "b"]),
    ),
    "gpunodes": st.builds(
        gpunode,
        st.sampled_from(NODES),
        st.lists(st.sampled_from([None, 100.0, 250.0]), max_size=4),
    ),
    "powerbudgets": st.builds(
        budget,
        st.sampled_from(["b0", "b1", "b2"]),
        st.sampled_from([None, 0, 1]),
        st.sampled_from([None, 900.0]),
        st.sampled_from([None, 500.0]),
    ),
    "gpujobs": st.builds(
        gpujob,
        group_names,
        st.sampled_from(NAMESPACES),
        st.sampled_from(["a", "b"]),
        st.sampled_from(["Running", "Pending"]),
    ),
    "events": st.builds(
        event,
        st.sampled_from(["e0", "e1", "e2"]),
        st.sampled_from([f"p{i}" for i in range(4)]),
        st.sampled_from(NAMESPACES),
        st.integers(0, 3),
        st.sampled_from(["0/4 nodes are available: 4 Insufficient cpu.", "queue over quota"]),
    ),
}
KINDS = sorted(objects_of)


def _step(kind: str) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.one_of(
        st.tuples(st.just("put"), st.just(kind), objects_of[kind]),
        st.tuples(st.just("put"), st.just(kind), objects_of[kind]),
        st.tuples(st.just("delete"), st.just(kind), st.integers(0, 5)),
        st.tuples(st.just("relist"), st.just(kind), st.lists(objects_of[kind], max_size=4)),
    )


changes = st.sampled_from([*KINDS, "pods", "pods", "gpujobs", "events"]).flatmap(_step)
steps = st.one_of(
    changes,
    changes,
    changes,
    st.tuples(
        st.just("read"), st.sampled_from(["nodes", "jobs", "node", "job"]), st.integers(1, 3)
    ),
)


class Caches:
    """What the ResourceCaches do with their objects and listeners (a dict per kind)."""

    def __init__(self, views: AdminViews) -> None:
        self.objects: dict[str, dict[str, Obj]] = {k: {} for k in KINDS}
        self.listeners = {
            "nodes": views.nodes_listener,
            "pods": views.pods_listener,
            "gpunodes": views.gpunodes_listener,
            "powerbudgets": views.budgets_listener,
            "gpujobs": views.gpujobs_listener,
            "events": views.events_listener,
        }

    def put(self, kind: str, obj: Obj) -> None:
        old = self.objects[kind].get(object_key(obj))
        self.objects[kind][object_key(obj)] = obj
        self.listeners[kind].changed(old, obj)

    def delete(self, kind: str, at: int) -> None:
        keys = list(self.objects[kind])
        if keys:
            old = self.objects[kind].pop(keys[at % len(keys)])
            self.listeners[kind].changed(old, None)

    def relist(self, kind: str, objects: list[Obj]) -> None:
        self.objects[kind] = {object_key(o): o for o in objects}
        self.listeners[kind].reset(self.objects[kind].values())

    def values(self, kind: str) -> list[Obj]:
        return list(self.objects[kind].values())


def walk(page_of: Any, limit: int) -> list[Any]:
    """Every item, page after page."""
    items, after = [], None
    while True:
        page = page_of(after, limit)
        items += page.items
        if page.last_key is None:
            return items
        after = page.last_key


def check(views: AdminViews, caches: Caches) -> None:
    """The incremental views, one at a time and page by page, equal the recomputation."""
    nodes = full_node_views(
        caches.values("nodes"),
        caches.values("pods"),
        caches.values("gpunodes"),
        caches.values("powerbudgets"),
    )
    jobs = full_job_views(
        caches.values("pods"),
        caches.values("gpujobs"),
        caches.values("events"),
        {},
        {},
        views.scheduler_names,
    )
    assert views.nodes() == nodes
    assert views.jobs() == jobs
    assert views.domains() == full_domain_views(
        caches.values("nodes"), caches.values("powerbudgets"), nodes
    )
    for limit in (1, 2, 500):
        assert walk(views.node_page, limit) == nodes
        assert walk(views.job_page, limit) == jobs
        for pending in (True, False):
            assert walk(lambda a, n, p=pending: views.job_page(a, n, pending=p), limit) == [
                j for j in jobs if (j.pending_reason is not None) == pending
            ]
        assert walk(lambda a, n: views.job_page(a, n, queue="a"), limit) == [
            j for j in jobs if j.queue == "a"
        ]
    for view in nodes:
        assert views.node(view.name) == view
    for job in jobs:
        assert views.job(job.namespace, job.name) == job
    assert views.node("gone") is None
    assert views.job("default", "nope") is None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(steps, min_size=4, max_size=30),
    st.sets(st.integers(0, 29), min_size=10),
    st.sampled_from([SERVED_SCHEDULERS, frozenset({SCHEDULER_NAME, "default-scheduler"})]),
)
def test_incremental_views_equal_the_whole_recomputation(
    ops: list[tuple[Any, ...]], checked_after: set[int], served: frozenset[str]
) -> None:
    """`served`: voltpack alone (the other pods are kube-scheduler's), or both names (every
    pod is voltpack's)."""
    views = AdminViews(served)
    caches = Caches(views)
    for step, (op, kind, arg) in enumerate(ops):
        if op == "put":
            caches.put(kind, arg)
        elif op == "delete":
            caches.delete(kind, arg)
        elif op == "relist":
            caches.relist(kind, arg)
        elif kind == "nodes":  # partial reads: some views built, others not
            views.node_page(None, arg)
        elif kind == "jobs":
            views.job_page(None, arg, pending=True)
        elif kind == "node":
            views.node(NODES[arg % len(NODES)])
        else:
            views.job("default", "g0")
        if step in checked_after:  # views built now must go stale when a later event touches them
            check(views, caches)
    check(views, caches)


def test_a_page_says_how_many_follow_and_where_the_next_starts() -> None:
    views = AdminViews()
    caches = Caches(views)
    for name in ("n3", "n1", "n0", "n2"):
        caches.put("nodes", node(name, 0, 2, True, "A100"))
    first = views.node_page(None, 3)
    assert [n.name for n in first.items] == ["n0", "n1", "n2"]
    assert (first.last_key, first.remaining) == ("n2", 1)
    last = views.node_page(first.last_key, 3)
    assert [n.name for n in last.items] == ["n3"]
    assert (last.last_key, last.remaining) == (None, 0)
    before = last.revision
    caches.put("pods", pod("p", "default", "n3", True, None, 1, "0", "Running", None))
    assert views.node_page(None, 1).revision > before
    assert views.node("n3") is not None and views.node("n3").gpus_allocated == 1.0  # type: ignore[union-attr]


def test_a_job_reads_its_pods_in_the_caches_order_not_by_name() -> None:
    """The queue of a pod group is its first pod's (as listed), in both computations."""
    views = AdminViews()
    caches = Caches(views)
    caches.put("pods", pod("p1", "default", None, True, "g0", 0, None, "Pending", None, "b"))
    caches.put("pods", pod("p0", "default", None, True, "g0", 0, None, "Pending", None, "a"))
    check(views, caches)
    assert views.job("default", "g0").queue == "b"  # type: ignore[union-attr]
