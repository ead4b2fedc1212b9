"""GPU faults end to end over the emulator: the agent's fault on a GPUNode (written as the agent
writes it, through the official client, or by the agent's publisher over the fake NVML) cordons
the GPU, the gang on it is re-placed or shrunk, and Events, the GPUJob's status and the admin
API say why."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.fakes.nvml import STATE_ENV, FakeGpu, raise_xid, write_state
from tests.integration.conftest import gpu_job_manifest, operator_thread, wait_for
from voltpack.emulator import EmulatorConfig, RunningEmulator, running_emulator
from voltpack.model import Node
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.operator.gpunode_sync import GpuNodeSync
from voltpack.operator.kube.crds import install_crds
from voltpack.operator.runner import OperatorConfig
from voltpack.policies.schema import parse_policy, policy_for_strategy
from voltpack.telemetry.nvml import NvmlBackend

GROUP, VERSION = "voltpack.io", "v1alpha1"


@pytest.fixture(params=[2])
def cluster(request: pytest.FixtureRequest) -> Iterator[RunningEmulator]:
    """Nodes of 8 H100s (how many: the fixture's parameter, 2 unless a test says otherwise)."""
    count = request.param
    nodes = [Node.empty(f"node-{chr(97 + i)}", 64_000, 524_288, 8, "H100") for i in range(count)]
    config = EmulatorConfig(time_factor=0.001, bookmark_interval_s=0.2)
    with running_emulator(nodes=nodes, config=config) as emulator:
        api = client.ApiClient(client.Configuration(host=emulator.url))
        install_crds(client.ApiextensionsV1Api(api))
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "voltpack-system"}})
        api.close()
        yield emulator


@pytest.fixture
def api(cluster: RunningEmulator) -> Iterator[client.ApiClient]:
    api_client = client.ApiClient(client.Configuration(host=cluster.url))
    yield api_client
    api_client.close()


def operator_config() -> OperatorConfig:
    return OperatorConfig(
        policy=policy_for_strategy("best-fit"),
        identity="op-faults",
        cycle_interval_s=0.05,
        lease_duration_s=2,
        power=False,
        policy_configmap=None,
    )


def write_gpus(custom: client.CustomObjectsApi, node: str, faults: dict[int, list[Any]]) -> None:
    """The GPUNode's status as the agent writes it: 8 GPUs, `faults` on some."""
    try:
        custom.create_cluster_custom_object(
            GROUP, VERSION, "gpunodes",
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GPUNode", "metadata": {"name": node},
             "spec": {}},
        )  # fmt: skip
    except client.ApiException as error:
        if error.status != 409:
            raise
    gpus = [
        {
            "index": i,
            "uuid": f"GPU-{node}-{i}",
            "model": "H100",
            "memoryMib": 81_920,
            "health": "Unhealthy" if faults.get(i) else "Healthy",
            "faults": faults.get(i, []),
        }
        for i in range(8)
    ]
    custom.patch_cluster_custom_object_status(
        GROUP, VERSION, "gpunodes", node, {"status": {"gpus": gpus}}
    )


def workers(core: client.CoreV1Api, job: str) -> list[Any]:
    pods = core.list_namespaced_pod("default", label_selector=f"voltpack.io/job={job}").items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def bound(core: client.CoreV1Api, job: str) -> list[Any]:
    return [p for p in workers(core, job) if p.spec.node_name]


def gpus_of(pod: Any) -> set[int]:
    text = (pod.metadata.annotations or {}).get("voltpack.io/gpu-indices", "")
    return {int(g) for g in text.split(",") if g}


def job_events(core: client.CoreV1Api, job: str) -> list[Any]:
    return [
        e
        for e in core.list_namespaced_event("default").items
        if e.involved_object.kind == "GPUJob" and e.involved_object.name == job
    ]


def job_story(core: client.CoreV1Api, operator: Any, job: str) -> str:
    """What a failed wait saw: the job's pods, its Events and the recovery's counters."""
    pods = core.list_namespaced_pod("default", label_selector=f"voltpack.io/job={job}").items
    lines = [
        f"pod {p.metadata.name} uid={p.metadata.uid} node={p.spec.node_name} "
        f"phase={p.status.phase if p.status else None} deleting={p.metadata.deletion_timestamp} "
        f"world-size={(p.metadata.annotations or {}).get('voltpack.io/world-size')}"
        for p in pods
    ]
    lines += [f"event {e.reason}: {e.message}" for e in job_events(core, job)]
    recovery = operator.recovery
    lines.append(
        f"recovery: shrinks={recovery.shrinks} restarts={recovery.restarts} "
        f"grows={recovery.grows} failed cycles={operator.stats.failed_cycles}"
    )
    return "\n".join(lines)


