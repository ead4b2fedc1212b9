"""The conformance corpus: requests voltpack, its tests and kubectl send, as data.

Each `Step` is one HTTP request (method, path, query, body, content type, Accept). Steps run in
order against a fresh backend; `{step:dotted.path}` in a path, query or body is replaced by that
earlier answer's value (`{cm-create:metadata.resourceVersion}`). `known` lists the divergences
from a real kube-apiserver that are documented (each a path pattern of the normalised answer,
see `replay.view`, and why it does not matter); any other divergence fails the test.
`source` says who sends the request (a voltpack module, a test, kubectl).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "helm" / "voltpack" / "crds"
NS = "conformance"
JSON = "application/json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
ADMIN_USER = "voltpack-admin"


@dataclass(frozen=True)
class Known:
    """A documented divergence: paths matching `pattern` (fnmatch) may differ, because `why`."""

    pattern: str
    why: str


@dataclass(frozen=True)
class Step:
    """One request of the corpus and how to compare its answers."""

    name: str
    method: str
    path: str
    body: Any = None
    query: tuple[tuple[str, str], ...] = ()
    content_type: str = JSON
    accept: str = JSON
    source: str = ""
    known: tuple[Known, ...] = ()
    watch_events: int = 0
    """For a watch: read this many events (or until `watch_wait_s` passes without one)."""
    watch_wait_s: float = 2.0
    wait_until: Callable[[Any], bool] | None = None
    """Repeat the request until this holds for the answer's body (asynchronous servers)."""
    pause_s: float = 0.0
    compare_only: tuple[str, ...] | None = None
    """Compare only the normalised paths matching these patterns (large documents)."""


def crd_manifests() -> list[dict[str, Any]]:
    return [yaml.safe_load(path.read_text()) for path in sorted(CRDS.glob("*.yaml"))]


