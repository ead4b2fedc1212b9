"""The admin API's cluster summary, kept by watch events, says what the full views say.

The emulator's cluster changes through the official client (pods bound, pending, finished,
in pod groups and deleted; nodes relabelled; PowerBudgets with and without a status; GPUNode
readings; Queues); after each change the summary (O(1) counters) must equal the one computed
from the source's own views (nodes, jobs, power domains, queues), which are rebuilt from the
cached objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.integration.conftest import pod_manifest, wait_for
from voltpack.api.sources import SourceUnavailableError
from voltpack.emulator import RunningEmulator
from voltpack.model.admin import ClusterSummary
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.operator.kube.conventions import (
    DEFAULT_SCHEDULER,
    POD_GROUP_ANNOTATION,
    SCHEDULER_NAME,
)
from voltpack.operator.kube.crds import install_crds
from voltpack.policies.schema import policy_for_strategy

GROUP, VERSION = "voltpack.io", "v1alpha1"


@pytest.fixture
def source(emulator: RunningEmulator, api_client: client.ApiClient) -> Iterator[KubeAdminSource]:
    install_crds(client.ApiextensionsV1Api(api_client))
    admin = KubeAdminSource(
        client.ApiClient(client.Configuration(host=emulator.url)), policy_for_strategy("fgd"), ""
    )
    yield admin
    admin.close()


def from_views(source: KubeAdminSource) -> dict[str, Any]:
    """The summary as the views give it (everything but the time)."""
    source.invalidate()
    nodes, jobs, domains = source.nodes(), source.jobs(), source.power_domains()
    by_model: dict[str, float] = {}
    allocated: dict[str, float] = {}
    for node in nodes:
        if node.gpu_model:
            by_model[node.gpu_model] = by_model.get(node.gpu_model, 0.0) + node.gpus
            allocated[node.gpu_model] = allocated.get(node.gpu_model, 0.0) + node.gpus_allocated
    finished = ("Succeeded", "Failed")
    pending_pods = sum(
        1 for j in jobs for w in j.workers if w.node is None and w.phase not in finished
    )
    powers = [d.power_w for d in domains if d.power_w is not None]
    return {
        "nodes": len(nodes),
        "nodes_ready": sum(1 for n in nodes if n.ready),
        "gpus_by_model": dict(sorted(by_model.items())),
        "gpus_allocated_by_model": dict(sorted(allocated.items())),
        "jobs_running": sum(1 for j in jobs if j.pending_reason is None),
        "jobs_pending": sum(1 for j in jobs if j.pending_reason is not None),
        "pods_pending": pending_pods,
        "queues": len(source.queues()),
        "power_domains": len(domains),
        "power_w": sum(powers) if powers else None,
        "budget_w": sum(d.budget_w for d in domains) if domains else None,
    }


def counted(summary: ClusterSummary) -> dict[str, Any]:
    return summary.model_dump(exclude={"observed_at_s"})


def agree(source: KubeAdminSource, **expected: Any) -> None:
    """Wait until the watch has taken the last change in; then summary == views."""

    def same() -> bool:
        tally, views = counted(source.summary()), from_views(source)
        return tally == views and all(tally[k] == v for k, v in expected.items())

    wait_for(same, timeout_s=20, what="the tallied summary to equal the views")


def budget(name: str, budget_w: float, rack: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PowerBudget",
        "metadata": {"name": name},
        "spec": {"nodeSelector": {"matchLabels": {"rack": rack}}, "budgetW": budget_w},
    }


def test_the_summary_follows_every_change(
    source: KubeAdminSource, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    agree(source, nodes=4, gpus_by_model={"A100": 16.0, "V100M16": 4.0}, jobs_running=0)
    # pods: bound whole GPUs, a GPU share, unbound, finished, a two-pod group half bound
    core.create_namespaced_pod("default", pod_manifest("whole", gpus=2, node_name="gpu-a100-0"))
    share = pod_manifest("share", gpus=1, node_name="gpu-v100-0")
    share["metadata"]["annotations"] = {"voltpack.io/gpu-milli": "250"}
    core.create_namespaced_pod("default", share)
    core.create_namespaced_pod("default", pod_manifest("waiting", gpus=1))
    done = core.create_namespaced_pod("default", pod_manifest("done", gpus=1, node_name="cpu-0"))
    core.patch_namespaced_pod_status("done", "default", {"status": {"phase": "Succeeded"}})
    del done
    for i, node in enumerate(("gpu-a100-1", None)):
        member = pod_manifest(f"gang-{i}", gpus=4, node_name=node)
        member["metadata"]["annotations"] = {POD_GROUP_ANNOTATION: "gang"}
        core.create_namespaced_pod("default", member)
    agree(
        source,
        gpus_allocated_by_model={"A100": 6.0, "V100M16": 0.25},
        pods_pending=2,
        jobs_pending=2,
    )
    # the gang's second pod bound, the waiting one deleted
    core.delete_namespaced_pod("gang-1", "default", grace_period_seconds=0)
    bound = pod_manifest("gang-1", gpus=4, node_name="gpu-a100-1")
    bound["metadata"]["annotations"] = {POD_GROUP_ANNOTATION: "gang"}
    core.create_namespaced_pod("default", bound)
    core.delete_namespaced_pod("waiting", "default", grace_period_seconds=0)
    agree(source, gpus_allocated_by_model={"A100": 10.0, "V100M16": 0.25}, pods_pending=0)
    # power: one domain with a status, one summed from its nodes' GPUNode readings
    core.patch_node("gpu-a100-0", {"metadata": {"labels": {"rack": "r1"}}})
    core.patch_node("gpu-v100-0", {"metadata": {"labels": {"rack": "r2"}}})
    custom.create_cluster_custom_object(GROUP, VERSION, "powerbudgets", budget("r1", 5000, "r1"))
    custom.patch_cluster_custom_object_status(
        GROUP, VERSION, "powerbudgets", "r1", {"status": {"powerW": 1200}}
    )
    custom.create_cluster_custom_object(GROUP, VERSION, "powerbudgets", budget("r2", 3000, "r2"))
    agree(source, power_domains=2, power_w=1200.0, budget_w=8000.0)
    readings = [
        {"index": i, "uuid": f"GPU-{i}", "model": "V100M16", "memoryMib": 16384,
         "powerDrawW": 100.0 + i}
        for i in range(4)
    ]  # fmt: skip
    custom.create_cluster_custom_object(
        GROUP, VERSION, "gpunodes",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GPUNode",
         "metadata": {"name": "gpu-v100-0"}, "spec": {}},
    )  # fmt: skip
    custom.patch_cluster_custom_object_status(
        GROUP, VERSION, "gpunodes", "gpu-v100-0", {"status": {"gpus": readings}}
    )
    agree(source, power_w=1200.0 + 406.0)
    # a queue, a node gone
    custom.create_cluster_custom_object(
        GROUP, VERSION, "queues",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": "q"},
         "spec": {}},
    )  # fmt: skip
    core.delete_node("gpu-v100-0")
    agree(source, queues=1, nodes=3, gpus_by_model={"A100": 16.0})


def test_caches_that_lose_the_api_server_answer_unavailable_after_a_while(
    emulator: RunningEmulator,
) -> None:
    admin = KubeAdminSource(
        client.ApiClient(client.Configuration(host=emulator.url)),
        policy_for_strategy("fgd"),
        "",
        stale_after_s=5.0,  # a read just after the stop still answers, even on a loaded machine
    )
    try:
        assert admin.summary().nodes == 4
        emulator.stop()
        assert admin.summary().nodes == 4  # the last state, while it may be a blip

        def unavailable() -> bool:
            try:
                admin.summary()
            except SourceUnavailableError as exc:
                return "unreachable (nodes)" in str(exc) or "unreachable (pods)" in str(exc)
            return False

        wait_for(unavailable, timeout_s=20, what="reads to answer unavailable")
    finally:
        admin.close()


def test_a_budget_keeps_its_nodes_until_its_selector_changes(
    source: KubeAdminSource, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    """A status or manual-cap change (every power tick, every cap) keeps the domain's nodes and
    their built views; a new selector moves them. The GPU models a cap's floor is summed from
    are the nodes' own."""
    core.patch_node("gpu-a100-0", {"metadata": {"labels": {"rack": "r1"}}})
    core.patch_node("gpu-v100-0", {"metadata": {"labels": {"rack": "r2"}}})
    custom.create_cluster_custom_object(GROUP, VERSION, "powerbudgets", budget("r1", 5000, "r1"))

    def nodes_of(name: str) -> list[str]:
        return next((d.nodes for d in source.power_domains() if d.name == name), [])

    wait_for(lambda: nodes_of("r1") == ["gpu-a100-0"], what="r1 selects gpu-a100-0")
    built = source.node("gpu-a100-0")
    assert built is not None and built.power_domain == "r1"
    assert source.domain_gpu_models("r1") == ["A100"] * 8
    assert source.domain_gpu_models("nope") is None
    capped = source.set_manual_cap("r1", 4000)
    assert capped.manual_cap_w == 4000 and capped.nodes == ["gpu-a100-0"]
    custom.patch_cluster_custom_object_status(
        GROUP, VERSION, "powerbudgets", "r1", {"status": {"powerW": 1200}}
    )
    wait_for(
        lambda: next(d for d in source.power_domains() if d.name == "r1").power_w == 1200,
        what="the status seen",
    )
    assert source.node("gpu-a100-0") is built  # not built again

    custom.patch_cluster_custom_object(
        GROUP,
        VERSION,
        "powerbudgets",
        "r1",
        {"spec": {"nodeSelector": {"matchLabels": {"rack": "r2"}}}},
    )
    wait_for(lambda: nodes_of("r1") == ["gpu-v100-0"], what="r1 selects gpu-v100-0 now")
    moved = source.node("gpu-a100-0")
    assert moved is not None and moved.power_domain is None
    assert source.domain_gpu_models("r1") == ["V100M16"] * 4


