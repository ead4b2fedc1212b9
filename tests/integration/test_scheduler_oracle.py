"""kube-scheduler's own Filter plugins as an oracle (tools/scheduler-oracle, `make oracle`).

The cases run on six nodes: one cordoned, one tainted `gpu=reserved:NoSchedule`, one tainted
NoExecute, and three with `zone` labels a/a/b, each with 64 CPUs and room for 110 pods. Every
expectation below is what kube-scheduler v1.34.4's plugins say (their reason strings, and
FitError.Error()'s "0/N nodes are available: ..." with the counts sorted as strings); the same
cases then run on a real kube-scheduler (`make k8s`) and its PodScheduled condition must say what
the oracle says, and every pod it binds must land on a node the oracle allows.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client

from tests.integration.services import missing_service, started_control_plane
from tests.k8s_control_plane import ControlPlane
from tests.scheduler_oracle import (
    FilterCase,
    OracleAnswer,
    SchedulerOracle,
    missing_oracle,
    oracle_path,
)

ZONE = "zone"
GPU_COUNT = "example.com/gpu-count"
HOSTNAME = "kubernetes.io/hostname"


def node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    unschedulable: bool = False,
    taints: tuple[dict[str, str], ...] = (),
) -> dict[str, Any]:
    """A node as the API serialises it: 64 CPUs, 256 GiB, 110 pods (allocatable = capacity)."""
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = list(taints)
    capacity = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME: name, **(labels or {})}},
        "spec": spec,
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


NODES = [
    node("cordoned", unschedulable=True),
    node("reserved", taints=({"key": "gpu", "value": "reserved", "effect": "NoSchedule"},)),
    node("draining", taints=({"key": "example.com/maintenance", "effect": "NoExecute"},)),
    node("zone-a-1", labels={ZONE: "a", GPU_COUNT: "8"}),
    node("zone-a-2", labels={ZONE: "a", GPU_COUNT: "4"}),
    node("zone-b-1", labels={ZONE: "b", GPU_COUNT: "2"}),
]
ZONE_NODES = ["zone-a-1", "zone-a-2", "zone-b-1"]

UNSCHEDULABLE = ["node(s) were unschedulable"]
UNTOLERATED = ["node(s) had untolerated taint(s)"]
NODE_AFFINITY = ["node(s) didn't match Pod's node affinity/selector"]
PORTS = ["node(s) didn't have free ports for the requested pod ports"]
ANTI_AFFINITY = ["node(s) didn't match pod anti-affinity rules"]
EXISTING_ANTI_AFFINITY = ["node(s) didn't satisfy existing pods anti-affinity rules"]
SPREAD = ["node(s) didn't match pod topology spread constraints"]
SPREAD_NO_LABEL = ["node(s) didn't match pod topology spread constraints (missing required label)"]
SPECIAL = {"cordoned": UNSCHEDULABLE, "reserved": UNTOLERATED, "draining": UNTOLERATED}
"""What a pod without tolerations gets on the three nodes that are not for it."""


def pod(
    name: str,
    *,
    cpu: str = "1",
    labels: dict[str, str] | None = None,
    node_name: str | None = None,
    container: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    main = {
        "name": "main",
        "image": "registry.example/app:1",
        "resources": {"requests": {"cpu": cpu}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {
            "containers": [{**main, **(container or {})}],
            **({"nodeName": node_name} if node_name else {}),
            **spec,
        },
    }


def hostname_anti_affinity(labels: dict[str, str]) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": HOSTNAME}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def required_node_affinity(**term: Any) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


SPREAD_CONSTRAINT = {
    "maxSkew": 1,
    "topologyKey": ZONE,
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "spread"}},
}
IMMEDIATE_CLASS = {
    # volumeBindingMode left out: kube-apiserver defaults it to Immediate, so does the oracle
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "immediate"},
    "provisioner": "example.com/no-such-provisioner",
}


def claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "immediate",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def volume_for(claim_name: str) -> dict[str, Any]:
    return {"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}


CSI_DRIVER = "csi.example.com"


def csi_volume(name: str) -> dict[str, Any]:
    """A CSI PersistentVolume bound to the claim of the same name (static provisioning)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "claimRef": {"namespace": "default", "name": name},
            "csi": {"driver": CSI_DRIVER, "volumeHandle": f"handle-{name}"},
        },
    }


