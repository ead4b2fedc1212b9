"""GangRecovery's decisions carried out: whole-gang restart, shrink in place, grow back, budget.

The Kubernetes API is faked at its lowest boundary (the client methods GangRecovery calls,
answering as the server does); the snapshot, faults and decisions are the real ones."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from voltpack.model import Node
from voltpack.model.resources import GpuJobSpec
from voltpack.operator.kube.translate import node_to_k8s
from voltpack.operator.scheduling.cluster_view import build_snapshot, pending_work
from voltpack.operator.scheduling.gang_recovery import GangRecovery, join_ranks
from voltpack.operator.scheduling.gpu_faults import GpuFaultSeen, isolation_of
from voltpack.operator.scheduling.jobs import WorkerPlan, worker_pod
from voltpack.scheduler.fault_recovery import RecoveryPolicy


@dataclass
class _Reply:
    data: bytes = b"{}"


@dataclass
class _Configuration:
    host: str = "http://fake-api-server"


@dataclass
class _ApiClient:
    configuration: _Configuration = field(default_factory=_Configuration)


@dataclass
class FakeCore:
    """The CoreV1Api calls GangRecovery makes, recorded."""

    deleted: list[str] = field(default_factory=list)
    patched: dict[str, dict[str, str]] = field(default_factory=dict)
    events: list[tuple[str, str]] = field(default_factory=list)
    api_client: _ApiClient = field(default_factory=_ApiClient)

    def delete_namespaced_pod(self, name: str, namespace: str, **_: Any) -> _Reply:
        self.deleted.append(name)
        return _Reply()

    def patch_namespaced_pod(self, name: str, namespace: str, body: Any, **_: Any) -> _Reply:
        self.patched.setdefault(name, {}).update(body["metadata"]["annotations"])
        return _Reply()

    def create_namespaced_event(self, namespace: str, body: Any, **_: Any) -> _Reply:
        self.events.append((body["reason"], body["message"]))
        return _Reply(json.dumps(body).encode())


NODES = [node_to_k8s(Node.empty(f"node-{i}", 64_000, 524_288, 8, "H100")) for i in range(2)]


def job(name: str, workers: int, min_workers: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "workers": workers,
        "gpusPerWorker": 1,
        "template": {"spec": {"containers": [{"name": "w", "image": "t"}]}},
    }
    if min_workers is not None:
        spec["minWorkers"] = min_workers
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}


def running(gpujob: dict[str, Any], node: str, first_gpu: int = 0) -> list[dict[str, Any]]:
    """The job's workers bound to `node`, worker i on GPU first_gpu + i, rank i."""
    spec = GpuJobSpec.model_validate(gpujob["spec"])
    pods = []
    for index in range(spec.workers):
        pod = worker_pod(gpujob, spec, index, WorkerPlan())
        pod["metadata"]["uid"] = f"{pod['metadata']['name']}-uid"
        pod["metadata"]["annotations"]["voltpack.io/gpu-indices"] = str(first_gpu + index)
        pod["metadata"]["annotations"]["voltpack.io/rank"] = str(index)
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
        pods.append(pod)
    return pods


def reset(node: str, gpu: int) -> GpuFaultSeen:
    return GpuFaultSeen(node, gpu, "reset", f"GPU {gpu} of {node}: XID 48, calls for reset")