def gpujob(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(  # type: ignore[no-any-return]
        GROUP, VERSION, "default", "gpujobs", name
    )


def wait_for_gang_replaced(core: client.CoreV1Api, job: str, old_uids: set[str]) -> list[Any]:
    """Waits until all 8 workers are bound again, none of them an old pod; returns them."""

    def replaced() -> list[Any]:
        now = bound(core, job)
        return now if len(now) == 8 and not ({p.metadata.uid for p in now} & old_uids) else []

    return wait_for(replaced, timeout_s=30, what="the whole gang re-placed")  # type: ignore[no-any-return]


def wait_for_restart_event(core: client.CoreV1Api, job: str) -> Any:
    """Waits for the job's RestartingGang Event and returns it."""

    def event() -> Any:
        return next((e for e in job_events(core, job) if e.reason == "RestartingGang"), None)

    return wait_for(event, timeout_s=10, what="the RestartingGang Event")


XID_48 = {"signal": "xid", "code": 48, "action": "reset", "message": "double-bit ECC error"}


def test_a_fault_under_a_running_gang_cordons_the_gpu_and_restarts_the_gang_off_it(
    cluster: RunningEmulator, api: client.ApiClient
) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", "gpujobs", gpu_job_manifest("train", workers=8, gpus=1)
    )
    source = KubeAdminSource(api, policy_for_strategy("best-fit"), "", stale_after_s=60)
    with closing(source), operator_config_thread(cluster) as operator:
        wait_for(lambda: len(bound(core, "train")) == 8, timeout_s=30, what="gang of 8 bound")
        first = {p.metadata.name: p for p in bound(core, "train")}
        victim = first["train-worker-3"]
        node, gpu = victim.spec.node_name, min(gpus_of(victim))
        old_uids = {p.metadata.uid for p in first.values()}
        write_gpus(custom, node, {gpu: [XID_48]})
        again = wait_for_gang_replaced(core, "train", old_uids)
        assert all(not (p.spec.node_name == node and gpu in gpus_of(p)) for p in again), (
            "a worker was placed on the cordoned GPU"
        )
        assert sorted(p.metadata.name for p in again) == sorted(first)  # same workers
        assert operator.recovery.restarts == 1
        expected = f"GPU {gpu} of {node}: XID 48 (double-bit ECC error), calls for reset"
        event = wait_for_restart_event(core, "train")
        assert event.message == (
            f"{expected}: restarting gang from its checkpoint (restart 1 of 3 this hour)"
        )
        wait_for(
            lambda: (
                "Recovered"
                in {
                    c["type"]
                    for c in gpujob(custom, "train").get("status", {}).get("conditions", [])
                }
            ),
            timeout_s=10,
            what="the Recovered condition",
        )

        def recovered(name: str) -> dict[str, Any]:
            conditions = gpujob(custom, name).get("status", {}).get("conditions", [])
            return {c["type"]: c for c in conditions}.get("Recovered", {})

        wait_for(
            lambda: recovered("train").get("status") == "True",
            timeout_s=10,
            what="Recovered True once the gang runs whole again",
        )
        status = gpujob(custom, "train")["status"]
        condition = recovered("train")
        assert condition["reason"] == "RestartingGang" and condition["message"] == event.message
        assert len(status["recovery"]["restarts"]) == 1
        wait_for(
            lambda: {j.name: j for j in source.jobs()}["train"].recovery_reason == event.message,
            timeout_s=10,
            what="the admin API's explanation",
        )
        # the GPU stays out until the agent clears the fault; no further restart meanwhile
        assert operator.recovery.restarts == 1


def operator_config_thread(cluster: RunningEmulator) -> Any:
    return operator_thread(cluster.url, operator_config())