def bound_claim(name: str) -> dict[str, Any]:
    """A claim the PV controller has bound (VolumeBinding wants its bind-completed mark)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "volumeName": name,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


CSI_NODE_ONE_VOLUME = {
    # zone-a-1's kubelet reports that the driver attaches at most one volume there
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSINode",
    "metadata": {"name": "zone-a-1"},
    "spec": {"drivers": [{"name": CSI_DRIVER, "nodeID": "zone-a-1", "allocatable": {"count": 1}}]},
}


@dataclass(frozen=True)
class Case:
    id: str
    pod: dict[str, Any]
    feasible: list[str]
    reasons: dict[str, list[str]]
    """Every infeasible node and the reasons its failing plugin gives."""
    message: str = ""
    """FitError.Error() without preemption ("" when some node is feasible)."""
    pods: list[dict[str, Any]] = field(default_factory=list)
    pvcs: list[dict[str, Any]] = field(default_factory=list)
    pvs: list[dict[str, Any]] = field(default_factory=list)
    csi_nodes: list[dict[str, Any]] = field(default_factory=list)
    gated: bool = False
    plugins: dict[str, str] | None = None
    """The rejecting plugin of some nodes, when the case is about which plugin it is."""

    def filter_case(self) -> FilterCase:
        return FilterCase(
            pod=self.pod,
            nodes=NODES,
            pods=self.pods,
            pvcs=self.pvcs,
            pvs=self.pvs,
            storage_classes=[IMMEDIATE_CLASS],
            csi_nodes=self.csi_nodes,
            id=self.id,
        )


CASES = [
    Case(
        "node-selector-zone-c",
        pod("wants-zone-c", nodeSelector={ZONE: "c"}),
        feasible=[],
        reasons={**SPECIAL, **{n: NODE_AFFINITY for n in ZONE_NODES}},
        message="0/6 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated "
        "taint(s), 3 node(s) didn't match Pod's node affinity/selector.",
    ),
    Case(
        # matchFields metadata.name: NodeAffinity's PreFilter narrows the nodes to the one named
        "affinity-field-names-only-the-cordoned-node",
        pod(
            "wants-cordoned",
            affinity=required_node_affinity(
                matchFields=[{"key": "metadata.name", "operator": "In", "values": ["cordoned"]}]
            ),
        ),
        feasible=[],
        reasons={
            "cordoned": UNSCHEDULABLE,
            **{
                n: ["node(s) didn't satisfy plugin(s) [NodeAffinity]"]
                for n in ["reserved", "draining", *ZONE_NODES]
            },
        },
        message="0/6 nodes are available: 1 node(s) were unschedulable, 5 node(s) didn't satisfy "
        "plugin(s) [NodeAffinity].",
        plugins={"cordoned": "NodeUnschedulable", "zone-a-1": "NodeAffinity"},
    ),
    Case(
        # the same node by its hostname label: no PreFilter narrowing, every node filtered
        "affinity-label-names-only-the-cordoned-node",
        pod(
            "wants-cordoned-by-label",
            affinity=required_node_affinity(
                matchExpressions=[{"key": HOSTNAME, "operator": "In", "values": ["cordoned"]}]
            ),
        ),
        feasible=[],
        reasons={**SPECIAL, **{n: NODE_AFFINITY for n in ZONE_NODES}},
        message="0/6 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated "
        "taint(s), 3 node(s) didn't match Pod's node affinity/selector.",
    ),
    Case(
        "scheduling-gates",
        pod("gated", schedulingGates=[{"name": "example.com/quota"}]),
        feasible=ZONE_NODES,
        reasons=SPECIAL,
        gated=True,
    ),
    Case(
        # an init container's request counts when it is the largest: 70 CPUs on 64-CPU nodes
        "init-container-asks-70-cpus",
        pod(
            "big-init",
            initContainers=[
                {
                    "name": "warmup",
                    "image": "registry.example/warmup:1",
                    "resources": {"requests": {"cpu": "70"}},
                }
            ],
        ),
        feasible=[],
        reasons={**SPECIAL, **{n: ["Insufficient cpu"] for n in ZONE_NODES}},
        message="0/6 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated "
        "taint(s), 3 Insufficient cpu.",
    ),
    Case(
        # an extended resource in limits only: the API server copies it to requests
        "extended-resource-nobody-has",
        pod("fpga", container={"resources": {"limits": {"example.com/fpga": "1"}}}),
        feasible=[],
        reasons={**SPECIAL, **{n: ["Insufficient example.com/fpga"] for n in ZONE_NODES}},
        message="0/6 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated "
        "taint(s), 3 Insufficient example.com/fpga.",
    ),
    Case(
        "same-host-port",
        pod("port-2", container={"ports": [{"containerPort": 80, "hostPort": 8080}]}),
        pods=[
            pod(
                "port-1",
                node_name="zone-a-1",
                container={"ports": [{"containerPort": 80, "hostPort": 8080}]},
            )
        ],
        feasible=["zone-a-2", "zone-b-1"],
        reasons={**SPECIAL, "zone-a-1": PORTS},
        plugins={"zone-a-1": "NodePorts"},
    ),
    Case(
        "required-anti-affinity-on-hostname",
        pod("web-2", labels={"app": "web"}, affinity=hostname_anti_affinity({"app": "web"})),
        pods=[
            pod("web-0", labels={"app": "web"}, node_name="zone-a-1"),
            pod("web-1", labels={"app": "web"}, node_name="zone-b-1"),
        ],
        feasible=["zone-a-2"],
        reasons={**SPECIAL, "zone-a-1": ANTI_AFFINITY, "zone-b-1": ANTI_AFFINITY},
        plugins={"zone-a-1": "InterPodAffinity"},
    ),
    Case(
        # the anti-affinity of a pod already there keeps the new pod away
        "existing-pods-anti-affinity",
        pod("web", labels={"app": "web"}),
        pods=[
            pod(
                "loner",
                labels={"app": "loner"},
                node_name="zone-a-2",
                affinity=hostname_anti_affinity({"app": "web"}),
            )
        ],
        feasible=["zone-a-1", "zone-b-1"],
        reasons={**SPECIAL, "zone-a-2": EXISTING_ANTI_AFFINITY},
    ),
    Case(
        "node-affinity-gt-and-not-in",
        pod(
            "many-gpus-not-b",
            affinity=required_node_affinity(
                matchExpressions=[
                    {"key": GPU_COUNT, "operator": "Gt", "values": ["4"]},
                    {"key": ZONE, "operator": "NotIn", "values": ["b"]},
                ]
            ),
        ),
        feasible=["zone-a-1"],
        reasons={**SPECIAL, "zone-a-2": NODE_AFFINITY, "zone-b-1": NODE_AFFINITY},
    ),
    Case(
        "toleration-equal",
        pod(
            "tolerates-reserved",
            tolerations=[
                {"key": "gpu", "operator": "Equal", "value": "reserved", "effect": "NoSchedule"}
            ],
        ),
        feasible=["reserved", *ZONE_NODES],
        reasons={"cordoned": UNSCHEDULABLE, "draining": UNTOLERATED},
    ),
    Case(
        # Exists without an effect tolerates the key's every effect, NoExecute included
        "toleration-exists",
        pod(
            "tolerates-maintenance",
            tolerations=[{"key": "example.com/maintenance", "operator": "Exists"}],
        ),
        feasible=["draining", *ZONE_NODES],
        reasons={"cordoned": UNSCHEDULABLE, "reserved": UNTOLERATED},
    ),
    Case(
        # an empty key with Exists tolerates every taint, node.kubernetes.io/unschedulable too:
        # NodeUnschedulable lets such a pod (a DaemonSet's, say) onto a cordoned node
        "toleration-empty-key-exists",
        pod("tolerates-everything", tolerations=[{"operator": "Exists"}]),
        feasible=["cordoned", "draining", "reserved", *ZONE_NODES],
        reasons={},
    ),
    Case(
        # zone a has one matching pod, zone b none: a second in zone a makes the skew 2 > 1
        "topology-spread-do-not-schedule",
        pod("spread-1", labels={"app": "spread"}, topologySpreadConstraints=[SPREAD_CONSTRAINT]),
        pods=[pod("spread-0", labels={"app": "spread"}, node_name="zone-a-1")],
        feasible=["zone-b-1"],
        reasons={**SPECIAL, "zone-a-1": SPREAD, "zone-a-2": SPREAD},
        plugins={"zone-a-1": "PodTopologySpread"},
    ),
    Case(
        # tolerating everything, the nodes without a zone label fail on the spread itself
        "topology-spread-missing-label",
        pod(
            "spread-2",
            labels={"app": "spread"},
            topologySpreadConstraints=[SPREAD_CONSTRAINT],
            tolerations=[{"operator": "Exists"}],
        ),
        pods=[pod("spread-0", labels={"app": "spread"}, node_name="zone-a-1")],
        feasible=["zone-b-1"],
        reasons={
            **{n: SPREAD_NO_LABEL for n in ["cordoned", "reserved", "draining"]},
            "zone-a-1": SPREAD,
            "zone-a-2": SPREAD,
        },
    ),
    Case(
        # VolumeBinding's PreFilter rejects the pod outright: every node gets its reason once
        "unbound-immediate-pvc",
        pod("needs-volume", volumes=[volume_for("data")]),
        pvcs=[claim("data")],
        feasible=[],
        reasons={
            n["metadata"]["name"]: ["pod has unbound immediate PersistentVolumeClaims"]
            for n in NODES
        },
        message="0/6 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
        plugins={"zone-a-1": "VolumeBinding"},
    ),
    Case(
        # zone-a-1 attaches one volume of the driver and a pod there uses it already
        "csi-attach-limit",
        pod("second-volume", volumes=[volume_for("vol-2")]),
        pods=[pod("first-volume", node_name="zone-a-1", volumes=[volume_for("vol-1")])],
        pvs=[csi_volume("vol-1"), csi_volume("vol-2")],
        pvcs=[bound_claim("vol-1"), bound_claim("vol-2")],
        csi_nodes=[CSI_NODE_ONE_VOLUME],
        feasible=["zone-a-2", "zone-b-1"],
        reasons={**SPECIAL, "zone-a-1": ["node(s) exceed max volume count"]},
        plugins={"zone-a-1": "NodeVolumeLimits"},
    ),
]


@pytest.fixture(scope="module")
def oracle() -> Iterator[SchedulerOracle]:
    missing = missing_oracle()
    if missing:
        missing_service(
            "scheduler-oracle", f"{', '.join(missing)} not built at {oracle_path()} (make oracle)"
        )
    with SchedulerOracle() as running:
        yield running


def test_the_default_profile_runs_these_plugins_in_this_order(oracle: SchedulerOracle) -> None:
    """kube-scheduler's default profile, DynamicResources left out."""
    answer = oracle.request({"mode": "plugins"})
    assert answer["kubernetesVersion"] == "v1.34.4"
    assert answer["filter"] == [
        "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
        "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding",
        "VolumeZone", "PodTopologySpread", "InterPodAffinity",
    ]  # fmt: skip
    assert answer["preFilter"] == [
        "NodeAffinity", "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits",
        "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity",
    ]  # fmt: skip
    assert answer["preEnqueue"] == ["SchedulingGates", "DefaultPreemption"]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_filter_case(oracle: SchedulerOracle, case: Case) -> None:
    answer = oracle.feasible(case.filter_case())
    assert answer.id == case.id
    assert answer.feasible == sorted(case.feasible)
    assert answer.reasons == case.reasons
    assert answer.message == case.message
    assert answer.gated is case.gated
    assert not answer.scheduling_error
    for node_name, plugin in (case.plugins or {}).items():
        assert answer.plugins[node_name] == plugin


