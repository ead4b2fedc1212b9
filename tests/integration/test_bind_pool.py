"""Gangs bound several at a time (`bind_pool.bind_gangs`): in chunks across the pool's workers,
each gang's result comes back in the order the gangs were given, failures where they happened,
and every binding the API server accepted recorded on its pod."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from kubernetes import client

from tests.integration.conftest import pod_manifest
from voltpack.model.decision import Placement
from voltpack.operator.kube.conventions import GPU_INDICES_ANNOTATION
from voltpack.operator.scheduling.bind_pool import MAX_CHUNK_GANGS, GangBinding, bind_gangs

GANGS = MAX_CHUNK_GANGS + 40  # more than one chunk


def test_results_come_back_in_order_across_chunks(core: client.CoreV1Api) -> None:
    node = core.list_node().items[0].metadata.name
    missing = {7, 130, GANGS - 1}  # no such pod: the binding fails
    for i in range(GANGS):
        if i not in missing:
            core.create_namespaced_pod("default", pod_manifest(f"p{i:03d}"))
    bindings = [
        GangBinding((Placement(pod=f"default/p{i:03d}", node=node, gpu_indices=(i % 8,)),))
        for i in range(GANGS)
    ]
    with ThreadPoolExecutor(4) as pool:
        results = bind_gangs(core, bindings, pool, lambda: True)
    assert len(results) == GANGS
    for i, result in enumerate(results):
        assert result is not None
        pod = f"default/p{i:03d}"
        assert (pod in result.failures) == (i in missing), (i, result)
    bound = {p.metadata.name: p for p in core.list_namespaced_pod("default").items}
    assert len(bound) == GANGS - len(missing)
    for i in (0, 8, MAX_CHUNK_GANGS, GANGS - 2):
        pod = bound[f"p{i:03d}"]
        assert pod.spec.node_name == node
        assert pod.metadata.annotations[GPU_INDICES_ANNOTATION] == str(i % 8)