def test_pods_of_every_served_name_are_counted(
    emulator: RunningEmulator, source: KubeAdminSource, core: client.CoreV1Api
) -> None:
    """With `--scheduler-name voltpack --scheduler-name default-scheduler` (voltpack in
    kube-scheduler's place) a pod that names no scheduler (the API server gives it
    `default-scheduler`) is voltpack's job; the source serving voltpack alone leaves it out."""
    both = KubeAdminSource(
        client.ApiClient(client.Configuration(host=emulator.url)),
        policy_for_strategy("fgd"),
        "",
        scheduler_names=frozenset({SCHEDULER_NAME, DEFAULT_SCHEDULER}),
    )
    try:
        plain = pod_manifest("plain", gpus=1)
        del plain["spec"]["schedulerName"]
        core.create_namespaced_pod("default", plain)
        core.create_namespaced_pod("default", pod_manifest("ours", gpus=1))
        bound = pod_manifest("bound", gpus=2, node_name="gpu-a100-0")
        del bound["spec"]["schedulerName"]
        core.create_namespaced_pod("default", bound)
        agree(both, pods_pending=2, jobs_pending=2, jobs_running=1)
        agree(source, pods_pending=1, jobs_pending=1, jobs_running=0)
        assert both.job("default", "plain") is not None and source.job("default", "plain") is None
        assert core.read_namespaced_pod("plain", "default").spec.scheduler_name == DEFAULT_SCHEDULER
    finally:
        both.close()
