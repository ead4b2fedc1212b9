"""kube-scheduler's filters in voltpack's core, on Kubernetes objects translated as the operator
translates them: the six-node cluster of issue 44 (one node cordoned, one tainted NoSchedule,
one tainted NoExecute, zone labels on the others) and the pods kube-scheduler v1.34 placed
right there. The real kube-scheduler's verdicts are checked on the same objects by
`tests/integration/test_scheduler_oracle.py`."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from tests.unit.builders import scheduler_for
from voltpack.model.errors import InvalidRequestError
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.operator.kube.translate import pod_from_k8s
from voltpack.operator.scheduling.cluster_view import GATED_MESSAGE, build_snapshot, pending_work
from voltpack.operator.scheduling.volumes import UNBOUND_IMMEDIATE, VolumeView
from voltpack.policies.preference_weights import PreferenceWeights
from voltpack.scheduler.filter import explain_rejection, filter_nodes

CPUS = "64"


def node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    taints: list[Any] | None = None,
    cordoned: bool = False,
    **extra: str,
) -> dict[str, Any]:
    allocatable = {"cpu": CPUS, "memory": "256Gi", "pods": "110", **extra}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"unschedulable": cordoned, "taints": taints or []},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def six_nodes() -> list[dict[str, Any]]:
    return [
        node("cordoned", labels={"zone": "a"}, cordoned=True),
        node(
            "reserved",
            labels={"zone": "a"},
            taints=[{"key": "gpu", "value": "reserved", "effect": "NoSchedule"}],
        ),
        node(
            "draining",
            labels={"zone": "b"},
            taints=[{"key": "maintenance", "value": "true", "effect": "NoExecute"}],
        ),
        node("a1", labels={"zone": "a", "rack": "3"}),
        node("b1", labels={"zone": "b", "rack": "7"}),
        node("b2", labels={"zone": "b", "rack": "12"}),
    ]


def pod(
    name: str,
    *,
    cpu: str = "1",
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "labels": labels or {},
            "creationTimestamp": "2026-12-01T00:00:00Z",
        },
        "spec": {
            "schedulerName": "voltpack",
            "containers": [{"name": "main", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
            **spec,
        },
    }
    if node_name:
        body["spec"]["nodeName"] = node_name
    return body


def feasible(
    nodes: list[dict[str, Any]], bound: list[dict[str, Any]], new: dict[str, Any]
) -> list[str]:
    snapshot = build_snapshot(nodes, bound)
    result = filter_nodes(snapshot, pod_from_k8s(new))
    return [snapshot.node_names[i] for i in np.flatnonzero(result.feasible)]


def message(nodes: list[dict[str, Any]], bound: list[dict[str, Any]], new: dict[str, Any]) -> str:
    snapshot = build_snapshot(nodes, bound)
    request = pod_from_k8s(new)
    return explain_rejection(snapshot, request, filter_nodes(snapshot, request))


SCHEDULABLE = ["a1", "b1", "b2"]


def hostname_affinity(*names: str) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "In",
                                "values": list(names),
                            }
                        ]
                    }
                ]
            }
        }
    }


def test_a_plain_pod_avoids_the_cordoned_and_the_tainted_nodes() -> None:
    assert feasible(six_nodes(), [], pod("p")) == SCHEDULABLE


def test_a_node_selector_no_node_matches_is_unschedulable_with_kube_schedulers_message() -> None:
    new = pod("p", nodeSelector={"zone": "c"})
    assert feasible(six_nodes(), [], new) == []
    assert message(six_nodes(), [], new).startswith(
        "0/6 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated "
        "taint(s), 3 node(s) didn't match Pod's node affinity/selector."
    )


def test_affinity_to_the_cordoned_or_an_untolerated_node_only_is_unschedulable() -> None:
    assert feasible(six_nodes(), [], pod("p", affinity=hostname_affinity("cordoned"))) == []
    assert feasible(six_nodes(), [], pod("p", affinity=hostname_affinity("reserved"))) == []
    tolerant = pod(
        "p",
        affinity=hostname_affinity("reserved"),
        tolerations=[
            {"key": "gpu", "operator": "Equal", "value": "reserved", "effect": "NoSchedule"}
        ],
    )
    assert feasible(six_nodes(), [], tolerant) == ["reserved"]


def test_tolerations_equal_exists_and_the_empty_key() -> None:
    exists = pod("p", tolerations=[{"key": "maintenance", "operator": "Exists"}])
    assert feasible(six_nodes(), [], exists) == ["a1", "b1", "b2", "draining"]
    wrong_value = pod("p", tolerations=[{"key": "gpu", "value": "other", "effect": "NoSchedule"}])
    assert feasible(six_nodes(), [], wrong_value) == SCHEDULABLE
    everything = pod("p", tolerations=[{"operator": "Exists"}])
    # tolerating every taint tolerates the cordon's taint too
    assert feasible(six_nodes(), [], everything) == sorted(
        n["metadata"]["name"] for n in six_nodes()
    )
    no_execute_only = pod("p", tolerations=[{"operator": "Exists", "effect": "NoExecute"}])
    assert feasible(six_nodes(), [], no_execute_only) == ["a1", "b1", "b2", "draining"]


def test_gt_lt_not_in_and_match_fields() -> None:
    def affinity(*expressions: dict[str, Any], fields: list[Any] | None = None) -> dict[str, Any]:
        term: dict[str, Any] = {"matchExpressions": list(expressions)}
        if fields:
            term["matchFields"] = fields
        return {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }

    gt = pod("p", affinity=affinity({"key": "rack", "operator": "Gt", "values": ["5"]}))
    assert feasible(six_nodes(), [], gt) == ["b1", "b2"]  # 7 and 12: compared as integers
    lt = pod("p", affinity=affinity({"key": "rack", "operator": "Lt", "values": ["7"]}))
    assert feasible(six_nodes(), [], lt) == ["a1"]
    not_in = pod("p", affinity=affinity({"key": "zone", "operator": "NotIn", "values": ["a"]}))
    assert feasible(six_nodes(), [], not_in) == ["b1", "b2"]
    fields = pod(
        "p",
        affinity=affinity(fields=[{"key": "metadata.name", "operator": "In", "values": ["b2"]}]),
    )
    assert feasible(six_nodes(), [], fields) == ["b2"]
    assert "1 node(s) didn't satisfy" not in message(six_nodes(), [], fields)


def test_an_init_container_larger_than_any_node_is_unschedulable() -> None:
    new = pod(
        "p",
        initContainers=[{"name": "setup", "image": "x", "resources": {"requests": {"cpu": "70"}}}],
    )
    assert pod_from_k8s(new).cpu_milli == 70_000
    assert feasible(six_nodes(), [], new) == []
    assert "3 Insufficient cpu" in message(six_nodes(), [], new)


def test_effective_requests_count_sidecars_pod_level_resources_and_overhead() -> None:
    sidecar = {
        "name": "proxy",
        "image": "x",
        "restartPolicy": "Always",
        "resources": {"requests": {"cpu": "2"}},
    }
    init = {"name": "setup", "image": "x", "resources": {"requests": {"cpu": "4"}}}
    new = pod("p", cpu="1", initContainers=[sidecar, init], overhead={"cpu": "250m"})
    # containers 1 + sidecar 2 = 3; the init container runs beside the sidecar: 4 + 2 = 6
    assert pod_from_k8s(new).cpu_milli == 6_250
    pod_level = pod("p", cpu="1", resources={"requests": {"cpu": "10", "memory": "1Gi"}})
    translated = pod_from_k8s(pod_level)
    assert (translated.cpu_milli, dict(translated.resources)["memory"]) == (10_000, 2**30)


def test_an_extended_resource_no_node_has_is_unschedulable() -> None:
    new = pod("p")
    new["spec"]["containers"][0]["resources"]["requests"]["example.com/fpga"] = "1"
    assert feasible(six_nodes(), [], new) == []
    assert "3 Insufficient example.com/fpga" in message(six_nodes(), [], new)
    nodes = six_nodes()
    nodes[4] = node("b1", labels={"zone": "b"}, **{"example.com/fpga": "1"})
    assert feasible(nodes, [], new) == ["b1"]
    assert (
        feasible(
            nodes,
            [
                {**copy.deepcopy(new), "metadata": {"name": "q", "namespace": "team"}}
                | {"spec": {**new["spec"], "nodeName": "b1"}}
            ],
            new,
        )
        == []
    )


def test_the_pod_count_a_node_allows() -> None:
    nodes = [node("tiny", pods="1"), node("roomy")]
    assert feasible(nodes, [pod("x", node_name="tiny")], pod("p")) == ["roomy"]


def test_two_pods_with_one_host_port_go_to_different_nodes() -> None:
    ports = [{"name": "main", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    first = pod("first", node_name="a1", containers=ports)
    assert feasible(six_nodes(), [first], pod("second", containers=ports)) == ["b1", "b2"]
    udp = [
        {
            "name": "main",
            "image": "x",
            "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}],
        }
    ]
    assert feasible(six_nodes(), [first], pod("udp", containers=udp)) == SCHEDULABLE
    other_ip = [
        {
            "name": "main",
            "image": "x",
            "ports": [{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}],
        }
    ]
    # the first binds 0.0.0.0: every IP of the node conflicts
    assert feasible(six_nodes(), [first], pod("ip", containers=other_ip)) == ["b1", "b2"]


def anti_affinity(key: str, labels: dict[str, str], required: bool = True) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_required_anti_affinity_both_ways() -> None:
    spec = {"affinity": anti_affinity("kubernetes.io/hostname", {"app": "db"})}
    first = pod("first", node_name="a1", labels={"app": "db"}, **spec)
    assert feasible(six_nodes(), [first], pod("second", labels={"app": "db"}, **spec)) == [
        "b1",
        "b2",
    ]
    # the placed pod's own anti-affinity keeps a matching pod away, whatever that pod says
    assert feasible(six_nodes(), [first], pod("plain", labels={"app": "db"})) == ["b1", "b2"]
    assert feasible(six_nodes(), [first], pod("other", labels={"app": "web"})) == SCHEDULABLE
    zonal = {"affinity": anti_affinity("zone", {"app": "db"})}
    assert feasible(six_nodes(), [first], pod("z", labels={"app": "db"}, **zonal)) == ["b1", "b2"]
    crowded = [first, pod("b", node_name="b1", labels={"app": "db"})]
    assert (
        message(six_nodes(), crowded, pod("z", labels={"app": "db"}, **zonal)).startswith(
            "0/6 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match pod "
            "anti-affinity rules, 2 node(s) had untolerated taint(s), 1 node(s) didn't satisfy "
        )
        is False
    )


def test_required_pod_affinity_and_the_first_pod_of_a_group() -> None:
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}
            ]
        }
    }
    lone = pod("lone", labels={"app": "cache"}, affinity=affinity)
    assert feasible(six_nodes(), [], lone) == SCHEDULABLE  # matches itself: the group starts
    stranger = pod("stranger", labels={"app": "web"}, affinity=affinity)
    assert feasible(six_nodes(), [], stranger) == []
    cache = pod("cache", node_name="b2", labels={"app": "cache"})
    assert feasible(six_nodes(), [cache], stranger) == ["b1", "b2"]


def test_namespaces_of_an_affinity_term() -> None:
    affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    elsewhere = pod("db", node_name="a1", labels={"app": "db"})
    elsewhere["metadata"]["namespace"] = "other"
    # a term without namespaces counts the pod's own namespace only
    assert feasible(six_nodes(), [elsewhere], pod("p", affinity=affinity)) == SCHEDULABLE
    every = copy.deepcopy(affinity)
    every["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
        "namespaceSelector"
    ] = {}
    assert feasible(six_nodes(), [elsewhere], pod("p", affinity=every)) == ["b1", "b2"]


def spread(max_skew: int, key: str = "zone", **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": max_skew,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
            **extra,
        }
    ]


def test_topology_spread_do_not_schedule() -> None:
    web = {"app": "web"}
    placed = [
        pod("w1", node_name="a1", labels=web),
        pod("w2", node_name="b1", labels=web),
        pod("w3", node_name="b2", labels=web),
    ]
    # zone a holds 1 (a1; the cordoned and tainted a-nodes count as domain members), zone b 2
    new = pod("w4", labels=web, topologySpreadConstraints=spread(1))
    assert feasible(six_nodes(), placed, new) == ["a1"]
    assert "2 node(s) didn't match pod topology spread constraints," in message(
        six_nodes(), placed, new
    )
    unlabelled = [*six_nodes(), node("nozone")]
    assert "nozone" not in feasible(unlabelled, placed, new)
    assert "1 node(s) didn't match pod topology spread constraints (missing required label)" in (
        message(unlabelled, placed, new)
    )
    # minDomains above the number of domains (2) makes the global minimum 0: 1 + 1 > 1 in a
    strict = pod("w4", labels=web, topologySpreadConstraints=spread(1, minDomains=3))
    assert feasible(six_nodes(), placed, strict) == []
    assert feasible(six_nodes(), [], strict) == SCHEDULABLE


def test_scheduling_gates_hold_a_pod_and_its_whole_gang() -> None:
    gated = pod("g", schedulingGates=[{"name": "example.com/quota"}])
    work = pending_work([gated])
    assert work.groups == []
    assert work.held["team/g"].startswith(GATED_MESSAGE)
    assert work.gated == {"team/g"}
    members = [pod(f"m{i}") for i in range(3)]
    for member in members:
        member["metadata"]["annotations"] = {"voltpack.io/pod-group": "job"}
    members[1]["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    work = pending_work(members)
    assert work.groups == []
    assert "waiting for 1 member(s) with scheduling gates" in work.held["team/m0"]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (
            {"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]},
            ["spec.tolerations[0]", "Exists takes no value"],
        ),
        (
            {"tolerations": [{"key": "a", "operator": "Sometimes"}]},
            ["spec.tolerations[0]", "operator"],
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "rack", "operator": "Gt", "values": ["seven"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            ["nodeSelectorTerms[0].matchExpressions[0]", "needs one integer value"],
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "rack", "operator": "Near", "values": ["1"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            ["matchExpressions[0]", "operator"],
        ),
        (
            {
                "topologySpreadConstraints": [
                    {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            ["spec.topologySpreadConstraints[0]", "max_skew"],
        ),
    ],
)
def test_bad_constraints_are_named_and_hold_only_that_pod(
    spec: dict[str, Any], words: list[str]
) -> None:
    bad = pod("bad", **spec)
    with pytest.raises(InvalidRequestError) as caught:
        pod_from_k8s(bad)
    for word in words:
        assert word in str(caught.value)
    assert "team/bad" in str(caught.value)
    work = pending_work([bad, pod("good")])
    assert [g.name for g in work.groups] == ["team/good"]
    assert "team/bad" in work.held


def test_a_malformed_taint_keeps_every_pod_off_that_node() -> None:
    nodes = [node("odd", taints=[{"key": "x", "effect": "Sometimes"}]), node("fine")]
    assert feasible(nodes, [], pod("p")) == ["fine"]


def test_a_gang_placed_pod_by_pod_sees_its_own_members() -> None:
    spec = {"affinity": anti_affinity("kubernetes.io/hostname", {"app": "db"})}
    members = [pod(f"m{i}", labels={"app": "db"}, **spec) for i in range(4)]
    for member in members:
        member["metadata"]["annotations"] = {"voltpack.io/pod-group": "db"}
    snapshot: ClusterSnapshot = build_snapshot(six_nodes(), [])
    [group] = pending_work(members).groups
    decision = scheduler_for("best-fit", snapshot).schedule_group(
        snapshot, group, np.random.default_rng(0)
    )
    # three schedulable nodes and one pod per node: the gang of four cannot be placed whole
    assert not decision.placed
    assert "didn't match pod anti-affinity rules" in decision.reason
    three = pending_work(members[:3]).groups[0]
    decision = scheduler_for("best-fit", snapshot).schedule_group(
        snapshot, three, np.random.default_rng(0)
    )
    assert decision.placed
    assert sorted(p.node for p in decision.placements) == SCHEDULABLE


def place_one(
    nodes: list[dict[str, Any]],
    bound: list[dict[str, Any]],
    new: dict[str, Any],
    weights: PreferenceWeights | None = None,
) -> str:
    snapshot = build_snapshot(nodes, bound)
    scheduler = scheduler_for("best-fit", snapshot)
    if weights is not None:
        scheduler.preferences = weights
    decision = scheduler.schedule_pod(snapshot, pod_from_k8s(new), np.random.default_rng(0))
    assert decision.placed, decision.reason
    return decision.placements[0].node


def test_soft_constraints_score_beside_packing_and_can_be_weighted_off() -> None:
    plain = [node(n, labels={"zone": z}) for n, z in (("x", "a"), ("y", "b"), ("z", "b"))]
    prefers_b = pod(
        "p",
        affinity={
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]
                        },
                    }
                ]
            }
        },
    )
    # best-fit packs onto the fullest node: x holds a pod, so packing alone picks x
    busy_x = [pod("filler", cpu="30", node_name="x")]
    assert place_one(plain, busy_x, pod("q")) == "x"
    assert place_one(plain, busy_x, prefers_b) in ("y", "z")
    off = PreferenceWeights(node_affinity=0)
    assert place_one(plain, busy_x, prefers_b, off) == "x"
    soft_taint = [
        *plain[:2],
        node(
            "z",
            labels={"zone": "b"},
            taints=[{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}],
        ),
    ]
    busy_z = [pod("filler", cpu="30", node_name="z")]
    assert place_one(soft_taint, busy_z, pod("q")) != "z"
    tolerant = pod("q", tolerations=[{"key": "spot", "operator": "Exists"}])
    assert place_one(soft_taint, busy_z, tolerant) == "z"
    anyway = pod(
        "w",
        labels={"app": "web"},
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ],
    )
    webs = [
        pod("w1", cpu="30", node_name="y", labels={"app": "web"}),
        pod("w2", node_name="z", labels={"app": "web"}),
    ]
    assert place_one(plain, webs, anyway) == "x"  # zone a has none; packing would pick y
    near = pod(
        "n",
        affinity={
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": "cache"}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        },
    )
    cache = [pod("c", node_name="z", labels={"app": "cache"}), *busy_x]
    assert place_one(plain, cache, near) == "z"


def preferred_pod_terms(kind: str, labels: dict[str, str], weight: int = 100) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": "zone"}
    return {
        kind: {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": weight, "podAffinityTerm": term}
            ]
        }
    }


def test_placed_pods_preferred_terms_score_an_incoming_pod_they_select() -> None:
    """InterPodAffinity's score both ways: a placed pod's preferred (anti-)affinity toward pods
    like the incoming one moves it toward (away from) the placed pod's zone, though the
    incoming pod itself prefers nothing."""
    plain = [node(n, labels={"zone": z}) for n, z in (("x", "a"), ("y", "b"), ("z", "b"))]
    busy_x = pod("filler", cpu="30", node_name="x")  # best-fit alone picks x
    web = pod("web", labels={"app": "web"})
    assert place_one(plain, [busy_x], web) == "x"
    likes_web = pod(
        "c", node_name="z", labels={"app": "cache"},
        affinity=preferred_pod_terms("podAffinity", {"app": "web"}),
    )  # fmt: skip
    assert place_one(plain, [busy_x, likes_web], web) in ("y", "z")
    assert place_one(plain, [busy_x, likes_web], pod("other", labels={"app": "db"})) == "x"
    off = PreferenceWeights(inter_pod_affinity=0)
    assert place_one(plain, [busy_x, likes_web], web, off) == "x"
    shuns_web = pod(
        "s", node_name="x", labels={"app": "batch"},
        affinity=preferred_pod_terms("podAntiAffinity", {"app": "web"}),
    )  # fmt: skip
    busy_y = pod("filler", cpu="30", node_name="y")
    assert place_one(plain, [busy_y], web) == "y"
    assert place_one(plain, [pod("filler", cpu="40", node_name="x"), shuns_web], web) != "x"


def claim(name: str, volume: str | None = None, storage_class: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"volumeName": volume, "storageClassName": storage_class},
    }


def local_volume(name: str, node_name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [node_name],
                                }
                            ]
                        }
                    ]
                }
            }
        },
    }


def test_a_bound_local_volume_pins_the_pod_to_its_node_and_unbound_claims_wait() -> None:
    uses = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
    view = VolumeView([claim("data", "pv-b2")], [local_volume("pv-b2", "b2")], [])
    [group] = pending_work([pod("p", **uses)], volumes_request=view.request).groups
    snapshot = build_snapshot(six_nodes(), [])
    result = filter_nodes(snapshot, group.pods[0])
    assert [snapshot.node_names[i] for i in np.flatnonzero(result.feasible)] == ["b2"]
    assert result.rejected_by["node(s) didn't match PersistentVolume's node affinity"] == 2
    cases = {
        "missing": (VolumeView([], [], []), 'persistentvolumeclaim "data" not found'),
        "immediate": (VolumeView([claim("data")], [], []), UNBOUND_IMMEDIATE),
        "late": (
            VolumeView(
                [claim("data", storage_class="local")],
                [],
                [{"metadata": {"name": "local"}, "volumeBindingMode": "WaitForFirstConsumer"}],
            ),
            "waits for its first consumer",
        ),
    }
    for name, (view, words) in cases.items():
        work = pending_work([pod("p", **uses)], volumes_request=view.request)
        assert work.groups == [], name
        assert words in work.held["team/p"], name


def test_a_namespace_selector_reads_the_namespaces_labels() -> None:
    affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "kubernetes.io/hostname",
                    "namespaceSelector": {"matchLabels": {"tier": "prod"}},
                }
            ]
        }
    }
    db = pod("db", node_name="a1", labels={"app": "db"})
    db["metadata"]["namespace"] = "payments"
    snapshot = build_snapshot(six_nodes(), [db], namespace_labels={"payments": {"tier": "prod"}})
    result = filter_nodes(snapshot, pod_from_k8s(pod("p", affinity=affinity)))
    assert [snapshot.node_names[i] for i in np.flatnonzero(result.feasible)] == ["b1", "b2"]
    snapshot = build_snapshot(six_nodes(), [db], namespace_labels={"payments": {"tier": "dev"}})
    result = filter_nodes(snapshot, pod_from_k8s(pod("p", affinity=affinity)))
    assert [snapshot.node_names[i] for i in np.flatnonzero(result.feasible)] == SCHEDULABLE
