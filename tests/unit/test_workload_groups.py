"""Gangs from the ecosystem's own markers: each convention maps the pods its controller makes
(labels and annotations as the pinned sources write them) to one gang, its minimum, queue and
owner; a pod whose gang cannot be read yet waits, named why; running members count."""

from __future__ import annotations

from typing import Any

import pytest

from voltpack.operator.kube.groups.jobset import JOBSET_RESOURCE
from voltpack.operator.kube.groups.kuberay import RAYCLUSTER_RESOURCE
from voltpack.operator.kube.groups.lws import LWS_RESOURCE
from voltpack.operator.kube.groups.mark import (
    CachedWorkloadObjects,
    GroupUnreadableError,
    NoWorkloadObjects,
)
from voltpack.operator.kube.groups.pod_groups import KAI_PODGROUPS, VOLCANO_PODGROUPS
from voltpack.operator.kube.groups.resolve import group_of
from voltpack.operator.scheduling.cluster_view import pending_work
from voltpack.operator.scheduling.queues import gang_key, gang_queue


def pod(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        node: str | None = None, namespace: str = "ml") -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {
        "schedulerName": "voltpack",
        "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                     "labels": labels or {}, "annotations": annotations or {},
                     "creationTimestamp": "2026-12-01T00:00:00Z"},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }  # fmt: skip


def objects(*held: tuple[str, dict[str, Any]]) -> CachedWorkloadObjects:
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for resource, obj in held:
        meta = obj["metadata"]
        by.setdefault(resource, {})[f"{meta['namespace']}/{meta['name']}"] = obj
    return CachedWorkloadObjects({r: objs.get for r, objs in by.items()})


def obj(
    kind: str, name: str, spec: dict[str, Any], api: str = "x/v1", **meta: Any
) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind,
            "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", **meta},
            "spec": spec}  # fmt: skip


def test_a_pod_without_a_marker_is_alone() -> None:
    assert group_of(pod("p"), NoWorkloadObjects()) is None


def test_kueue_plain_pod_group_takes_its_total_count() -> None:
    marked = pod("a", {"kueue.x-k8s.io/pod-group-name": "g"},
                 {"kueue.x-k8s.io/pod-group-total-count": "3"})  # fmt: skip
    mark = group_of(marked, NoWorkloadObjects())
    assert mark is not None and (mark.key, mark.min_member) == ("ml/kueue:g", 3)
    bad = pod("b", {"kueue.x-k8s.io/pod-group-name": "g"},
              {"kueue.x-k8s.io/pod-group-total-count": "three"})  # fmt: skip
    with pytest.raises(GroupUnreadableError, match="pod-group-total-count='three'"):
        group_of(bad, NoWorkloadObjects())


def test_volcano_and_kai_pod_groups_are_read_from_their_objects() -> None:
    volcano = pod("v", annotations={"scheduling.k8s.io/group-name": "pg"})
    with pytest.raises(GroupUnreadableError, match=r"PodGroup ml/pg .* not known yet"):
        group_of(volcano, NoWorkloadObjects())
    held = objects(
        (VOLCANO_PODGROUPS, obj("PodGroup", "pg", {"minMember": 4, "queue": "research"}))
    )
    mark = group_of(volcano, held)
    assert mark is not None and (mark.key, mark.min_member, mark.queue) == (
        "ml/volcano:pg",
        4,
        "research",
    )
    kai = pod("k", {"kai.scheduler/queue": "team-a"}, {"pod-group-name": "pg-1"})
    owner = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train",
             "uid": "u1", "controller": True}  # fmt: skip
    group = obj("PodGroup", "pg-1", {"minMember": 2, "topologyConstraint": {
        "requiredTopologyLevel": "example.com/rack"}}, ownerReferences=[owner])  # fmt: skip
    mark = group_of(kai, objects((KAI_PODGROUPS, group)))
    assert mark is not None and mark.min_member == 2 and mark.queue == "team-a"
    assert mark.owner is not None and (mark.owner.kind, mark.owner.name) == ("JobSet", "train")
    assert mark.topology is not None and mark.topology.required_level == "example.com/rack"