def test_gated_message_names_the_gates(oracle: SchedulerOracle) -> None:
    gated = next(case for case in CASES if case.gated)
    answer = oracle.feasible(gated.filter_case())
    assert answer.gated_message == "waiting for scheduling gates: [example.com/quota]"


def test_a_missing_claim_is_a_prefilter_rejection(oracle: SchedulerOracle) -> None:
    answer = oracle.feasible(
        FilterCase(pod=pod("ghost", volumes=[volume_for("ghost")]), nodes=NODES)
    )
    assert answer.feasible == []
    assert answer.message == '0/6 nodes are available: persistentvolumeclaim "ghost" not found.'
    assert set(answer.reasons) == {n["metadata"]["name"] for n in NODES}


def test_finished_and_unbound_pods_take_no_room(oracle: SchedulerOracle) -> None:
    """As kube-scheduler's cache: only pods with spec.nodeName that are not Succeeded/Failed."""
    finished = pod("done", cpu="60", node_name="zone-a-1")
    finished["status"] = {"phase": "Succeeded"}
    running = pod("busy", cpu="60", node_name="zone-a-2")
    running["status"] = {"phase": "Running"}
    pending = pod("pending", cpu="60")
    answer = oracle.feasible(
        FilterCase(pod=pod("new", cpu="8"), nodes=NODES, pods=[finished, running, pending])
    )
    assert answer.feasible == ["zone-a-1", "zone-b-1"]
    assert answer.reasons["zone-a-2"] == ["Insufficient cpu"]