def cycle(
    recovery: GangRecovery,
    jobs: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    faults: list[GpuFaultSeen],
) -> dict[str, WorkerPlan]:
    snapshot = build_snapshot(NODES, pods, faults=faults, recovery=recovery.policy)
    names = {n: i for i, n in enumerate(snapshot.node_names)}
    return recovery.cycle(
        jobs, pods, faults, isolation_of(faults, names, recovery.policy), snapshot
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_gang_on_a_faulty_gpu_is_deleted_whole_and_recreated_only_once_gone() -> None:
    core, clock = FakeCore(), Clock()
    recovery = GangRecovery(core, RecoveryPolicy(), clock)  # type: ignore[arg-type]
    train = job("train", 4)
    pods = running(train, "node-0")
    plans = cycle(recovery, [train], pods, [reset("node-0", 2)])
    assert sorted(core.deleted) == [f"train-worker-{i}" for i in range(4)]
    assert plans["default/train"].skip == frozenset(range(4))
    assert core.events[0] == (
        "RestartingGang",
        "GPU 2 of node-0: XID 48, calls for reset: restarting gang from its checkpoint "
        "(restart 1 of 3 this hour)",
    )
    # the cache still shows two of the old pods: nothing is created, nothing deleted again
    plans = cycle(recovery, [train], pods[:2], [reset("node-0", 2)])
    assert plans["default/train"].skip == frozenset(range(4)) and len(core.deleted) == 4
    plans = cycle(recovery, [train], [], [reset("node-0", 2)])
    assert plans["default/train"].skip == frozenset()
    assert plans["default/train"].recovery is not None
    assert len(plans["default/train"].recovery["restarts"]) == 1


def test_an_elastic_job_shrinks_in_place_and_tells_the_others_the_world_size() -> None:
    core = FakeCore()
    recovery = GangRecovery(core, RecoveryPolicy(), Clock())  # type: ignore[arg-type]
    elastic = job("el", 8, min_workers=6)
    pods = running(elastic, "node-0")
    plans = cycle(recovery, [elastic], pods, [reset("node-0", 5)])
    assert core.deleted == ["el-worker-5"]
    plan = plans["default/el"]
    assert plan.skip == frozenset({5}) and plan.world_size == 7
    assert plan.ranks == (0, 1, 2, 3, 4, 6, 7)
    assert core.patched["el-worker-0"] == {
        "voltpack.io/world-size": "7",
        "voltpack.io/world-ranks": "0,1,2,3,4,6,7",
    }
    assert "el-worker-5" not in core.patched
    assert core.events[0][0] == "ShrunkInPlace"
    assert recovery.shrinks == 1 and recovery.restarts == 0


def test_a_shrink_is_not_repeated_while_the_cache_still_shows_the_deleted_workers() -> None:
    core = FakeCore()
    recovery = GangRecovery(core, RecoveryPolicy(), Clock())  # type: ignore[arg-type]
    elastic = job("el", 8, min_workers=6)
    pods = running(elastic, "node-0")
    faults = [reset("node-0", 2), reset("node-0", 5)]
    cycle(recovery, [elastic], pods, faults)
    assert sorted(core.deleted) == ["el-worker-2", "el-worker-5"]
    # the watch has not yet reported the deletions: the same pods again, then one of them
    for stale in (pods, [p for p in pods if p["metadata"]["name"] != "el-worker-2"]):
        plan = cycle(recovery, [elastic], stale, faults)["default/el"]
        assert plan.skip == frozenset({2, 5}) and plan.world_size == 6
    assert len(core.deleted) == 2 and recovery.shrinks == 1 and recovery.restarts == 0
    assert [reason for reason, _ in core.events] == ["ShrunkInPlace"]


def test_an_elastic_job_that_would_fall_below_its_minimum_restarts_whole() -> None:
    core = FakeCore()
    recovery = GangRecovery(core, RecoveryPolicy(), Clock())  # type: ignore[arg-type]
    elastic = job("el", 4, min_workers=3)
    pods = running(elastic, "node-0")
    cycle(recovery, [elastic], pods, [reset("node-0", 1), reset("node-0", 2)])
    assert len(core.deleted) == 4 and recovery.restarts == 1


def test_a_shrunk_job_grows_back_when_a_worker_fits_taking_the_missing_rank() -> None:
    core, clock = FakeCore(), Clock()
    recovery = GangRecovery(core, RecoveryPolicy(), clock)  # type: ignore[arg-type]
    elastic = job("el", 8, min_workers=6)
    # node-1 full of other work: the only room is node-0's 8 GPUs
    filler = running(job("filler", 8), "node-1")
    pods = running(elastic, "node-0")
    cycle(recovery, [elastic], pods + filler, [reset("node-0", 5)])
    left = [p for p in pods if p["metadata"]["name"] != "el-worker-5"]
    plans = cycle(recovery, [elastic], left + filler, [reset("node-0", 5)])
    assert plans["default/el"].rejoin == {} and recovery.grows == 0  # no room: stays at 7
    plans = cycle(recovery, [elastic], left + filler, [])  # the fault cleared
    assert plans["default/el"].rejoin == {}  # room seen: it must hold for grow_settle_s
    clock.now += 1
    assert cycle(recovery, [elastic], left + filler, [])["default/el"].rejoin == {}
    clock.now += 1
    plans = cycle(recovery, [elastic], left + filler, [])
    plan = plans["default/el"]
    assert plan.rejoin == {5: 5} and plan.skip == frozenset() and plan.world_size == 8
    assert recovery.grows == 1 and core.events[-1][0] == "GrowingBack"
    rejoining = worker_pod(elastic, GpuJobSpec.model_validate(elastic["spec"]), 5, plan)
    annotations = rejoining["metadata"]["annotations"]
    assert annotations["voltpack.io/min-members"] == "1"
    assert annotations["voltpack.io/rejoin-rank"] == "5"
    assert annotations["voltpack.io/world-size"] == "8"


def test_the_budget_defers_a_second_restart_and_a_new_leader_keeps_it() -> None:
    core, clock = FakeCore(), Clock()
    policy = RecoveryPolicy(max_restarts=2, budget_window_s=3600, backoff_s=60)
    recovery = GangRecovery(core, policy, clock)  # type: ignore[arg-type]
    train = job("train", 2)
    cycle(recovery, [train], running(train, "node-0"), [reset("node-0", 0)])
    plans = cycle(recovery, [train], [], [reset("node-0", 0)])
    clock.now += 10
    train["status"] = {"recovery": plans["default/train"].recovery}
    again = running(train, "node-0", first_gpu=1)  # re-placed; now GPU 1 faults too
    successor_core = FakeCore()
    successor = GangRecovery(successor_core, policy, clock)  # type: ignore[arg-type]
    cycle(successor, [train], again, [reset("node-0", 0), reset("node-0", 1)])
    assert successor.restarts == 0 and successor_core.deleted == []
    assert successor_core.events == [
        (
            "RestartDeferred",
            "GPU 1 of node-0: XID 48, calls for reset: gang restart deferred until "
            "1970-01-12T13:47:40Z (restart budget: 2 per hour, with backoff)",
        )
    ]
    clock.now += 60
    cycle(successor, [train], again, [reset("node-0", 0), reset("node-0", 1)])
    assert successor.restarts == 1


def test_a_new_recovery_policy_keeps_the_restarts_already_made() -> None:
    core, clock = FakeCore(), Clock()
    recovery = GangRecovery(core, RecoveryPolicy(max_restarts=3), clock)  # type: ignore[arg-type]
    train = job("train", 2)
    cycle(recovery, [train], running(train, "node-0"), [reset("node-0", 0)])
    cycle(recovery, [train], [], [reset("node-0", 0)])
    assert recovery.restarts == 1
    recovery.set_policy(RecoveryPolicy(max_restarts=1, backoff_s=0))  # a policy file applied
    clock.now += 10
    again = running(train, "node-0", first_gpu=1)
    cycle(recovery, [train], again, [reset("node-0", 0), reset("node-0", 1)])
    assert recovery.restarts == 1  # the one restart made already uses the new budget of 1
    assert core.events[-1][0] == "RestartDeferred"


ACTIONS = st.sampled_from(["reset", "reset", "replace", "reboot"])


@st.composite
def fault_histories(draw: st.DrawFn) -> tuple[list[tuple[int, int | None]], list[Any]]:
    gangs = draw(
        st.lists(
            st.integers(2, 8).flatmap(
                lambda n: st.tuples(st.just(n), st.none() | st.integers(1, n))
            ),
            min_size=1,
            max_size=2,
        )
    )
    rounds = draw(
        st.lists(
            st.tuples(
                st.lists(st.tuples(st.integers(0, 1), st.integers(0, 7), ACTIONS), max_size=3),
                st.sampled_from([0.0, 50.0, 150.0, 2000.0]),
            ),
            min_size=1,
            max_size=14,
        )
    )
    return gangs, rounds


@settings(max_examples=150, deadline=None)
@given(fault_histories())
def test_a_gang_is_never_left_partly_running_and_the_budget_is_never_exceeded(
    history: tuple[list[tuple[int, int | None]], list[Any]],
) -> None:
    gangs, rounds = history
    clock = Clock()
    policy = RecoveryPolicy(max_restarts=2, budget_window_s=3600, backoff_s=100)
    core = FakeCore()
    recovery = GangRecovery(core, policy, clock)  # type: ignore[arg-type]
    jobs = [job(f"j{i}", n, m) for i, (n, m) in enumerate(gangs)]
    pods = []
    for i, gpujob in enumerate(jobs):  # job i on node i, from GPU 0
        pods += running(gpujob, f"node-{i}")
    restarts: dict[str, list[float]] = {}
    for faults_drawn, wait in rounds:
        faults = [
            GpuFaultSeen(f"node-{n}", g, a, f"GPU {g} of node-{n}: {a}") for n, g, a in faults_drawn
        ]
        before = len(core.deleted)
        shrinks = recovery.shrinks
        plans = cycle(recovery, jobs, pods, faults)
        deleted = set(core.deleted[before:])
        for gpujob in jobs:
            name = gpujob["metadata"]["name"]
            spec = GpuJobSpec.model_validate(gpujob["spec"])
            mine = {
                p["metadata"]["name"]
                for p in pods
                if p["metadata"]["labels"]["voltpack.io/job"] == name
            }
            gone = deleted & mine
            if gone and gone != mine:  # a partial deletion is only an elastic shrink
                assert recovery.shrinks > shrinks
                assert len(mine - gone) >= (spec.min_workers or spec.workers)
                assert (spec.min_workers or spec.workers) < spec.workers
            if gone == mine and mine:
                restarts.setdefault(name, []).append(clock.now)
                window = [t for t in restarts[name] if t > clock.now - policy.budget_window_s]
                assert len(window) <= policy.max_restarts
                # nothing of the gang is created again while any old pod may remain
                assert plans[f"default/{name}"].skip == frozenset(range(spec.workers))
        pods = [p for p in pods if p["metadata"]["name"] not in deleted]
        # the controller recreates what is neither skipped nor present, off the faulty GPUs
        present = {p["metadata"]["name"] for p in pods}
        for i, gpujob in enumerate(jobs):
            name = gpujob["metadata"]["name"]
            plan = plans.get(f"default/{name}", WorkerPlan())  # none: nothing to change
            spec = GpuJobSpec.model_validate(gpujob["spec"])
            if (
                any(p["metadata"]["labels"]["voltpack.io/job"] == name for p in pods)
                and not plan.rejoin
            ):
                continue  # a gang is recreated whole, once all of it is gone
            for index in range(spec.workers):
                pod_name = f"{name}-worker-{index}"
                if pod_name in present or index in plan.skip:
                    continue
                pod = running(gpujob, f"node-{i}")[index]
                pod["metadata"]["uid"] = f"{pod_name}-{clock.now}"
                pods.append(pod)
        clock.now += wait


def test_workers_created_after_an_elastic_job_was_placed_join_it_alone() -> None:
    elastic = job("el", 8, min_workers=6)
    spec = GpuJobSpec.model_validate(elastic["spec"])
    placed = running(elastic, "node-0")[:6]
    late = [worker_pod(elastic, spec, i, WorkerPlan()) for i in (6, 7)]
    work = pending_work(placed + late)
    assert [(g.name, len(g.pods), g.min_member) for g in work.groups] == [("default/el", 2, 1)]
    rigid = job("rigid", 8)  # not elastic: late members still wait for the whole gang
    rigid_spec = GpuJobSpec.model_validate(rigid["spec"])
    late = [worker_pod(rigid, rigid_spec, i, WorkerPlan()) for i in (6, 7)]
    work = pending_work(running(rigid, "node-0")[:6] + late)
    assert work.groups == [] and "2 of 8 members exist" in work.held["default/rigid-worker-6"]


def test_joining_workers_take_the_ranks_the_running_ones_lack() -> None:
    elastic = job("el", 8, min_workers=6)
    spec = GpuJobSpec.model_validate(elastic["spec"])
    placed = [
        p
        for p in running(elastic, "node-0")
        if p["metadata"]["name"] not in ("el-worker-1", "el-worker-4")
    ]
    late = worker_pod(elastic, spec, 1, WorkerPlan())
    back = worker_pod(elastic, spec, 4, WorkerPlan(rejoin={4: 4}))  # told to take rank 4
    by_key = {f"default/{p['metadata']['name']}": p for p in [*placed, late, back]}
    gang = ["default/el-worker-1", "default/el-worker-4"]  # positions 0 and 1
    ranks = join_ranks(gang, by_key, by_key.values())
    assert ranks == {"default/el-worker-4": 4, "default/el-worker-1": 1}
    fresh = {f"default/{p['metadata']['name']}": p for p in [late]}
    assert join_ranks(["default/el-worker-1"], fresh, fresh.values()) == {}  # positions