def lws_pod(
    name: str, group: str, worker: str, node: str | None = None, **extra: str
) -> dict[str, Any]:
    labels = {"leaderworkerset.sigs.k8s.io/name": "infer",
              "leaderworkerset.sigs.k8s.io/group-index": group,
              "leaderworkerset.sigs.k8s.io/worker-index": worker}  # fmt: skip
    return pod(name, labels, {"leaderworkerset.sigs.k8s.io/size": "4", **extra}, node)


def test_each_leaderworkerset_group_is_a_gang() -> None:
    pods = [lws_pod(f"infer-{g}-{w}", str(g), str(w)) for g in range(3) for w in range(4)]
    work = pending_work(pods)
    assert [(g.name, len(g.pods), g.min_member) for g in work.groups] == [
        ("ml/lws:infer-0", 4, 4), ("ml/lws:infer-1", 4, 4), ("ml/lws:infer-2", 4, 4)]  # fmt: skip
    partial = pending_work([lws_pod("infer-0", "0", "0")])
    assert "1 of 4 members exist" in partial.held["ml/infer-0"]


def test_a_leader_that_must_start_first_is_placed_alone_and_its_workers_join_it() -> None:
    """LeaderReady (or exclusive placement): the controller makes the workers only after the
    leader runs, so waiting for all four would wait for ever."""
    lws = obj("LeaderWorkerSet", "infer", {"startupPolicy": "LeaderReady"})
    held = objects((LWS_RESOURCE, lws))
    leader = lws_pod("infer-0", "0", "0")
    mark = group_of(leader, held)
    assert mark is not None and mark.min_member == 1
    assert mark.owner is not None and mark.owner.kind == "LeaderWorkerSet"
    [alone] = pending_work([leader], groups=lambda p: group_of(p, held)).groups
    assert (alone.name, alone.min_member) == ("ml/lws:infer-0", 1)
    running = lws_pod("infer-0", "0", "0", node="n1")
    workers = [lws_pod(f"infer-0-{w}", "0", str(w)) for w in (1, 2, 3)]
    [joined] = pending_work([running, *workers], groups=lambda p: group_of(p, held)).groups
    assert (len(joined.pods), joined.min_member) == (3, 3)
    exclusive = lws_pod(
        "infer-1", "1", "0", **{"leaderworkerset.sigs.k8s.io/exclusive-topology": "rack"}
    )
    mark = group_of(exclusive, NoWorkloadObjects())
    assert mark is not None and mark.min_member == 1


def jobset(spec: dict[str, Any]) -> dict[str, Any]:
    return obj("JobSet", "train", spec, api="jobset.x-k8s.io/v1alpha2")


def rjob(name: str, replicas: int, parallelism: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "replicas": replicas,
            "template": {"spec": {"parallelism": parallelism}}, **extra}  # fmt: skip


def jobset_pod(name: str, replicated: str, index: int, node: str | None = None,
               **annotations: str) -> dict[str, Any]:  # fmt: skip
    labels = {"jobset.sigs.k8s.io/jobset-name": "train",
              "jobset.sigs.k8s.io/replicatedjob-name": replicated,
              "jobset.sigs.k8s.io/job-index": str(index),
              "jobset.sigs.k8s.io/restart-attempt": "0"}  # fmt: skip
    return pod(name, labels, annotations, node)


def test_a_jobset_is_one_gang_or_one_per_replicated_job_as_its_spec_implies() -> None:
    together = objects(
        (JOBSET_RESOURCE, jobset({"replicatedJobs": [rjob("workers", 2, 4), rjob("driver", 1, 1)]}))
    )
    mark = group_of(jobset_pod("w-0", "workers", 0), together)
    assert mark is not None and (mark.key, mark.min_member) == ("ml/jobset:train-0", 9)
    ordered = objects((JOBSET_RESOURCE, jobset({
        "startupPolicy": {"startupPolicyOrder": "InOrder"},
        "replicatedJobs": [rjob("driver", 1, 1), rjob("workers", 2, 4)]})))  # fmt: skip
    mark = group_of(jobset_pod("w-0", "workers", 0), ordered)
    assert mark is not None and (mark.key, mark.min_member) == ("ml/jobset:train-0/workers", 8)
    depends = objects(
        (
            JOBSET_RESOURCE,
            jobset(
                {
                    "replicatedJobs": [
                        rjob("init", 1, 1),
                        rjob("node", 1, 4, dependsOn=[{"name": "init", "status": "Complete"}]),
                    ]
                }
            ),
        )
    )
    mark = group_of(jobset_pod("n-0", "node", 0), depends)
    assert mark is not None and mark.min_member == 4
    with pytest.raises(GroupUnreadableError, match="JobSet ml/train is not known yet"):
        group_of(jobset_pod("w-0", "workers", 0), NoWorkloadObjects())
    with pytest.raises(GroupUnreadableError, match="no replicated job 'other'"):
        group_of(jobset_pod("o-0", "other", 0), together)