def _established(body: Any) -> bool:
    conditions = ((body or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def pod(name: str, *, gpus: int = 1, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A worker pod as voltpack's GPUJob controller writes it (one container, GPU limits)."""
    resources: dict[str, Any] = {"requests": {"cpu": "500m", "memory": "1Gi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels or {"app": "train"}},
        "spec": {
            "schedulerName": "voltpack",
            "containers": [
                {"name": "main", "image": "registry.example/train:1.0", "resources": resources}
            ],
        },
    }


def binding(name: str, node: str, uid: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "annotations": {"voltpack.io/rank": "0"}}
    if uid is not None:
        metadata["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def configmap(name: str, labels: dict[str, str] | None = None, /, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": data,
    }


def gpujob(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "voltpack.io/v1alpha1",
        "kind": "GPUJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "queue": "research",
            "workers": 2,
            "template": {"spec": {"containers": [{"name": "trainer", "image": "trainer:1.0"}]}},
            **spec,
        },
    }


def lease(holder: str, rv: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "voltpack-leader", "namespace": NS}
    if rv is not None:
        metadata["resourceVersion"] = rv
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "acquireTime": "2026-01-01T00:00:00.000000Z",
            "renewTime": "2026-01-01T00:00:00.000000Z",
            "leaseTransitions": 0,
        },
    }


def rv(step: str) -> str:
    """The resourceVersion an earlier step's answer carries (a placeholder, see replay.fill)."""
    return f"{{{step}:metadata.resourceVersion}}"


def uid(step: str) -> str:
    return f"{{{step}:metadata.uid}}"


def cont(step: str) -> str:
    return f"{{{step}:metadata.continue}}"


P = f"/api/v1/namespaces/{NS}"
CR = f"/apis/voltpack.io/v1alpha1/namespaces/{NS}"


def setup_steps() -> list[Step]:
    steps = [
        Step("ns-create", "POST", "/api/v1/namespaces",
             {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
             source="operator.connect (namespace), tests"),
        Step("ns-get", "GET", f"/api/v1/namespaces/{NS}", source="kubectl get ns"),
        Step("ns-create-again", "POST", "/api/v1/namespaces",
             {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
             source="AlreadyExists"),
    ]  # fmt: skip
    for crd in crd_manifests():
        name = crd["metadata"]["name"]
        short = name.split(".")[0]
        steps.append(
            Step(f"crd-create-{short}", "POST",
                 "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd,
                 source="operator.crds, helm install (chart CRDs)")
        )  # fmt: skip
    for crd in crd_manifests():
        name = crd["metadata"]["name"]
        steps.append(
            Step(f"crd-established-{name.split('.')[0]}", "GET",
                 f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
                 wait_until=_established, source="kubectl wait --for=condition=Established")
        )  # fmt: skip
    return steps


CRD_ASYNC = Known(
    "body.status*",
    "a real apiserver answers the create before its controllers accept the names and set "
    "Established; the emulator establishes at once. Clients wait for Established either way "
    "(the crd-established-* steps compare the settled objects).",
)


def pod_steps() -> list[Step]:
    return [
        Step("node-create", "POST", "/api/v1/nodes",
             {"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": "gpu-node-0", "labels": {"nvidia.com/gpu.product": "A100"}},
              "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}},
             source="tests (KWOK nodes), emulator nodes"),
        Step("node-get", "GET", "/api/v1/nodes/gpu-node-0", source="kubectl get node"),
        Step("pod-create", "POST", f"{P}/pods", pod("worker-0"),
             source="operator.jobs (worker pods), tests"),
        Step("pod-get", "GET", f"{P}/pods/worker-0", source="kubectl get pod"),
        Step("pod-create-again", "POST", f"{P}/pods", pod("worker-0"), source="AlreadyExists"),
        Step("pod-get-missing", "GET", f"{P}/pods/nobody", source="NotFound"),
        Step("pod-create-invalid", "POST", f"{P}/pods",
             {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
              "spec": {"containers": []}}, source="Invalid (422)"),
        Step("pod-create-wrong-ns", "POST", f"{P}/pods",
             {**pod("worker-x"), "metadata": {"name": "worker-x", "namespace": "other"}},
             source="BadRequest: namespace mismatch"),
        Step("pod-create-no-ns", "POST", "/api/v1/namespaces/absent/pods", pod("worker-y") | {
             "metadata": {"name": "worker-y"}}, source="NotFound: namespace absent"),
        Step("pod-create-bad-json", "POST", f"{P}/pods", "{not json", source="BadRequest"),
        Step("pod-create-1", "POST", f"{P}/pods", pod("worker-1", labels={"app": "train",
             "voltpack.io/job": "j1"}), source="operator.jobs"),
        Step("pod-create-cpu", "POST", f"{P}/pods", pod("cpu-0", gpus=0, labels={"app": "web"}),
             source="tests"),
        Step("pod-patch-rank", "PATCH", f"{P}/pods/worker-0",
             {"metadata": {"labels": {"voltpack.io/rank": "0"}, "uid": uid("pod-create")}},
             content_type=STRATEGIC, source="operator.binder (rank label, uid precondition)"),
        Step("pod-patch-stale-uid", "PATCH", f"{P}/pods/worker-0",
             {"metadata": {"labels": {"x": "y"}, "uid": "00000000-0000-0000-0000-000000000000"}},
             content_type=STRATEGIC, source="operator.binder: pod re-created since the snapshot"),
        Step("pod-patch-merge", "PATCH", f"{P}/pods/worker-0",
             {"metadata": {"annotations": {"voltpack.io/note": "merged"}}}, content_type=MERGE,
             source="kubectl patch --type merge"),
        Step("pod-patch-json", "PATCH", f"{P}/pods/worker-0",
             [{"op": "add", "path": "/metadata/labels/patched", "value": "yes"}],
             content_type=JSON_PATCH, source="kubectl patch --type json"),
        Step("pod-patch-json-test-fails", "PATCH", f"{P}/pods/worker-0",
             [{"op": "test", "path": "/metadata/labels/patched", "value": "no"}],
             content_type=JSON_PATCH, source="JSON patch test op fails"),
        Step("pod-patch-strategic-finalizer", "PATCH", f"{P}/pods/worker-0",
             {"metadata": {"finalizers": ["voltpack.io/test"]}}, content_type=STRATEGIC,
             source="finalizers (strategic merge)"),
        Step("pod-patch-immutable", "PATCH", f"{P}/pods/worker-0",
             {"spec": {"schedulerName": "other"}}, content_type=STRATEGIC,
             source="Invalid: pod spec is immutable"),
        Step("pod-patch-unsupported-type", "PATCH", f"{P}/pods/worker-0",
             {"metadata": {"labels": {"a": "b"}}}, content_type=JSON,
             source="UnsupportedMediaType"),
        Step("pod-patch-missing", "PATCH", f"{P}/pods/nobody",
             {"metadata": {"labels": {"a": "b"}}}, content_type=MERGE, source="NotFound"),
        Step("pod-bind", "POST", f"{P}/pods/worker-0/binding",
             binding("worker-0", "gpu-node-0", uid("pod-create")),
             source="operator.binder (pods/binding with uid)"),
        Step("pod-bind-again", "POST", f"{P}/pods/worker-0/binding",
             binding("worker-0", "gpu-node-0"), source="Conflict: already bound"),
        Step("pod-bind-stale-uid", "POST", f"{P}/pods/worker-1/binding",
             binding("worker-1", "gpu-node-0", "00000000-0000-0000-0000-000000000000"),
             source="operator.binder: uid precondition fails"),
        Step("pod-bind-missing", "POST", f"{P}/pods/nobody/binding",
             binding("nobody", "gpu-node-0"), source="NotFound"),
        Step("pod-bind-collection", "POST", f"{P}/bindings", binding("worker-1", "gpu-node-0"),
             source="POST bindings (older schedulers)"),
        Step("pod-get-bound", "GET", f"{P}/pods/worker-0", source="operator cache"),
        Step("pod-status-patch", "PATCH", f"{P}/pods/worker-1/status",
             {"status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
                                         "reason": "PreemptionByScheduler"}]}},
             content_type=STRATEGIC, source="preemption condition (pods/status)"),
        Step("pods-list", "GET", f"{P}/pods", source="operator cache (list)"),
        Step("pods-list-all", "GET", "/api/v1/pods",
             source="operator cache list_pod_for_all_namespaces"),
        Step("pods-list-label", "GET", f"{P}/pods",
             query=(("labelSelector", "app=train,voltpack.io/rank"),), source="label selector"),
        Step("pods-list-label-set", "GET", "/api/v1/pods",
             query=(("labelSelector", "app in (web),!voltpack.io/job"),), source="set selector"),
        Step("pods-list-field", "GET", "/api/v1/pods",
             query=(("fieldSelector", "spec.nodeName=gpu-node-0"),), source="field selector"),
        Step("pods-list-field-unbound", "GET", "/api/v1/pods",
             query=(("fieldSelector", "spec.nodeName=,status.phase!=Failed"),),
             source="field selector: unbound pods"),
        Step("pods-list-field-bad", "GET", "/api/v1/pods",
             query=(("fieldSelector", "spec.image=x"),), source="BadRequest: unknown field label"),
        Step("pods-list-label-bad", "GET", "/api/v1/pods",
             query=(("labelSelector", "a b"),), source="BadRequest: bad label selector"),
        Step("pods-list-limit", "GET", f"{P}/pods", query=(("limit", "2"),),
             source="pagination (kubectl get --chunk-size, client lists)"),
        Step("pods-list-continue", "GET", f"{P}/pods",
             query=(("limit", "2"), ("continue", cont("pods-list-limit"))),
             source="pagination: next page"),
        Step("pods-list-bad-continue", "GET", f"{P}/pods",
             query=(("limit", "2"), ("continue", "garbage")), source="BadRequest: bad continue"),
        Step("pods-table", "GET", f"{P}/pods", accept=TABLE, source="kubectl get pods"),
        Step("pod-evict", "POST", f"{P}/pods/cpu-0/eviction",
             {"apiVersion": "policy/v1", "kind": "Eviction",
              "metadata": {"name": "cpu-0", "namespace": NS}}, source="kubectl drain, preemption"),
        Step("pod-get-evicted", "GET", f"{P}/pods/cpu-0", source="NotFound after eviction"),
        Step("pod-delete-stale-uid", "DELETE", f"{P}/pods/worker-1",
             {"apiVersion": "v1", "kind": "DeleteOptions",
              "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}},
             source="delete with preconditions (Conflict)"),
        Step("pod-delete-stale-rv", "DELETE", f"{P}/pods/worker-1",
             {"apiVersion": "v1", "kind": "DeleteOptions",
              "preconditions": {"resourceVersion": rv("pod-create-1")}},
             source="delete with stale resourceVersion precondition"),
        Step("pod-delete-bound", "DELETE", f"{P}/pods/worker-1",
             {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"},
             source="operator (gang rollback, preemption), kubectl delete"),
        Step("pod-delete-finalized", "DELETE", f"{P}/pods/worker-0",
             query=(("gracePeriodSeconds", "0"),), source="delete with a finalizer"),
        Step("pod-get-finalized", "GET", f"{P}/pods/worker-0", source="deleting pod"),
        Step("pod-remove-finalizer", "PATCH", f"{P}/pods/worker-0",
             [{"op": "remove", "path": "/metadata/finalizers"}], content_type=JSON_PATCH,
             source="finalizer removal"),
        Step("pod-get-gone", "GET", f"{P}/pods/worker-0", source="NotFound after finalizer"),
        Step("pod-delete-missing", "DELETE", f"{P}/pods/nobody", source="NotFound"),
        Step("pod-delete-dry-run", "DELETE", f"{P}/pods/worker-1", query=(("dryRun", "All"),),
             source="kubectl delete --dry-run=server"),
    ]  # fmt: skip


def config_steps() -> list[Step]:
    """ConfigMaps (policy reload, admin settings), Leases (leader election), dry run, apply."""
    team = {"team": "a"}
    return [
        Step("cm-create", "POST", f"{P}/configmaps", configmap("policy", **{"policy.yaml": "a"}),
             source="operator.admin_source, policy_reload"),
        Step("cm-get", "GET", f"{P}/configmaps/policy", source="operator.policy_reload"),
        Step("cm-replace", "PUT", f"{P}/configmaps/policy",
             {**configmap("policy", **{"policy.yaml": "b"}),
              "metadata": {"name": "policy", "resourceVersion": rv("cm-create")}},
             source="operator.admin_source (replace with resourceVersion)"),
        Step("cm-replace-stale", "PUT", f"{P}/configmaps/policy",
             {**configmap("policy", **{"policy.yaml": "c"}),
              "metadata": {"name": "policy", "resourceVersion": rv("cm-create")}},
             source="Conflict: stale resourceVersion"),
        Step("cm-replace-unconditional", "PUT", f"{P}/configmaps/policy",
             configmap("policy", **{"policy.yaml": "d"}), source="kubectl replace"),
        Step("cm-replace-missing", "PUT", f"{P}/configmaps/nothing",
             configmap("nothing", **{"k": "v"}), source="NotFound on replace"),
        Step("cm-replace-name-mismatch", "PUT", f"{P}/configmaps/policy",
             configmap("other", **{"k": "v"}), source="BadRequest: name mismatch"),
        Step("cm-create-invalid-name", "POST", f"{P}/configmaps", configmap("Bad_Name"),
             source="Invalid: DNS subdomain"),
        Step("cm-create-no-name", "POST", f"{P}/configmaps",
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, source="Invalid: no name"),
        Step("cm-create-generate", "POST", f"{P}/configmaps",
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}},
             source="generateName"),
        Step("cm-dry-run", "POST", f"{P}/configmaps", configmap("dry", **{"k": "v"}),
             query=(("dryRun", "All"),), source="kubectl create --dry-run=server"),
        Step("cm-dry-run-get", "GET", f"{P}/configmaps/dry", source="NotFound after a dry run"),
        Step("cm-dry-run-bad", "POST", f"{P}/configmaps", configmap("dry2"),
             query=(("dryRun", "Some"),), source="BadRequest: bad dryRun value"),
        Step("cm-a1", "POST", f"{P}/configmaps", configmap("a1", team, k="1"), source="tests"),
        Step("cm-a2", "POST", f"{P}/configmaps", configmap("a2", team, k="2"), source="tests"),
        Step("cm-a3", "POST", f"{P}/configmaps", configmap("a3", team, k="3"), source="tests"),
        Step("cm-list-limit", "GET", f"{P}/configmaps",
             query=(("labelSelector", "team=a"), ("limit", "2")), source="pagination"),
        Step("cm-list-next", "GET", f"{P}/configmaps",
             query=(("labelSelector", "team=a"), ("limit", "2"),
                    ("continue", cont("cm-list-limit"))),
             source="pagination: last page"),
        Step("cm-list-rv0", "GET", f"{P}/configmaps",
             query=(("resourceVersion", "0"), ("labelSelector", "team=a")),
             source="reflector list from the watch cache"),
        Step("cm-list-field-name", "GET", f"{P}/configmaps",
             query=(("fieldSelector", "metadata.name=a2"),), source="kubectl get cm a2 -w"),
        Step("cm-apply-create", "PATCH", f"{P}/configmaps/applied",
             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  k: v\n",
             query=(("fieldManager", "kubectl"), ("force", "true")), content_type=APPLY,
             source="kubectl apply --server-side"),
        Step("cm-apply-update", "PATCH", f"{P}/configmaps/applied",
             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  k: w\n",
             query=(("fieldManager", "kubectl"), ("force", "true")), content_type=APPLY,
             source="kubectl apply --server-side (change)"),
        Step("cm-apply-no-manager", "PATCH", f"{P}/configmaps/applied",
             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n",
             content_type=APPLY, source="BadRequest: apply needs a fieldManager"),
        Step("cm-delete-collection", "DELETE", f"{P}/configmaps",
             query=(("labelSelector", "team=a"),), source="kubectl delete cm -l team=a"),
        Step("cm-list-after", "GET", f"{P}/configmaps", query=(("labelSelector", "team=a"),),
             source="empty list"),
        Step("cm-delete", "DELETE", f"{P}/configmaps/policy", source="kubectl delete cm"),
        Step("secret-create", "POST", f"{P}/secrets",
             {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
              "stringData": {"token": "abc"}}, source="helm chart Secrets"),
        Step("lease-get-missing", "GET",
             f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/voltpack-leader",
             source="operator.leader (no lease yet)"),
        Step("lease-create", "POST", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
             lease("op-a"), source="operator.leader (acquire)"),
        Step("lease-renew", "PUT",
             f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/voltpack-leader",
             lease("op-a", rv("lease-create")),
             source="operator.leader (renew)"),
        Step("lease-steal-stale", "PUT",
             f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/voltpack-leader",
             lease("op-b", rv("lease-create")),
             source="operator.leader: a second replica with a stale lease (Conflict)"),
        Step("lease-create-again", "POST",
             f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases", lease("op-b"),
             source="operator.leader: both replicas create (AlreadyExists)"),
        Step("lease-invalid", "POST", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
             {**lease("op-c"), "metadata": {"name": "other"},
              "spec": {"leaseDurationSeconds": -1}}, source="Invalid lease"),
    ]  # fmt: skip