def test_no_nodes(oracle: SchedulerOracle) -> None:
    answer = oracle.feasible(FilterCase(pod=pod("alone"), nodes=[]))
    assert answer.feasible == [] and answer.reasons == {}
    assert answer.message == "no nodes available to schedule pods"


def test_a_malformed_line_gets_an_error_and_the_next_line_an_answer(
    oracle: SchedulerOracle,
) -> None:
    assert oracle.send_line('{"id": 7, "nodes": [') == {
        "id": None,
        "error": "unexpected end of JSON input",
    }
    # a field the API does not have is refused (as kubectl --validate=strict), id kept
    typo = {"id": "typo", "nodes": NODES, "pod": pod("p", nodeSelecter={ZONE: "a"})}
    answer = oracle.request(typo)
    assert answer["id"] == "typo"
    assert 'unknown field "pod.spec.nodeSelecter"' in answer["error"]
    assert oracle.send_line("") == {"id": None, "error": "unexpected end of JSON input"}
    assert "error" in oracle.request({"id": "no-pod", "nodes": NODES})
    assert "error" in oracle.request({"id": "mode", "mode": "score", "nodes": NODES})
    after = oracle.feasible(FilterCase(pod=pod("after"), nodes=NODES, id="after"))
    assert after.id == "after" and after.feasible == ZONE_NODES