@pytest.mark.parametrize("cluster", [1], indirect=True)
def test_an_elastic_job_shrinks_on_faults_to_its_minimum_and_grows_back_when_they_clear(
    cluster: RunningEmulator, api: client.ApiClient
) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        "gpujobs",
        gpu_job_manifest("elastic", workers=8, gpus=1, minWorkers=6),
    )
    with operator_config_thread(cluster) as operator:
        wait_for(lambda: len(bound(core, "elastic")) == 8, timeout_s=30, what="8 workers bound")
        first = {p.metadata.name: p for p in bound(core, "elastic")}
        assert {p.metadata.annotations["voltpack.io/world-size"] for p in first.values()} == {"8"}
        victim = first["elastic-worker-5"]
        gpu, rank = min(gpus_of(victim)), victim.metadata.annotations["voltpack.io/rank"]
        write_gpus(custom, "node-a", {gpu: [XID_48]})

        def shrunk() -> bool:
            now = bound(core, "elastic")
            return len(now) == 7 and all(
                p.metadata.annotations.get("voltpack.io/world-size") == "7" for p in now
            )

        wait_for(
            shrunk,
            timeout_s=30,
            what="shrunk to 7 with world size 7",
            explain=lambda: job_story(core, operator, "elastic"),
        )
        survivors = {p.metadata.name: p.metadata.uid for p in bound(core, "elastic")}
        assert "elastic-worker-5" not in survivors
        assert all(first[n].metadata.uid == uid for n, uid in survivors.items())  # not restarted
        assert operator.recovery.shrinks == 1 and operator.recovery.restarts == 0
        assert len(workers(core, "elastic")) == 7  # the lost worker is not recreated: no room
        status = gpujob(custom, "elastic")["status"]
        assert status["recovery"]["missingWorkers"] == [5]
        ranks = bound(core, "elastic")[0].metadata.annotations["voltpack.io/world-ranks"]
        assert rank not in ranks.split(",") and len(ranks.split(",")) == 7
        shrink = next(e for e in job_events(core, "elastic") if e.reason == "ShrunkInPlace")
        assert "shrinking in place from 8 to 7 workers (minWorkers 6)" in shrink.message

        # a second fault: down to 6, its minimum
        second = first["elastic-worker-2"]
        gpu2, rank2 = min(gpus_of(second)), second.metadata.annotations["voltpack.io/rank"]
        write_gpus(custom, "node-a", {gpu: [XID_48], gpu2: [XID_48]})
        wait_for(
            lambda: (
                len(bound(core, "elastic")) == 6
                and all(
                    p.metadata.annotations.get("voltpack.io/world-size") == "6"
                    for p in bound(core, "elastic")
                )
            ),
            timeout_s=30,
            what="shrunk to 6 with world size 6",
        )
        assert operator.recovery.shrinks == 2 and operator.recovery.restarts == 0
        survivors = {p.metadata.name: p.metadata.uid for p in bound(core, "elastic")}

        write_gpus(custom, "node-a", {})  # the agent cleared the faults after a reset

        def grown() -> bool:
            now = bound(core, "elastic")
            return len(now) == 8 and all(
                p.metadata.annotations.get("voltpack.io/world-size") == "8" for p in now
            )

        wait_for(grown, timeout_s=30, what="grown back to 8")
        back = {p.metadata.name: p for p in bound(core, "elastic")}
        assert back["elastic-worker-5"].metadata.annotations["voltpack.io/rank"] == rank
        assert back["elastic-worker-2"].metadata.annotations["voltpack.io/rank"] == rank2
        assert sorted(int(p.metadata.annotations["voltpack.io/rank"]) for p in back.values()) == [
            *range(8)
        ]
        assert all(back[n].metadata.uid == uid for n, uid in survivors.items())
        assert operator.recovery.grows == 1
        wait_for(
            lambda: gpujob(custom, "elastic")["status"]["recovery"]["missingWorkers"] == [],
            timeout_s=10,
            what="no missing workers in status",
        )

        def recovered() -> dict[str, Any]:
            conditions = gpujob(custom, "elastic")["status"]["conditions"]
            return {c["type"]: c for c in conditions}["Recovered"]

        wait_for(
            lambda: recovered()["status"] == "True",
            timeout_s=10,
            what="Recovered True once all 8 run",
        )
        assert recovered()["reason"] == "GrowingBack"


