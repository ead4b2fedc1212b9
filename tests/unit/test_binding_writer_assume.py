"""What the binding writer assumes into the pod cache once a binding succeeded."""

from __future__ import annotations

from typing import Any

from voltpack.operator.kube.cache import ResourceCache
from voltpack.operator.scheduling.binding_writer import BindingWriter


def _pod(name: str, node: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"nodeName": node} if node else {},
    }


def _writer(pods: list[dict[str, Any]]) -> tuple[BindingWriter, ResourceCache]:
    cache = ResourceCache.holding("pods", pods)
    writer = BindingWriter.__new__(BindingWriter)  # only the pod cache is used here
    writer.pods = cache
    return writer, cache


def test_a_bound_pod_is_assumed_onto_its_node_with_the_written_annotations() -> None:
    writer, cache = _writer([_pod("a")])
    assumed = writer._assume_bound(_pod("a"), "n1", {"voltpack.io/gpus": "0"})
    assert assumed is not None and assumed["spec"]["nodeName"] == "n1"
    cached = cache.get("default/a")
    assert cached is not None and cached["metadata"]["annotations"] == {"voltpack.io/gpus": "0"}


def test_a_pod_deleted_while_it_was_being_bound_is_not_brought_back() -> None:
    # the cycle read the pod; the watch then reported it deleted before the binding returned
    writer, cache = _writer([])
    assert writer._assume_bound(_pod("gone"), "n1", {}) is None
    assert cache.get("default/gone") is None


def test_the_watchs_newer_bound_version_is_kept() -> None:
    running = {**_pod("a", node="n2"), "status": {"phase": "Running"}}
    writer, cache = _writer([running])
    assert writer._assume_bound(_pod("a"), "n1", {}) == running
    assert cache.get("default/a") == running