def test_an_exclusive_jobset_places_each_jobs_leader_first() -> None:
    held = objects((JOBSET_RESOURCE, jobset({"replicatedJobs": [rjob("workers", 2, 4)]})))
    exclusive = {"alpha.jobset.sigs.k8s.io/exclusive-topology": "rack"}
    leader = jobset_pod("w-1-0", "workers", 1, **exclusive,
                        **{"batch.kubernetes.io/job-completion-index": "0"})  # fmt: skip
    follower = jobset_pod("w-1-1", "workers", 1, **exclusive,
                          **{"batch.kubernetes.io/job-completion-index": "1"})  # fmt: skip
    lead, follow = group_of(leader, held), group_of(follower, held)
    assert lead is not None and follow is not None and lead.key == follow.key
    assert (lead.key, lead.min_member, follow.min_member) == ("ml/jobset:train-0/workers-1", 1, 4)


def test_a_replacement_pod_joins_its_running_gang() -> None:
    """Issue 45: a recreated worker of a running JobSet is placed on its own."""
    held = objects((JOBSET_RESOURCE, jobset({"replicatedJobs": [rjob("workers", 2, 4)]})))
    running = [jobset_pod(f"w-{i}", "workers", i // 4, node="n1") for i in range(7)]
    replacement = jobset_pod("w-7", "workers", 1)
    [group] = pending_work([*running, replacement], groups=lambda p: group_of(p, held)).groups
    assert (group.name, len(group.pods), group.min_member) == ("ml/jobset:train-0", 1, 1)
    [only] = pending_work(
        [*running[:5], replacement], groups=lambda p: group_of(p, held)
    ).held.values()
    assert "6 of 8 members exist (5 running); waiting" in only


def test_a_rayclusters_head_and_workers_are_one_gang_of_kuberays_size() -> None:
    cluster = obj("RayCluster", "ray", {"workerGroupSpecs": [
        {"groupName": "gpu", "replicas": 3, "minReplicas": 1, "maxReplicas": 5, "numOfHosts": 2},
        {"groupName": "cpu", "replicas": 9, "minReplicas": 0, "maxReplicas": 4},
        {"groupName": "off", "replicas": 2, "suspend": True}]})  # fmt: skip
    head = pod("ray-head", {"ray.io/cluster": "ray", "ray.io/node-type": "head"})
    mark = group_of(head, objects((RAYCLUSTER_RESOURCE, cluster)))
    assert mark is not None and (mark.key, mark.min_member) == ("ml/ray:ray", 1 + 6 + 4)
    cluster["spec"]["enableInTreeAutoscaling"] = True
    mark = group_of(head, objects((RAYCLUSTER_RESOURCE, cluster)))
    assert mark is not None and mark.min_member == 1 + 2


def test_a_gang_that_cannot_be_read_waits_and_names_why() -> None:
    waiting = jobset_pod("w-0", "workers", 0)
    work = pending_work([waiting, pod("free")])
    assert [g.name for g in work.groups] == ["ml/free"]
    assert work.held["ml/w-0"] == "pod ml/w-0: its JobSet ml/train is not known yet"
    assert gang_key(waiting) == "ml/w-0"


def test_a_gangs_queue_comes_from_its_pod_group_unless_the_pod_names_one() -> None:
    held = objects(
        (VOLCANO_PODGROUPS, obj("PodGroup", "pg", {"minMember": 1, "queue": "research"}))
    )
    member = pod("v", annotations={"scheduling.k8s.io/group-name": "pg"})
    assert gang_queue(member, lambda p: group_of(p, held)) == ("research", False)
    member["metadata"]["annotations"]["voltpack.io/queue"] = "mine"
    assert gang_queue(member, lambda p: group_of(p, held)) == ("mine", False)
