"""JobSet (and so Kubeflow Trainer v2's TrainJobs, which run as JobSets): gangs as the JobSet's
spec implies them.

From sigs.k8s.io/jobset v0.10.1 (`api/jobset/v1alpha2`, `pkg/constants`, `pkg/webhooks`): each
pod carries `jobset.sigs.k8s.io/jobset-name`, `replicatedjob-name`, `job-index` and
`restart-attempt` labels; a replicated job runs `replicas` Jobs of `parallelism` pods each.

- Every replicated job starts at once (no `dependsOn`, `startupPolicyOrder` not `InOrder`):
  the whole JobSet is one gang.
- Otherwise a replicated job waits for the one before it, so each replicated job is a gang.
- Exclusive placement (`alpha.jobset.sigs.k8s.io/exclusive-topology`): JobSet's webhook admits a
  Job's other pods only once its leader (completion index 0) is scheduled, and pins them to the
  leader's domain; so each Job is a gang whose leader is placed first, alone.

A restart makes new Jobs (a new `restart-attempt`): their pods form a new gang.
"""

from __future__ import annotations

from typing import Any

from voltpack.operator.kube.groups.mark import (
    GroupMark,
    GroupUnreadableError,
    WorkloadObjects,
    annotations_of,
    count,
    labels_of,
    namespace_of,
    owner_of,
)

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
EXCLUSIVE_ANNOTATION = "alpha.jobset.sigs.k8s.io/exclusive-topology"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOBSET_RESOURCE = "jobsets.jobset.x-k8s.io"


def jobset_group(pod: dict[str, Any], objects: WorkloadObjects) -> GroupMark | None:
    labels = labels_of(pod)
    name = labels.get(JOBSET_NAME_LABEL)
    if not name:
        return None
    namespace = namespace_of(pod)
    jobset = objects.get(JOBSET_RESOURCE, namespace, name)
    if jobset is None:
        raise GroupUnreadableError(f"its JobSet {namespace}/{name} is not known yet")
    spec = jobset.get("spec") or {}
    jobs = {str(r.get("name")): r for r in spec.get("replicatedJobs") or []}
    replicated = labels.get(REPLICATED_JOB_LABEL, "")
    if replicated not in jobs:
        raise GroupUnreadableError(
            f"JobSet {namespace}/{name} has no replicated job {replicated!r}"
        )
    attempt = labels.get(RESTART_ATTEMPT_LABEL, "0")
    owner = owner_of(jobset)
    if EXCLUSIVE_ANNOTATION in annotations_of(pod):
        index = labels.get(JOB_INDEX_LABEL, "0")
        leader = annotations_of(pod).get(COMPLETION_INDEX_ANNOTATION) == "0"
        return GroupMark(
            f"{namespace}/jobset:{name}-{attempt}/{replicated}-{index}",
            1 if leader else _parallelism(jobs[replicated], name),
            "jobset",
            owner=owner,
        )
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    if in_order or any(job.get("dependsOn") for job in jobs.values()):
        return GroupMark(
            f"{namespace}/jobset:{name}-{attempt}/{replicated}",
            _pods(jobs[replicated], name),
            "jobset",
            owner=owner,
        )
    return GroupMark(
        f"{namespace}/jobset:{name}-{attempt}",
        sum(_pods(job, name) for job in jobs.values()),
        "jobset",
        owner=owner,
    )


def _parallelism(job: dict[str, Any], jobset: str) -> int:
    template = (job.get("template") or {}).get("spec") or {}
    where = f"JobSet {jobset} replicatedJobs[{job.get('name')}].template.spec.parallelism"
    return count(template.get("parallelism", 1), where)


def _pods(job: dict[str, Any], jobset: str) -> int:
    """The pods a replicated job runs at once: replicas x parallelism."""
    replicas = count(
        job.get("replicas", 1), f"JobSet {jobset} replicatedJobs[{job.get('name')}].replicas"
    )
    return replicas * _parallelism(job, jobset)
