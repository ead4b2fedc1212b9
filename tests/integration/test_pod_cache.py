"""The operator's pod cache keeps a binding it assumed when an older watch event arrives.

The binder patches a gang pod's rank label and then binds it; the operator assumes the pod
bound right away. If the label patch's watch event arrives after that, it shows the pod
unbound: without `older_pod` the cache would show a bound pod as pending for a moment, and a
cycle then would place it again or count its GPUs free."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.integration.conftest import binding, pod_manifest, wait_for
from voltpack.operator.kube.cache import ResourceCache, older_pod
from voltpack.operator.kube.client import call_json


@pytest.fixture
def pod_cache(core: client.CoreV1Api) -> Iterator[ResourceCache]:
    cache = ResourceCache("pods", core.list_pod_for_all_namespaces, older=older_pod)
    stop = threading.Event()
    cache.start(stop)
    assert cache.wait_synced(20)
    yield cache
    stop.set()


def _node(cache: ResourceCache, key: str) -> str | None:
    pod = cache.get(key)
    return None if pod is None else (pod.get("spec") or {}).get("nodeName")


def test_an_older_event_does_not_unbind_an_assumed_pod(
    core: client.CoreV1Api, pod_cache: ResourceCache
) -> None:
    core.create_namespaced_pod("default", pod_manifest("w0", gpus=1))
    cached = wait_for(lambda: pod_cache.get("default/w0"), what="the pod cached")
    node = core.list_node().items[0].metadata.name
    assumed = {**cached, "spec": {**cached["spec"], "nodeName": node}}
    pod_cache.assume(assumed)  # as the operator does after binding, before the watch says so

    patch = {"metadata": {"labels": {"voltpack.io/rank": "0"}}}
    call_json(core.patch_namespaced_pod, "w0", "default", patch)  # an event without nodeName
    core.create_namespaced_pod("default", pod_manifest("marker"))  # comes after it
    wait_for(lambda: pod_cache.get("default/marker"), what="the marker's event")
    assert _node(pod_cache, "default/w0") == node  # the older event was not taken

    call_json(core.create_namespaced_pod_binding, "w0", "default", binding("w0", node))
    bound = wait_for(
        lambda: (
            (pod := pod_cache.get("default/w0"))
            and pod["metadata"].get("labels", {}).get("voltpack.io/rank")
            and pod
        ),
        what="the binding's event",
    )
    assert bound["spec"]["nodeName"] == node


def test_assuming_a_pod_the_watch_reported_deleted_does_not_bring_it_back(
    core: client.CoreV1Api, pod_cache: ResourceCache
) -> None:
    """An eviction's graceful delete can finish (and its DELETED event arrive) before the
    operator assumes the terminating pod from the delete's reply: a ghost would hold its GPUs,
    and the gang nominated to them would wait for it forever."""
    core.create_namespaced_pod("default", pod_manifest("victim", gpus=1))
    cached = wait_for(lambda: pod_cache.get("default/victim"), what="the pod cached")
    core.delete_namespaced_pod("victim", "default")
    wait_for(lambda: pod_cache.get("default/victim") is None, what="the DELETED event")
    terminating = {**cached, "metadata": {**cached["metadata"], "deletionTimestamp": "now"}}
    assert pod_cache.assume(terminating) is False
    assert pod_cache.get("default/victim") is None

    core.create_namespaced_pod("default", pod_manifest("victim", gpus=1))  # same name, new uid
    wait_for(
        lambda: (
            (pod := pod_cache.get("default/victim")) is not None
            and pod["metadata"]["uid"] != cached["metadata"]["uid"]
        ),
        what="the new pod cached",
    )
    assert pod_cache.assume(terminating) is False  # the old pod's write is not the new pod's
    assert pod_cache.get("default/victim")["metadata"].get("deletionTimestamp") is None