def event_steps() -> list[Step]:
    """Events voltpack records (operator.binder.record_event) and what kubectl describe reads."""
    core_event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "worker-1.", "namespace": NS},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "worker-1",
            "namespace": NS,
            "uid": uid("pod-create-1"),
        },
        "reason": "FailedScheduling",
        "message": "0/1 nodes are available",
        "type": "Warning",
        "source": {"component": "voltpack"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "eventTime": "2026-01-01T00:00:00.123456Z",
        "reportingComponent": "voltpack.io/voltpack",
        "reportingInstance": "op-a",
        "action": "Scheduling",
        "count": 1,
    }
    new_event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "worker-1.e2", "namespace": NS},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "voltpack.io/voltpack",
        "reportingInstance": "op-a",
        "action": "Binding",
        "reason": "Scheduled",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "worker-1", "namespace": NS},
        "note": "bound",
        "type": "Normal",
    }
    return [
        Step("event-create", "POST", f"{P}/events", core_event,
             source="operator.binder.record_event"),
        Step("event-create-no-reporting", "POST", f"{P}/events",
             {**core_event, "reportingInstance": "", "reportingComponent": ""},
             source="Invalid: eventTime without reporting fields"),
        Step("event-list-field", "GET", f"{P}/events",
             query=(("fieldSelector", "involvedObject.name=worker-1,involvedObject.kind=Pod"),),
             source="kubectl describe pod (events)"),
        Step("event-list-all", "GET", "/api/v1/events",
             query=(("fieldSelector", "reason=FailedScheduling"),),
             source="operator.admin_source list_event_for_all_namespaces"),
        Step("event-v1-create", "POST", f"/apis/events.k8s.io/v1/namespaces/{NS}/events",
             new_event, source="events.k8s.io recorders"),
        Step("event-v1-list", "GET", f"/apis/events.k8s.io/v1/namespaces/{NS}/events",
             source="kubectl events"),
        Step("event-core-list-after-v1", "GET", f"{P}/events",
             query=(("fieldSelector", "reason=Scheduled"),),
             source="core/v1 view of an events.k8s.io Event"),
    ]  # fmt: skip


