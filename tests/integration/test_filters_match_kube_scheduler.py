"""voltpack's filters against kube-scheduler's own, on thousands of random clusters.

Each case is a small cluster (labels, zones, integer racks, taints of every effect, cordons,
pod counts, extended resources, hugepages, GPUs), pods bound where they fit (labels, host ports,
required anti-affinity, some terminating) and one pending pod with random constraints (node
selector and affinity with every operator and `matchFields`, tolerations, host ports, init
containers, sidecars, overhead, pod-level resources, pod (anti-)affinity with namespaces and
namespace selectors, topology spread with `minDomains` and the inclusion policies, extended
resources). voltpack's feasible nodes (the operator's translation and the core's filters) must
be exactly those kube-scheduler v1.34.4's PreFilter and Filter plugins allow
(`tools/scheduler-oracle`): then every node voltpack may choose is one the oracle allows, and
voltpack never calls a pod unschedulable that the oracle can place. Where no node fits, the
message must be kube-scheduler's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.integration.services import missing_service
from tests.scheduler_oracle import FilterCase, SchedulerOracle, missing_oracle
from voltpack.operator.kube.translate import pod_from_k8s
from voltpack.operator.scheduling.cluster_view import build_snapshot
from voltpack.scheduler.filter import availability_message, filter_nodes

CASES = int(os.environ.get("VOLTPACK_FILTER_CASES", "3000"))
NAMESPACES = {"default": {}, "team": {"tier": "prod"}, "lab": {"tier": "dev"}}
TAINTS = [
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "infer", "effect": "NoSchedule"},
    {"key": "maint", "value": "", "effect": "NoExecute"},
    {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
]
APPS = ["web", "db", "cache"]
KEYS = ["kubernetes.io/hostname", "zone", "rack"]


@pytest.fixture(scope="module")
def oracle() -> Iterator[SchedulerOracle]:
    missing = missing_oracle()
    if missing:
        missing_service("scheduler-oracle", f"{', '.join(missing)}; run `make oracle`")
    with SchedulerOracle() as running:
        yield running


def pick(rng: np.random.Generator, items: list[Any]) -> Any:
    return items[int(rng.integers(len(items)))]


def chance(rng: np.random.Generator, p: float) -> bool:
    return bool(rng.random() < p)


def node(rng: np.random.Generator, index: int) -> dict[str, Any]:
    name = f"n{index}"
    labels = {"kubernetes.io/hostname": name}
    if chance(rng, 0.85):
        labels["zone"] = pick(rng, ["a", "b", "c"])
    if chance(rng, 0.7):
        labels["rack"] = str(int(rng.integers(0, 20)))
    if chance(rng, 0.1):
        labels["rack"] = "r7"  # no integer: Gt/Lt do not match it
    if chance(rng, 0.5):
        labels["disk"] = pick(rng, ["ssd", "hdd"])
    allocatable = {
        "cpu": pick(rng, ["2", "4", "8", "16", "7500m"]),
        "memory": pick(rng, ["4Gi", "8Gi", "16Gi", "7000M"]),
        "pods": pick(rng, ["2", "4", "110", "110"]),
    }
    if chance(rng, 0.4):
        allocatable["nvidia.com/gpu"] = pick(rng, ["1", "2", "8"])
    if chance(rng, 0.3):
        allocatable["example.com/fpga"] = pick(rng, ["1", "2"])
    if chance(rng, 0.3):
        allocatable["hugepages-2Mi"] = pick(rng, ["512Mi", "1Gi"])
    if chance(rng, 0.5):
        allocatable["ephemeral-storage"] = pick(rng, ["10Gi", "100Gi"])
    taints = [dict(t) for t in TAINTS if chance(rng, 0.12)]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": chance(rng, 0.12), "taints": taints},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def requests(rng: np.random.Generator, big: bool = False) -> dict[str, str]:
    found = {
        "cpu": pick(rng, ["100m", "500m", "1", "2", "3500m"] + (["9", "20"] if big else [])),
        "memory": pick(rng, ["128Mi", "512Mi", "1Gi", "3Gi", "500M"] + (["20Gi"] if big else [])),
    }
    if chance(rng, 0.2):
        found["nvidia.com/gpu"] = pick(rng, ["1", "2"])
    if chance(rng, 0.15):
        found["example.com/fpga"] = "1"
    if chance(rng, 0.1):
        found["hugepages-2Mi"] = "256Mi"
    if chance(rng, 0.15):
        found["ephemeral-storage"] = pick(rng, ["1Gi", "50Gi"])
    return found


def container(rng: np.random.Generator, name: str, big: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "image": "i",
        "resources": {"requests": requests(rng, big)},
    }
    if "nvidia.com/gpu" in body["resources"]["requests"]:
        gpus = body["resources"]["requests"]["nvidia.com/gpu"]
        body["resources"]["limits"] = {"nvidia.com/gpu": gpus}
    if chance(rng, 0.25):
        port: dict[str, Any] = {"containerPort": 80, "hostPort": pick(rng, [80, 443])}
        if chance(rng, 0.3):
            port["protocol"] = "UDP"
        if chance(rng, 0.3):
            port["hostIP"] = pick(rng, ["10.0.0.1", "10.0.0.2"])
        body["ports"] = [port]
    return body


def selector(rng: np.random.Generator) -> dict[str, Any]:
    if chance(rng, 0.7):
        return {"matchLabels": {"app": pick(rng, APPS)}}
    op = pick(rng, ["In", "NotIn", "Exists", "DoesNotExist"])
    requirement: dict[str, Any] = {"key": pick(rng, ["app", "tier"]), "operator": op}
    if op in ("In", "NotIn"):
        requirement["values"] = [pick(rng, [*APPS, "fe", "be"])]
    return {"matchExpressions": [requirement]}


def affinity_term(rng: np.random.Generator) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": selector(rng), "topologyKey": pick(rng, KEYS)}
    if chance(rng, 0.2):
        term["namespaces"] = [pick(rng, list(NAMESPACES))]
    if chance(rng, 0.2):
        term["namespaceSelector"] = pick(rng, [{}, {"matchLabels": {"tier": "prod"}}])
    return term


def labels(rng: np.random.Generator) -> dict[str, str]:
    found = {}
    if chance(rng, 0.8):
        found["app"] = pick(rng, APPS)
    if chance(rng, 0.4):
        found["tier"] = pick(rng, ["fe", "be"])
    return found


def bound_pod(rng: np.random.Generator, index: int, node_name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node_name, "containers": [container(rng, "c")]}
    if chance(rng, 0.15):
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(rng)]
            }
        }
    meta: dict[str, Any] = {
        "name": f"b{index}",
        "namespace": pick(rng, list(NAMESPACES)),
        "labels": labels(rng),
        "uid": f"uid-b{index}",
    }
    if chance(rng, 0.08):
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running"},
    }


def node_requirement(rng: np.random.Generator) -> dict[str, Any]:
    key = pick(rng, ["zone", "rack", "disk", "missing"])
    op = pick(
        rng, ["In", "NotIn", "Exists", "DoesNotExist"] + (["Gt", "Lt"] if key == "rack" else [])
    )
    requirement: dict[str, Any] = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        requirement["values"] = [pick(rng, ["a", "b", "c", "ssd", "3", "7"])]
    elif op in ("Gt", "Lt"):
        requirement["values"] = [str(int(rng.integers(0, 20)))]
    return requirement


def pending_pod(rng: np.random.Generator, node_names: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "voltpack", "containers": [container(rng, "main")]}
    if chance(rng, 0.2):
        init = container(rng, "setup", big=True)
        init.pop("ports", None)
        spec["initContainers"] = [init]
        if chance(rng, 0.5):
            sidecar = container(rng, "proxy")
            sidecar["restartPolicy"] = "Always"
            spec["initContainers"].insert(0, sidecar)
    if chance(rng, 0.1):
        spec["overhead"] = {"cpu": "250m", "memory": "100Mi"}
    if chance(rng, 0.2):
        spec["nodeSelector"] = {pick(rng, ["zone", "disk"]): pick(rng, ["a", "b", "ssd"])}
    node_affinity: dict[str, Any] = {}
    if chance(rng, 0.35):
        terms = []
        for _ in range(int(rng.integers(1, 3))):
            term: dict[str, Any] = {
                "matchExpressions": [node_requirement(rng) for _ in range(int(rng.integers(1, 3)))]
            }
            if chance(rng, 0.15):
                term["matchFields"] = [
                    {
                        "key": "metadata.name",
                        "operator": pick(rng, ["In", "NotIn"]),
                        "values": [pick(rng, node_names)],
                    }
                ]
            terms.append(term)
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": terms
        }
    if chance(rng, 0.1):
        only = {
            "matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [pick(rng, node_names)]}
            ]
        }
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [only]
        }
    affinity: dict[str, Any] = {}
    if node_affinity:
        affinity["nodeAffinity"] = node_affinity
    if chance(rng, 0.2):
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                affinity_term(rng) for _ in range(int(rng.integers(1, 3)))
            ]
        }
    if chance(rng, 0.25):
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(rng)]
        }
    if affinity:
        spec["affinity"] = affinity
    tolerations = []
    for taint in TAINTS:
        if chance(rng, 0.2):
            toleration: dict[str, Any] = {"key": taint["key"], "operator": "Exists"}
            if chance(rng, 0.5) and taint.get("value"):
                toleration = {"key": taint["key"], "operator": "Equal", "value": taint["value"]}
            if chance(rng, 0.5):
                toleration["effect"] = taint["effect"]
            tolerations.append(toleration)
    if chance(rng, 0.05):
        tolerations.append({"operator": "Exists"})
    if tolerations:
        spec["tolerations"] = tolerations
    if chance(rng, 0.3):
        constraints = []
        for _ in range(int(rng.integers(1, 3))):
            constraint: dict[str, Any] = {
                "maxSkew": int(rng.integers(1, 3)),
                "topologyKey": pick(rng, KEYS),
                "whenUnsatisfiable": pick(
                    rng, ["DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"]
                ),
                "labelSelector": selector(rng),
            }
            if chance(rng, 0.3):
                constraint["minDomains"] = int(rng.integers(1, 5))
                constraint["whenUnsatisfiable"] = "DoNotSchedule"
            if chance(rng, 0.3):
                constraint["nodeAffinityPolicy"] = pick(rng, ["Honor", "Ignore"])
            if chance(rng, 0.3):
                constraint["nodeTaintsPolicy"] = pick(rng, ["Honor", "Ignore"])
            constraints.append(constraint)
        spec["topologySpreadConstraints"] = constraints
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "pending",
            "namespace": pick(rng, list(NAMESPACES)),
            "labels": labels(rng),
            "uid": "uid-pending",
        },
        "spec": spec,
    }


def fits_roughly(node: dict[str, Any], placed: list[dict[str, Any]], pod: dict[str, Any]) -> bool:
    """A bound pod only where a scheduler could have put it (its requests within the node's)."""
    allocatable = node["status"]["allocatable"]
    ours = [p for p in placed if p["spec"]["nodeName"] == node["metadata"]["name"]]
    if len(ours) + 1 > int(allocatable["pods"]):
        return False
    bare = {**node, "spec": {}}  # taints and cordons came later, or the pods tolerate them
    snapshot = build_snapshot([bare], ours)
    request = pod_from_k8s(
        {**pod, "spec": {k: v for k, v in pod["spec"].items() if k != "nodeName"}}
    )
    result = filter_nodes(snapshot, request.model_copy(update={"constraints": None}))
    return bool(result.feasible.all())


def case(seed: int) -> FilterCase:
    rng = np.random.default_rng(seed)
    nodes = [node(rng, i) for i in range(int(rng.integers(1, 8)))]
    names = [n["metadata"]["name"] for n in nodes]
    placed: list[dict[str, Any]] = []
    for index in range(int(rng.integers(0, 16))):
        target = pick(rng, nodes)
        candidate = bound_pod(rng, index, target["metadata"]["name"])
        if fits_roughly(target, placed, candidate):
            placed.append(candidate)
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": tags}}
        for name, tags in NAMESPACES.items()
    ]
    return FilterCase(
        pod=pending_pod(rng, names), nodes=nodes, pods=placed, namespaces=namespaces, id=seed
    )