@pytest.mark.parametrize("cluster", [4], indirect=True)
def test_one_node_fault_shrinks_an_elastic_job_from_8_to_6_and_it_grows_back(
    cluster: RunningEmulator, api: client.ApiClient
) -> None:
    """8 workers of 4 GPUs on 4 nodes of 8: a fault calling for a reboot takes a whole node,
    so two workers at once; the job (minWorkers 6) goes on with 6 and grows back to 8."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    manifest = gpu_job_manifest("wide", workers=8, gpus=4, minWorkers=6)
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", manifest)
    with operator_config_thread(cluster) as operator:
        wait_for(lambda: len(bound(core, "wide")) == 8, timeout_s=30, what="8 workers bound")
        first = {p.metadata.name: p for p in bound(core, "wide")}
        node = first["wide-worker-3"].spec.node_name
        on_node = sorted(n for n, p in first.items() if p.spec.node_name == node)
        assert len(on_node) == 2  # 4 GPUs each: two workers per node
        lost_ranks = {first[n].metadata.annotations["voltpack.io/rank"] for n in on_node}
        xid_79 = {"signal": "xid", "code": 79, "action": "reboot", "message": "fell off the bus"}
        write_gpus(custom, node, {min(gpus_of(first[on_node[0]])): [xid_79]})

        def at_size(size: int) -> bool:
            now = bound(core, "wide")
            return len(now) == size and all(
                p.metadata.annotations.get("voltpack.io/world-size") == str(size) for p in now
            )

        wait_for(
            lambda: at_size(6),
            timeout_s=30,
            what="shrunk to 6 with world size 6",
            explain=lambda: job_story(core, operator, "wide"),
        )
        survivors = {p.metadata.name: p.metadata.uid for p in bound(core, "wide")}
        assert set(survivors) == set(first) - set(on_node)
        assert all(first[n].metadata.uid == uid for n, uid in survivors.items())  # in place
        assert node not in {p.spec.node_name for p in bound(core, "wide")}
        assert operator.recovery.shrinks == 1 and operator.recovery.restarts == 0
        ranks = bound(core, "wide")[0].metadata.annotations["voltpack.io/world-ranks"]
        assert not (lost_ranks & set(ranks.split(","))) and len(ranks.split(",")) == 6
        shrink = next(e for e in job_events(core, "wide") if e.reason == "ShrunkInPlace")
        assert "shrinking in place from 8 to 6 workers (minWorkers 6)" in shrink.message
        missing = gpujob(custom, "wide")["status"]["recovery"]["missingWorkers"]
        assert sorted(missing) == sorted(int(n.rsplit("-", 1)[1]) for n in on_node)

        write_gpus(custom, node, {})  # the node rebooted and its agent reports it healthy
        wait_for(
            lambda: at_size(8),
            timeout_s=30,
            what="grown back to 8",
            explain=lambda: job_story(core, operator, "wide"),
        )
        back = {p.metadata.name: p for p in bound(core, "wide")}
        assert sorted(int(p.metadata.annotations["voltpack.io/rank"]) for p in back.values()) == [
            *range(8)
        ]
        assert {back[n].metadata.annotations["voltpack.io/rank"] for n in on_node} == lost_ranks
        assert all(back[n].metadata.uid == uid for n, uid in survivors.items())
        assert operator.recovery.grows == 1 and operator.recovery.restarts == 0


PREEMPTING_POLICY = """\
apiVersion: voltpack.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: faults}
spec:
  scoring: {strategy: best-fit}
  queueing: {min_runtime_s: 0}