GN = "/apis/voltpack.io/v1alpha1/gpunodes"


def custom_steps() -> list[Step]:
    """voltpack's custom resources as the operator, the agent's publisher and kubectl use them."""
    gpunode = {
        "apiVersion": "voltpack.io/v1alpha1",
        "kind": "GPUNode",
        "metadata": {"name": "gpu-node-0", "labels": {"voltpack.io/model": "A100"}},
        "spec": {"gpus": [{"index": 0, "powerLimitW": 300}]},
    }
    queue = {
        "apiVersion": "voltpack.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": "research"},
        "spec": {"quotas": [{"gpuModel": "*", "gpus": 8}]},
    }
    return [
        Step("gpujob-create", "POST", f"{CR}/gpujobs", gpujob("train-a"),
             source="kubectl apply, tests (GPUJob)"),
        Step("gpujob-get", "GET", f"{CR}/gpujobs/train-a", source="kubectl get gpujob"),
        Step("gpujob-create-again", "POST", f"{CR}/gpujobs", gpujob("train-a"),
             source="AlreadyExists"),
        Step("gpujob-cel-min-workers", "POST", f"{CR}/gpujobs", gpujob("bad-min", minWorkers=3),
             source="CEL rule: minWorkers <= workers"),
        Step("gpujob-cel-gpu-milli", "POST", f"{CR}/gpujobs",
             gpujob("bad-milli", gpuMilli=500, gpusPerWorker=2),
             source="CEL rule: gpuMilli needs gpusPerWorker 1"),
        Step("gpujob-schema-type", "POST", f"{CR}/gpujobs", gpujob("bad-type", workers="two"),
             source="Invalid: schema type"),
        Step("gpujob-schema-required", "POST", f"{CR}/gpujobs",
             {**gpujob("bad-req"), "spec": {"queue": "research"}},
             source="Invalid: required fields"),
        Step("gpujob-unknown-field", "POST", f"{CR}/gpujobs",
             {**gpujob("pruned"), "spec": {**gpujob("x")["spec"], "colour": "red"}},
             source="unknown fields pruned (warning)"),
        Step("gpujob-strict-unknown-field", "POST", f"{CR}/gpujobs",
             {**gpujob("strict"), "spec": {**gpujob("x")["spec"], "colour": "red"}},
             query=(("fieldValidation", "Strict"),), source="kubectl apply --validate=strict"),
        Step("gpujob-finalizer", "PATCH", f"{CR}/gpujobs/train-a",
             {"metadata": {"finalizers": ["voltpack.io/gpujob"]}}, content_type=MERGE,
             source="operator.jobs (finalizer)"),
        Step("gpujob-status", "PATCH", f"{CR}/gpujobs/train-a/status",
             {"status": {"phase": "Running", "conditions": [
                 {"type": "Admitted", "status": "True", "reason": "Fits",
                  "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
             content_type=MERGE, source="operator.jobs (status subresource)"),
        Step("gpujob-status-via-main", "PATCH", f"{CR}/gpujobs/train-a",
             {"status": {"phase": "Failed"}}, content_type=MERGE,
             source="status through the main resource is ignored"),
        Step("gpujob-spec-change", "PATCH", f"{CR}/gpujobs/train-a",
             {"spec": {"workers": 3}}, content_type=MERGE, source="generation bump"),
        Step("gpujob-strategic", "PATCH", f"{CR}/gpujobs/train-a",
             {"spec": {"workers": 4}}, content_type=STRATEGIC,
             source="UnsupportedMediaType: strategic merge on a custom resource"),
        Step("gpujob-replace-stale", "PUT", f"{CR}/gpujobs/train-a",
             {**gpujob("train-a"), "metadata": {"name": "train-a", "namespace": NS,
              "resourceVersion": rv("gpujob-create")}},
             source="Conflict: stale resourceVersion"),
        Step("gpujob-replace-no-rv", "PUT", f"{CR}/gpujobs/train-a", gpujob("train-a"),
             source="Invalid: custom resources need a resourceVersion on update"),
        Step("gpujobs-list-all", "GET", "/apis/voltpack.io/v1alpha1/gpujobs",
             source="operator.jobs (cluster-wide list)"),
        Step("gpujobs-table", "GET", f"{CR}/gpujobs", accept=TABLE, source="kubectl get gpujobs"),
        Step("gpujob-delete", "DELETE", f"{CR}/gpujobs/train-a", source="kubectl delete gpujob"),
        Step("gpujob-deleting", "GET", f"{CR}/gpujobs/train-a", source="deleting, finalizer held"),
        Step("gpujob-delete-precondition", "DELETE", f"{CR}/gpujobs/pruned",
             {"apiVersion": "v1", "kind": "DeleteOptions",
              "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}},
             source="Conflict: uid precondition on a custom resource"),
        Step("gpujob-unfinalize", "PATCH", f"{CR}/gpujobs/train-a",
             {"metadata": {"finalizers": None}}, content_type=MERGE,
             source="operator.jobs (finalizer removed)"),
        Step("gpujob-gone", "GET", f"{CR}/gpujobs/train-a", source="NotFound"),
        Step("gpunode-create", "POST", GN, gpunode, source="operator.gpunode_sync"),
        Step("gpunode-create-again", "POST", GN, gpunode, source="AlreadyExists"),
        Step("gpunode-namespaced-path", "GET",
             f"/apis/voltpack.io/v1alpha1/namespaces/{NS}/gpunodes/gpu-node-0",
             source="NotFound: cluster-scoped kind under a namespace"),
        Step("gpunode-spec", "PATCH", f"{GN}/gpu-node-0",
             {"spec": {"gpus": [{"index": 0, "powerLimitW": 250}]}}, content_type=MERGE,
             source="operator.power_loop (spec)"),
        Step("gpunode-status", "PATCH", f"{GN}/gpu-node-0/status",
             {"status": {"gpus": [{"index": 0, "powerW": 120.5}]}}, content_type=MERGE,
             source="operator.gpunode_sync, telemetry publisher (status)"),
        Step("gpunode-status-json-patch", "PATCH", f"{GN}/gpu-node-0/status",
             [{"op": "replace", "path": "/status/gpus/0/powerW", "value": 130}],
             content_type=JSON_PATCH, source="kubectl patch --subresource=status --type json"),
        Step("gpunode-bad-power", "PATCH", f"{GN}/gpu-node-0",
             {"spec": {"gpus": [{"index": 0, "powerLimitW": -5}]}}, content_type=MERGE,
             source="Invalid: exclusiveMinimum"),
        Step("gpunodes-list-label", "GET", GN, query=(("labelSelector", "voltpack.io/model=A100"),),
             source="operator caches"),
        Step("queue-create", "POST", "/apis/voltpack.io/v1alpha1/queues", queue,
             source="tests, kubectl apply (Queue)"),
        Step("queue-status", "PATCH", "/apis/voltpack.io/v1alpha1/queues/research/status",
             {"status": {"admittedGpus": 2}}, content_type=MERGE, source="operator.queues"),
        Step("topologies-list", "GET", "/apis/voltpack.io/v1alpha1/topologies",
             source="operator.topology_view (empty list)"),
        Step("powerbudgets-list", "GET", "/apis/voltpack.io/v1alpha1/powerbudgets",
             query=(("limit", "500"),), source="operator.power_loop (empty list)"),
        Step("unknown-kind", "GET", "/apis/voltpack.io/v1alpha1/widgets",
             source="NotFound: kind not served"),
        Step("unknown-group", "GET", "/apis/nothing.example/v1/things", source="NotFound"),
        Step("unknown-group-discovery", "GET", "/apis/nothing.example/v1",
             source="NotFound: discovery of a group nobody serves"),
    ]  # fmt: skip


def _keep(*patterns: str) -> tuple[str, ...]:
    return patterns


def discovery_steps() -> list[Step]:
    """What kubectl and the kubernetes client read before anything else."""
    groups = (
        "voltpack.io",
        "coordination.k8s.io",
        "events.k8s.io",
        "apiextensions.k8s.io",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "rbac.authorization.k8s.io",
    )
    core = (
        "pods",
        "nodes",
        "namespaces",
        "configmaps",
        "secrets",
        "events",
        "bindings",
        "serviceaccounts",
    )
    missing_subresources = (
        "pods/attach",
        "pods/exec",
        "pods/log",
        "pods/portforward",
        "pods/proxy",
        "pods/ephemeralcontainers",
        "pods/resize",
        "nodes/proxy",
        "namespaces/finalize",
    )
    return [
        Step("version", "GET", "/version", source="kubectl version, client checks",
             compare_only=("code", "body.major", "body.platform")),
        Step("api", "GET", "/api", source="kubectl discovery (legacy)", known=(
            Known("body.serverAddressByClientCIDRs[0].serverAddress",
                  "each server reports its own address and port"),)),
        Step("apis", "GET", "/apis", source="kubectl discovery", known=(
            Known("body.groups[*]", "the emulator serves only the API groups voltpack and its "
                  "tests use (apps, batch, networking, storage, policy's PodDisruptionBudgets ... "
                  "are not served): clients discover what is there and voltpack needs none of "
                  "the others"),)),
        Step("api-v1", "GET", "/api/v1", source="kubectl discovery (core resources)",
             compare_only=("code", "body.kind", "body.groupVersion",
                           *[f"body.resources[{r}]*" for r in core],
                           *[f"body.resources[{r}/*" for r in core]),
             known=tuple(Known(f"body.resources[{r}]",
                               "a kubelet's or controller's subresource the emulator does not "
                               "serve (no containers run: no logs, exec, attach, proxy); "
                               "voltpack never calls it") for r in missing_subresources)),
        Step("apis-voltpack", "GET", "/apis/voltpack.io", source="discovery of one group"),
        Step("apis-voltpack-v1alpha1", "GET", "/apis/voltpack.io/v1alpha1",
             source="kubectl discovery (voltpack kinds)"),
        Step("apis-coordination", "GET", "/apis/coordination.k8s.io/v1",
             source="discovery of Leases"),
        Step("apis-aggregated", "GET", "/apis", accept=AGGREGATED,
             source="kubectl aggregated discovery (v2)",
             compare_only=("code", "body.kind", "body.apiVersion",
                           *[f"body.items[{g}]*" for g in groups])),
        Step("api-aggregated", "GET", "/api", accept=AGGREGATED,
             source="kubectl aggregated discovery (legacy, v2)",
             compare_only=("code", "body.kind", "body.apiVersion",
                           *[f"body.items[0].versions[v1].resources[{r}]*" for r in core]),
             known=tuple(Known(f"body.items[0].versions[v1].resources[{r.split('/')[0]}]"
                               f".subresources[{r.split('/')[1]}]",
                               "a kubelet's or controller's subresource the emulator does not "
                               "serve (see api-v1)") for r in missing_subresources)),
        Step("openapi-v3", "GET", "/openapi/v3", source="kubectl apply/explain (OpenAPI v3)",
             compare_only=("code", "body.paths.api/v1*", "body.paths[apis/voltpack.io*",
                           "body.paths[apis/coordination.k8s.io*"),
             known=(Known("body.paths[apis/voltpack.io/v1alpha1]",
                          "the emulator's OpenAPI v3 lists built-in group versions only, without "
                          "schemas, so kubectl leaves custom resources to the server's own "
                          "validation (which the emulator does: schema, CEL rules, Strict)"),
                    Known("body.paths[apis/coordination.k8s.io]",
                          "per-group OpenAPI documents (no version) are not served; kubectl "
                          "reads the group-version ones"))),
        Step("healthz", "GET", "/healthz", accept="*/*", source="probes"),
        Step("readyz", "GET", "/readyz", accept="*/*", source="probes"),
        Step("unknown-core-resource", "GET", "/api/v1/foos", source="NotFound: unknown resource"),
        Step("unknown-subresource", "GET", f"{P}/pods/worker-1/foo",
             source="NotFound: unknown subresource"),
        Step("method-not-allowed", "PUT", f"{P}/configmaps", configmap("x"),
             source="MethodNotAllowed: PUT on a collection"),
        Step("post-on-name", "POST", f"{P}/configmaps/x", configmap("x"),
             source="MethodNotAllowed: POST on an object"),
        Step("not-acceptable", "GET", f"{P}/configmaps", accept="application/xml",
             source="NotAcceptable"),
    ]  # fmt: skip


def review_steps() -> list[Step]:
    """TokenReview and SubjectAccessReview, as voltpack's admin API sends them (api/auth.py)."""
    auth = "/apis/authentication.k8s.io/v1/tokenreviews"
    sar = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    access = {"verb": "list", "group": "voltpack.io", "resource": "gpujobs", "namespace": NS}
    return [
        Step("token-review-admin", "POST", auth,
             {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
              "spec": {"token": "{token}"}}, source="api.auth (TokenReview)"),
        Step("token-review-bad", "POST", auth,
             {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
              "spec": {"token": "not-a-token"}}, source="api.auth (rejected token)"),
        Step("token-review-empty", "POST", auth,
             {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}},
             source="Invalid: no token"),
        Step("sar-admin", "POST", sar,
             {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": ADMIN_USER, "groups": ["system:masters"],
                       "resourceAttributes": access}}, source="api.auth (SubjectAccessReview)"),
        Step("sar-nobody", "POST", sar,
             {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": "nobody", "groups": ["system:authenticated"],
                       "resourceAttributes": access}}, source="api.auth (denied)"),
        Step("sar-empty", "POST", sar,
             {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": "nobody"}}, source="Invalid: no attributes"),
        Step("self-sar", "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
             {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": access}}, source="kubectl auth can-i"),
        Step("self-review", "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
             {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
             source="kubectl auth whoami"),
    ]  # fmt: skip


def watch_steps() -> list[Step]:
    """Watches as the operator's caches (operator.cache) and kubectl get -w open them."""
    return [
        Step("watch-list-rv", "GET", f"{P}/configmaps", source="reflector: list, then watch"),
        Step("watch-cm-add", "POST", f"{P}/configmaps", configmap("w1", {"w": "1"}, k="1"),
             source="a change to watch"),
        Step("watch-cm-modify", "PATCH", f"{P}/configmaps/w1", {"data": {"k": "2"}},
             content_type=MERGE, source="a change to watch"),
        Step("watch-cm-delete", "DELETE", f"{P}/configmaps/w1", source="a change to watch"),
        Step("watch-from-rv", "GET", f"{P}/configmaps",
             query=(("watch", "true"), ("resourceVersion", rv("watch-list-rv")),
                    ("allowWatchBookmarks", "true"), ("timeoutSeconds", "5")),
             watch_events=3, source="operator.cache (watch from the list's resourceVersion)"),
        Step("watch-label", "GET", f"{P}/configmaps",
             query=(("watch", "true"), ("labelSelector", "w=1"),
                    ("resourceVersion", rv("watch-list-rv")),
                    ("timeoutSeconds", "5")), watch_events=3, source="watch with a selector"),
        Step("watch-path", "GET", f"/api/v1/watch/namespaces/{NS}/configmaps",
             query=(("resourceVersion", rv("watch-list-rv")),
                    ("timeoutSeconds", "5")), watch_events=3, source="legacy /watch/ path"),
        Step("watch-initial-events", "GET", f"{P}/secrets",
             query=(("watch", "true"), ("sendInitialEvents", "true"),
                    ("allowWatchBookmarks", "true"), ("resourceVersionMatch", "NotOlderThan"),
                    ("timeoutSeconds", "5")), watch_events=2,
             source="client-go WatchList (initial events, then a bookmark)"),
        Step("watch-initial-events-bad", "GET", f"{P}/secrets",
             query=(("watch", "true"), ("sendInitialEvents", "true"), ("timeoutSeconds", "5")),
             watch_events=1, source="Invalid: sendInitialEvents without resourceVersionMatch"),
        Step("watch-one-object", "GET", f"{P}/configmaps",
             query=(("watch", "true"), ("fieldSelector", "metadata.name=applied"),
                    ("resourceVersion", "0"), ("timeoutSeconds", "5")), watch_events=1,
             source="kubectl get cm applied -w (rv 0: current state first)"),
        Step("watch-too-old", "GET", f"{P}/configmaps",
             query=(("watch", "true"), ("resourceVersion", "1"), ("timeoutSeconds", "3")),
             watch_events=1, source="operator.cache after a long disconnect (expired: relist)"),
        Step("watch-bad-rv", "GET", f"{P}/configmaps",
             query=(("watch", "true"), ("resourceVersion", "abc"), ("timeoutSeconds", "5")),
             watch_events=1, source="BadRequest: resourceVersion not a number"),
        Step("watch-future-rv", "GET", f"{P}/configmaps",
             query=(("watch", "true"), ("resourceVersion", "99999999"), ("timeoutSeconds", "2")),
             watch_events=1, watch_wait_s=4,
             source="watch from a resourceVersion the server has not reached"),
    ]  # fmt: skip


def priority_steps() -> list[Step]:
    """PriorityClasses and the Priority admission plugin (a pod's priority is the class's;
    voltpack's pods carry theirs in an annotation because a literal one is refused)."""
    pcs = "/apis/scheduling.k8s.io/v1/priorityclasses"

    def priority_class(name: str, value: int, **extra: Any) -> dict[str, Any]:
        return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value, **extra}  # fmt: skip

    def classed(name: str, **spec: Any) -> dict[str, Any]:
        body = pod(name, gpus=0)
        body["spec"].update(spec)
        return body

    return [
        Step("pc-create", "POST", pcs, priority_class("train-high", 1000, description="train"),
             source="tests (PriorityClass of serving pods), user manifests"),
        Step("pc-get", "GET", f"{pcs}/train-high", source="kubectl get priorityclass"),
        Step("pc-create-too-high", "POST", pcs, priority_class("too-high", 2_000_000_000),
             source="Forbidden: above the highest user priority"),
        Step("pc-create-system-name", "POST", pcs, priority_class("system-mine", 10),
             source="Forbidden: system- prefix reserved"),
        Step("pc-create-bad-policy", "POST", pcs,
             priority_class("odd", 5, preemptionPolicy="Sometimes"), source="NotSupported"),
        Step("pc-update-value", "PUT", f"{pcs}/train-high",
             priority_class("train-high", 2000) | {"metadata": {
                 "name": "train-high", "resourceVersion": rv("pc-create")}},
             source="Invalid: value immutable"),
        # kube-apiserver's Priority admission reads the classes from an informer: a class is
        # seen a moment after its create (without the pause the real answers vary)
        Step("pod-create-class", "POST", f"{P}/pods",
             classed("classed-0", priorityClassName="train-high"), pause_s=2.0,
             source="inference pods (priorityClassName)"),
        Step("pod-create-system-class", "POST", f"{P}/pods",
             classed("critical-0", priorityClassName="system-node-critical"),
             source="the agent's DaemonSet (system-node-critical)"),
        Step("pod-create-literal-priority", "POST", f"{P}/pods", classed("literal-0", priority=5),
             source="Forbidden: literal spec.priority (found on the real apiserver)"),
        Step("pod-create-matching-priority", "POST", f"{P}/pods",
             classed("literal-1", priority=1000, priorityClassName="train-high"),
             source="a literal priority equal to the class's is accepted"),
        Step("pod-create-unknown-class", "POST", f"{P}/pods",
             classed("lost-0", priorityClassName="nope"), source="Forbidden: no such class"),
        Step("pod-create-never-policy", "POST", f"{P}/pods",
             classed("policy-0", priorityClassName="train-high", preemptionPolicy="Never"),
             source="Forbidden: preemptionPolicy other than the class's"),
        Step("pc-create-default", "POST", pcs,
             priority_class("everyone", 10, globalDefault=True, preemptionPolicy="Never"),
             source="a cluster's global default class"),
        Step("pc-create-second-default", "POST", pcs,
             priority_class("everyone-else", 20, globalDefault=True), pause_s=2.0,
             source="Forbidden: only one default"),
        Step("pod-create-defaulted", "POST", f"{P}/pods", classed("plain-0"),
             source="a pod without a class takes the global default"),
        Step("pc-delete-default", "DELETE", f"{pcs}/everyone", source="kubectl delete"),
        Step("pc-delete", "DELETE", f"{pcs}/train-high", source="kubectl delete"),
    ]  # fmt: skip


def teardown_steps() -> list[Step]:
    return [
        Step("ns-scratch", "POST", "/api/v1/namespaces",
             {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "scratch"}},
             source="tests"),
        Step("ns-delete", "DELETE", "/api/v1/namespaces/scratch",
             source="kubectl delete ns (Terminating)"),
        Step("ns-create-in-terminating", "POST", "/api/v1/namespaces/scratch/configmaps",
             configmap("late"), pause_s=0.3, source="Forbidden: namespace terminating"),
        Step("ns-delete-default", "DELETE", "/api/v1/namespaces/default",
             source="Forbidden: protected namespace"),
        Step("crd-delete", "DELETE",
             "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/topologies.voltpack.io",
             source="helm uninstall (CRD)"),
    ]  # fmt: skip


def owner_steps() -> list[Step]:
    """Owner references and deletion propagation (operator.jobs, operator.inference_pods)."""
    owned = pod("owned-0", gpus=0)
    owned["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "voltpack.io/v1alpha1",
            "kind": "GPUJob",
            "name": "owner",
            "uid": uid("owner-create"),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    placed = pod("placed-0", gpus=0)
    placed["spec"]["nodeName"] = "gpu-node-0"
    return [
        Step("owner-create", "POST", f"{CR}/gpujobs", gpujob("owner"), source="operator.jobs"),
        Step("owned-create", "POST", f"{P}/pods", owned,
             source="operator.jobs / inference_pods (worker pod owned by its GPUJob)"),
        Step("owner-delete-foreground", "DELETE", f"{CR}/gpujobs/owner",
             {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"},
             source="kubectl delete --cascade=foreground"),
        Step("owner-after-delete", "GET", f"{CR}/gpujobs/owner", pause_s=0.3,
             source="the owner after a foreground delete"),
        Step("owned-after-delete", "GET", f"{P}/pods/owned-0",
             source="the dependent after its owner's deletion"),
        Step("owned-cleanup", "DELETE", f"{P}/pods/owned-0", query=(("gracePeriodSeconds", "0"),),
             source="what the garbage collector would do (real only)"),
        Step("owner-cleanup", "PATCH", f"{CR}/gpujobs/owner", {"metadata": {"finalizers": None}},
             content_type=MERGE, source="what the garbage collector would do (real only)"),
        Step("pod-create-placed", "POST", f"{P}/pods", placed,
             source="tests (pods created with spec.nodeName, as DaemonSets)"),
        Step("pod-status-put", "PUT", f"{P}/pods/placed-0/status",
             {**placed, "metadata": {"name": "placed-0", "namespace": NS,
                                     "resourceVersion": rv("pod-create-placed")},
              "status": {"phase": "Running", "podIP": "10.244.0.9"}},
             source="kubelet-style status replace (KWOK)"),
        Step("node-status-patch", "PATCH", "/api/v1/nodes/gpu-node-0/status",
             {"status": {"capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                         "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}}},
             content_type=STRATEGIC, source="tests, KWOK (node capacity with GPUs)"),
        Step("leases-list", "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
             source="kubectl get leases"),
        Step("inference-create", "POST", f"{CR}/inferenceservices",
             {"apiVersion": "voltpack.io/v1alpha1", "kind": "InferenceService",
              "metadata": {"name": "chat", "namespace": NS},
              "spec": {"model": "llama2-7b", "slo": {"ttftMs": 500, "tpotMs": 100}}},
             source="tests, kubectl apply (InferenceService)"),
    ]  # fmt: skip


_REVIEW_FALSE = (
    "kube-apiserver omits a false `denied`/`authenticated` (Go omitempty) where the emulator "
    "writes false, and gives no reason for system:masters where the emulator names the group; "
    "clients read absent and false alike, and the emulator's own tests (test_emulator_auth.py) "
    "assert its form"
)
_NODE = (
    "a Node created through the API: kube-apiserver taints it not-ready and writes an empty "
    "nodeInfo until a kubelet reports; emulator nodes stand for registered, Ready nodes (its "
    "simulated kubelets), which is what voltpack schedules onto"
)
_NO_NAMESPACE_CONTROLLER = (
    "no kube-controller-manager runs beside the test apiserver, so a deleted namespace stays "
    "Terminating there (403 NamespaceTerminating on create); the emulator finishes an empty "
    "namespace's deletion at once, as a cluster with its namespace controller does soon after"
)
_NO_GC = (
    "kube-apiserver marks a foreground deletion (finalizer foregroundDeletion) and leaves "
    "dependents to the garbage collector of kube-controller-manager, which the test apiserver "
    "runs without: there the owner and its pods stay. The emulator garbage-collects itself, "
    "treating Foreground as Background: the owner goes at once and its pods with it, as in a "
    "cluster whose controllers run (voltpack relies on owner references only for clean-up)"
)
_STATUS_METADATA = (
    "a PUT of pods/status takes labels and annotations from the request on kube-apiserver; the "
    "emulator keeps the stored ones (its test_emulator_core asserts that form). voltpack writes "
    "pod status by patch (the DisruptionTarget condition), which keeps labels on both"
)
_EVENTS_APART = (
    "kube-apiserver stores core/v1 and events.k8s.io/v1 Events as one kind (each visible through "
    "both APIs); the emulator keeps them apart. voltpack writes and reads core/v1 Events only"
)
KNOWN: dict[str, tuple[Known, ...]] = {
    **{
        f"crd-create-{name}": (CRD_ASYNC,)
        for name in (
            "gpujobs",
            "gpunodes",
            "inferenceservices",
            "powerbudgets",
            "queues",
            "topologies",
        )
    },
    "node-create": (Known("body.spec.taints[1]", _NODE), Known("body.status", _NODE)),
    "node-get": (Known("body.spec.taints[1]", _NODE), Known("body.status", _NODE)),
    "node-status-patch": (
        Known("body.spec.taints[1]", _NODE),
        Known("body.status.daemonEndpoints", _NODE),
        Known("body.status.nodeInfo", _NODE),
    ),
    "owner-delete-foreground": (Known("*", _NO_GC),),
    "owner-after-delete": (Known("*", _NO_GC),),
    "owned-after-delete": (Known("*", _NO_GC),),
    "owned-cleanup": (Known("*", _NO_GC),),
    "owner-cleanup": (Known("*", _NO_GC),),
    "pod-status-put": (Known("body.metadata.labels", _STATUS_METADATA),),
    "pods-table": (
        Known(
            "body.columnDefinitions[*].description",
            "column descriptions of built-in tables are kube-apiserver's Go doc "
            "comments; the emulator writes short ones. kubectl never shows them",
        ),
    ),
    "event-create-no-reporting": (
        Known("body.details.name", "the name generated from generateName is random"),
    ),
    "event-v1-list": (Known("body.items[worker-1.<random>]", _EVENTS_APART),),
    "event-core-list-after-v1": (Known("body.items*", _EVENTS_APART),),
    "token-review-bad": (Known("body.status.authenticated", _REVIEW_FALSE),),
    "sar-admin": (
        Known("body.status.denied", _REVIEW_FALSE),
        Known("body.status.reason", _REVIEW_FALSE),
    ),
    "self-sar": (
        Known("body.status.denied", _REVIEW_FALSE),
        Known("body.status.reason", _REVIEW_FALSE),
    ),
    "sar-nobody": (Known("body.status.denied", _REVIEW_FALSE),),
    "sar-empty": (
        Known(
            "body.details.kind",
            "kube-apiserver leaves the kind out of this one error (its message reads "
            '`.authorization.k8s.io "" is invalid`); the emulator names it',
        ),
    ),
    "watch-bad-rv": (
        Known(
            "*code",
            "kube-apiserver answers a non-numeric resourceVersion on a "
            "watch with 500; the emulator's 400 BadRequest is what the list "
            "answers. No client sends one",
        ),
        Known("body.reason", "see code"),
    ),
    "ns-create-in-terminating": (Known("*", _NO_NAMESPACE_CONTROLLER),),
    "unknown-group-discovery": (
        Known(
            "*",
            "kube-apiserver answers discovery of a group nobody "
            "serves with its plain-text 404, the emulator with a "
            "NotFound Status (its tests assert that form); clients "
            "see a 404 either way",
        ),
    ),
}


def _with_known(step: Step) -> Step:
    return dataclasses.replace(step, known=step.known + KNOWN.get(step.name, ()))


def all_steps() -> list[Step]:
    """The whole corpus, in the order it runs."""
    steps = setup_steps() + pod_steps() + config_steps() + event_steps()
    steps += custom_steps() + owner_steps() + discovery_steps() + review_steps() + watch_steps()
    steps += priority_steps() + teardown_steps()
    steps = [_with_known(step) for step in steps]
    names = [step.name for step in steps]
    duplicates = {name for name in names if names.count(name) > 1}
    assert not duplicates, f"duplicate step names: {sorted(duplicates)}"
    unknown = set(KNOWN) - set(names)
    assert not unknown, f"KNOWN names steps that do not exist: {sorted(unknown)}"
    return steps