def voltpack_verdict(found: FilterCase) -> tuple[list[str], str]:
    snapshot = build_snapshot(found.nodes, found.pods, namespace_labels=NAMESPACES)
    result = filter_nodes(snapshot, pod_from_k8s(found.pod))
    feasible = sorted(snapshot.node_names[i] for i in np.flatnonzero(result.feasible))
    message = "" if feasible else availability_message(snapshot.node_count, result.rejected_by)
    return feasible, message


def test_voltpack_allows_exactly_the_nodes_kube_scheduler_allows(oracle: SchedulerOracle) -> None:
    disagreements = []
    messages = []
    unschedulable = 0
    for seed in range(CASES):
        found = case(seed)
        answer = oracle.feasible(found)
        assert not answer.scheduling_error, (seed, answer.scheduling_error)
        feasible, message = voltpack_verdict(found)
        if feasible != answer.feasible:
            disagreements.append((seed, feasible, answer.feasible, answer.reasons))
        elif not feasible:
            unschedulable += 1
            if message != answer.message:
                messages.append((seed, message, answer.message))
    assert not disagreements, (
        f"{len(disagreements)} of {CASES} cases differ, e.g. {disagreements[:3]}"
    )
    # the random cases cover both outcomes in earnest
    assert CASES // 10 < unschedulable < CASES - CASES // 10, unschedulable
    assert not messages, f"{len(messages)} messages differ, e.g. {messages[:3]}"