def bound(name: str, node_name: str, cpu: str) -> dict[str, Any]:
    return pod(name, cpu=cpu, node_name=node_name)


def test_replay_finds_the_one_deliberate_violation(oracle: SchedulerOracle) -> None:
    answer = oracle.replay(
        nodes=NODES,
        pods=[bound("before", "zone-a-1", "4")],
        bindings=[
            bound("p1", "zone-a-1", "30"),
            bound("p2", "zone-a-2", "30"),
            bound("p3", "zone-a-1", "30"),  # all 64 CPUs of zone-a-1 requested: still fits
            bound("p4", "zone-a-1", "1"),  # the violation, seen only if before, p1 and p3 count
            bound("p5", "zone-a-2", "30"),
        ],
    )
    assert answer.checked == 5
    assert [(v.index, v.pod, v.node, v.plugin, v.reasons) for v in answer.violations] == [
        (3, "default/p4", "zone-a-1", "NodeResourcesFit", ["Insufficient cpu"])
    ]


def test_replay_reports_each_filter_that_refuses(oracle: SchedulerOracle) -> None:
    answer = oracle.replay(
        nodes=NODES,
        bindings=[
            bound("on-cordoned", "cordoned", "1"),
            bound("on-reserved", "reserved", "1"),
            bound("nowhere", "no-such-node", "1"),
            pod(
                "gated",
                node_name="zone-a-1",
                schedulingGates=[{"name": "example.com/quota"}],
            ),
            pod(
                "by-name",
                node_name="zone-b-1",
                affinity=required_node_affinity(
                    matchFields=[{"key": "metadata.name", "operator": "In", "values": ["zone-a-1"]}]
                ),
            ),
        ],
    )
    assert [(v.plugin, v.reasons) for v in answer.violations] == [
        ("NodeUnschedulable", UNSCHEDULABLE),
        ("TaintToleration", UNTOLERATED),
        ("", ['node "no-such-node" is not in the request\'s nodes']),
        ("SchedulingGates", ["waiting for scheduling gates: [example.com/quota]"]),
        ("NodeAffinity", ["node(s) didn't satisfy plugin(s) [NodeAffinity]"]),
    ]


def gpu_node(index: int) -> dict[str, Any]:
    name = f"gpu-{index:05d}"
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "metadata": {
            "name": name,
            "labels": {
                HOSTNAME: name,
                ZONE: f"z{index % 10}",
                "example.com/rack": f"r{index // 40}",
            },
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def gpu_pod(index: int, node_name: str) -> dict[str, Any]:
    resources = {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"nvidia.com/gpu": "4"}}
    manifest = pod(f"worker-{index:05d}", node_name=node_name, container={"resources": resources})
    manifest["metadata"]["labels"] = {"job": f"job-{index // 8}"}
    return manifest