"""


@pytest.mark.parametrize("cluster", [1], indirect=True)
def test_preemption_shrinks_an_elastic_job_instead_of_evicting_it(
    cluster: RunningEmulator, api: client.ApiClient
) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    elastic = gpu_job_manifest("elastic", workers=8, gpus=1, minWorkers=6, preemptible=True)
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", elastic)
    config = replace(operator_config(), policy=parse_policy(PREEMPTING_POLICY))
    with operator_thread(cluster.url, config) as operator:
        wait_for(
            lambda: (
                len(bound(core, "elastic")) == 8
                and all(p.status.phase == "Running" for p in bound(core, "elastic"))
            ),
            timeout_s=30,
            what="8 workers running",
        )
        before = {p.metadata.name: p.metadata.uid for p in bound(core, "elastic")}
        ranks_before = {
            p.metadata.name: int(p.metadata.annotations["voltpack.io/rank"])
            for p in bound(core, "elastic")
        }
        assert sorted(ranks_before.values()) == list(range(8))
        vip = gpu_job_manifest("vip", workers=2, gpus=1, priority=5)
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", vip)
        wait_for(lambda: len(bound(core, "vip")) == 2, timeout_s=30, what="vip bound")
        wait_for(
            lambda: (
                len(bound(core, "elastic")) == 6
                and all(
                    p.metadata.annotations.get("voltpack.io/world-size") == "6"
                    for p in bound(core, "elastic")
                )
            ),
            timeout_s=30,
            what="elastic shrunk to 6",
        )
        kept = {p.metadata.name: p.metadata.uid for p in bound(core, "elastic")}
        assert all(before[name] == uid for name, uid in kept.items())  # not restarted
        assert len(workers(core, "elastic")) == 6  # the two taken are not recreated
        assert sorted(ranks_before[name] for name in set(before) - set(kept)) == [6, 7]
        shrink = next(e for e in job_events(core, "elastic") if e.reason == "ShrunkInPlace")
        assert "shrunk from 8 to 6 pods (elastic) for gang default/vip" in shrink.message
        assert operator.stats.evicted_gangs == 1 and operator.recovery.restarts == 0

        custom.delete_namespaced_custom_object(GROUP, VERSION, "default", "gpujobs", "vip")
        wait_for(
            lambda: (
                len(bound(core, "elastic")) == 8
                and all(
                    p.metadata.annotations.get("voltpack.io/world-size") == "8"
                    for p in bound(core, "elastic")
                )
            ),
            timeout_s=30,
            what="elastic grown back to 8 once vip is gone",
        )
        ranks = sorted(
            int(p.metadata.annotations["voltpack.io/rank"]) for p in bound(core, "elastic")
        )
        assert ranks == list(range(8))


def test_a_fault_calling_for_a_reboot_moves_the_gang_off_the_whole_node(
    cluster: RunningEmulator, api: client.ApiClient
) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", "gpujobs", gpu_job_manifest("train", workers=4, gpus=2)
    )
    with operator_config_thread(cluster) as operator:
        wait_for(lambda: len(bound(core, "train")) == 4, timeout_s=30, what="gang of 4 bound")
        first = bound(core, "train")
        node = first[0].spec.node_name
        assert {p.spec.node_name for p in first} == {node}  # best-fit packs one node
        xid_79 = {"signal": "xid", "code": 79, "action": "reboot", "message": "fell off the bus"}
        gpu = min(gpus_of(first[0]))
        write_gpus(custom, node, {gpu: [xid_79]})
        old = {p.metadata.uid for p in first}
        wait_for(
            lambda: (
                len(bound(core, "train")) == 4
                and not ({p.metadata.uid for p in bound(core, "train")} & old)
            ),
            timeout_s=30,
            what="the gang re-placed",
        )
        assert {p.spec.node_name for p in bound(core, "train")} == {"node-a", "node-b"} - {node}
        assert operator.recovery.restarts == 1
        event = wait_for_restart_event(core, "train")
        assert event.message.startswith(
            f"GPU {gpu} of {node}: XID 79 (fell off the bus), calls for reboot: restarting gang"
        )


def test_an_xid_from_the_fake_nvml_through_the_agent_restarts_the_gang_off_that_gpu(
    cluster: RunningEmulator,
    api: client.ApiClient,
    fake_nvml_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """End to end: the fake libnvidia-ml.so raises XID 48, the agent's publisher (real pynvml,
    real event set) writes it into the GPUNode, the operator restarts the gang off that GPU."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", "gpujobs", gpu_job_manifest("train", workers=8, gpus=1)
    )
    source = KubeAdminSource(api, policy_for_strategy("best-fit"), "", stale_after_s=60)
    state = write_state(tmp_path / "nvml-state", [FakeGpu() for _ in range(8)])
    monkeypatch.setenv(STATE_ENV, str(state))
    with closing(source), operator_config_thread(cluster) as operator, NvmlBackend() as backend:
        wait_for(lambda: len(bound(core, "train")) == 8, timeout_s=30, what="gang of 8 bound")
        first = bound(core, "train")
        victim = first[0]
        node, gpu = victim.spec.node_name, min(gpus_of(victim))
        sync = GpuNodeSync(custom, node, backend)  # the agent of the gang's node
        sync.reconcile_once()  # publishes the GPUs and registers the event sets
        raise_xid(state, gpu, 48)
        sync.reconcile_once()
        status = custom.get_cluster_custom_object(GROUP, VERSION, "gpunodes", node)["status"]
        assert {c["type"]: c for c in status["conditions"]}[f"GPU{gpu}Fault"]["reason"] == "Xid48"

        again = wait_for_gang_replaced(core, "train", {p.metadata.uid for p in first})
        assert all(not (p.spec.node_name == node and gpu in gpus_of(p)) for p in again)
        assert operator.recovery.restarts == 1
        event = wait_for_restart_event(core, "train")
        assert event.message.startswith(f"GPU {gpu} of {node}: XID 48")
        wait_for(
            lambda: {j.name: j for j in source.jobs()}["train"].recovery_reason == event.message,
            timeout_s=10,
            what="the admin API's explanation",
        )