def test_replay_of_10000_bindings_on_5000_nodes(oracle: SchedulerOracle) -> None:
    """Two 4-GPU workers per 8-GPU node fill every node; one more on a full node is the
    violation. The snapshot is updated incrementally: seconds, not minutes."""
    nodes = [gpu_node(i) for i in range(5000)]
    bindings = [gpu_pod(i, nodes[i // 2]["metadata"]["name"]) for i in range(10000)]
    bindings.append(gpu_pod(10000, "gpu-00042"))
    started = time.monotonic()
    answer = oracle.replay(nodes=nodes, bindings=bindings)
    elapsed = time.monotonic() - started
    assert answer.checked == 10001
    assert [(v.index, v.node, v.reasons) for v in answer.violations] == [
        (10000, "gpu-00042", ["Insufficient nvidia.com/gpu"])
    ]
    assert elapsed < 60, (
        f"replay took {elapsed:.1f} s (the oracle's own part {answer.seconds:.1f} s)"
    )


# --- the same cases on a real kube-scheduler -------------------------------------------------


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    yield from started_control_plane(controllers=True)


@pytest.fixture(scope="module")
def core(plane: ControlPlane) -> Iterator[client.CoreV1Api]:
    with plane.api_client() as api:
        core_api = client.CoreV1Api(api)
        for manifest in NODES:
            core_api.create_node(manifest)
        client.StorageV1Api(api).create_storage_class(IMMEDIATE_CLASS)
        _wait_until_the_scheduler_sees_every_node(core_api)
        yield core_api


def _pod_outcome(core_api: client.CoreV1Api, namespace: str, name: str) -> tuple[str, str]:
    """("bound", node) or (the PodScheduled condition's reason, its message)."""
    live = core_api.read_namespaced_pod(name, namespace)
    if live.spec.node_name:
        return "bound", live.spec.node_name
    for condition in live.status.conditions or []:
        if condition.type == "PodScheduled" and condition.status == "False":
            return condition.reason or "", condition.message or ""
    return "", ""


def _wait_outcome(core_api: client.CoreV1Api, namespace: str, name: str) -> tuple[str, str]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        outcome = _pod_outcome(core_api, namespace, name)
        if outcome[0]:
            return outcome
        time.sleep(0.05)
    raise AssertionError(f"kube-scheduler did not decide on {namespace}/{name} in 30 s")


def _force_delete_all(core_api: client.CoreV1Api, namespace: str) -> None:
    pods = core_api.list_namespaced_pod(namespace).items
    for live in pods:
        core_api.delete_namespaced_pod(live.metadata.name, namespace, grace_period_seconds=0)
    deadline = time.monotonic() + 30
    while core_api.list_namespaced_pod(namespace).items:
        assert time.monotonic() < deadline, f"pods of {namespace} not deleted"
        time.sleep(0.05)


def _wait_until_the_scheduler_sees_every_node(core_api: client.CoreV1Api) -> None:
    """A probe pod pinned to each node (by a field affinity, tolerating everything): all bound
    means kube-scheduler's cache holds all six nodes."""
    core_api.create_namespace({"metadata": {"name": "probes"}})
    for manifest in NODES:
        name = manifest["metadata"]["name"]
        probe = pod(
            f"probe-{name}",
            cpu="0",
            tolerations=[{"operator": "Exists"}],
            affinity=required_node_affinity(
                matchFields=[{"key": "metadata.name", "operator": "In", "values": [name]}]
            ),
        )
        probe["metadata"]["namespace"] = "probes"
        core_api.create_namespaced_pod("probes", probe)
    for manifest in NODES:
        name = manifest["metadata"]["name"]
        assert _wait_outcome(core_api, "probes", f"probe-{name}") == ("bound", name)
    _force_delete_all(core_api, "probes")


def _in_namespace(manifest: dict[str, Any], namespace: str) -> dict[str, Any]:
    moved = copy.deepcopy(manifest)
    moved["metadata"]["namespace"] = namespace
    return moved


def _without_post_filter(real: str, filter_message: str) -> str:
    """kube-scheduler's condition message is FitError.Error(): the filter part, then a space
    and what the PostFilter plugins said (DynamicResources' "no new claims to deallocate",
    DefaultPreemption's "preemption: 0/6 nodes are available: ..."); the filter part is
    returned when `real` starts with `filter_message` that way."""
    if real.startswith(filter_message + " "):
        return filter_message
    return real


def _case_in_namespace(case: Case, namespace: str) -> FilterCase:
    """The case's request with its pods and claims (and the PVs' claim references) moved to
    `namespace`."""
    pvs = copy.deepcopy(case.pvs)
    for pv in pvs:
        pv["spec"]["claimRef"]["namespace"] = namespace
    return FilterCase(
        pod=_in_namespace(case.pod, namespace),
        nodes=NODES,
        pods=[_in_namespace(p, namespace) for p in case.pods],
        pvcs=[_in_namespace(c, namespace) for c in case.pvcs],
        pvs=pvs,
        storage_classes=[IMMEDIATE_CLASS],
        csi_nodes=case.csi_nodes,
        namespaces=[{"metadata": {"name": namespace}}],
    )


def _kept_off(manifest: dict[str, Any], nodes: list[str]) -> dict[str, Any]:
    """A copy of the pod (ungated) whose required node affinity also says hostname NotIn
    `nodes` (an expression, not a field: NodeAffinity's PreFilter does not narrow on it)."""
    kept = copy.deepcopy(manifest)
    kept["metadata"]["name"] += "-x"
    kept["spec"].pop("schedulingGates", None)
    kept["spec"].pop("nodeName", None)
    not_in = {"key": HOSTNAME, "operator": "NotIn", "values": nodes}
    node_affinity = kept["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault(
        "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": [{}]}
    )
    for term in required["nodeSelectorTerms"]:
        term.setdefault("matchExpressions", []).append(not_in)
    return kept


def _decides_as_the_oracle(
    core_api: client.CoreV1Api, request: FilterCase, answer: OracleAnswer
) -> str | None:
    """Creates the request's pod; kube-scheduler must bind it to a node the oracle allows, or,
    when the oracle allows none, say what the oracle says. Returns the node it bound to."""
    namespace, name = request.pod["metadata"]["namespace"], request.pod["metadata"]["name"]
    core_api.create_namespaced_pod(namespace, request.pod)
    outcome, detail = _wait_outcome(core_api, namespace, name)
    if answer.gated:
        assert outcome == "SchedulingGated"
        return None
    if answer.feasible:
        assert outcome == "bound", f"kube-scheduler: {outcome} {detail}; oracle: {answer}"
        assert detail in answer.feasible
        return detail
    assert outcome == "Unschedulable", f"kube-scheduler: {outcome} {detail}; oracle: {answer}"
    assert _without_post_filter(detail, answer.message) == answer.message
    return None


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_a_real_kube_scheduler_agrees(
    oracle: SchedulerOracle, core: client.CoreV1Api, case: Case
) -> None:
    """The case on kube-scheduler; then, while the oracle allows some node, the same pod again
    kept off every node allowed so far (with the ones before it bound), until the oracle allows
    none and kube-scheduler's message must count every node's reason as the oracle's does."""
    namespace = f"case-{case.id}"[:63]
    request = _case_in_namespace(case, namespace)
    answer: OracleAnswer = oracle.feasible(request)
    assert answer.feasible == sorted(case.feasible)  # the namespace changes nothing
    storage = client.StorageV1Api(core.api_client)
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        for csi_node in request.csi_nodes:
            storage.create_csi_node(csi_node)
        for pv in request.pvs:
            core.create_persistent_volume(pv)
        for claim_manifest in request.pvcs:
            core.create_namespaced_persistent_volume_claim(namespace, claim_manifest)
        for existing in request.pods:
            core.create_namespaced_pod(namespace, existing)
        allowed: list[str] = []
        for _ in range(4):
            bound_to = _decides_as_the_oracle(core, request, answer)
            if not answer.feasible:
                break
            if bound_to is not None:
                placed = {**request.pod, "spec": {**request.pod["spec"], "nodeName": bound_to}}
                request.pods = [*request.pods, placed]
            allowed += answer.feasible
            request.pod = _kept_off(request.pod, sorted(set(allowed)))
            answer = oracle.feasible(request)
        assert not answer.feasible, "still allowed somewhere after four rounds"
    finally:
        _force_delete_all(core, namespace)
        for pv in request.pvs:
            core.delete_persistent_volume(pv["metadata"]["name"])
        for csi_node in request.csi_nodes:
            storage.delete_csi_node(csi_node["metadata"]["name"])
