"""Least privilege on a real kube-apiserver: the chart's identities do what the code does, and
are granted nothing else.

The Helm chart is rendered by the real helm (API in its own Deployment, Kubernetes auth: three
ServiceAccounts, operator, agent and api, each with its own grants) and its CRDs, accounts, roles
and bindings are applied to a real apiserver (`make k8s`) that writes an audit log of every
request. Each account gets a token from the TokenRequest API, and the real components run with
those tokens: the operator (`Operator`: caches, Lease, a GPUJob gang bound through pods/binding
and deleted through its finalizer, a Queue, a Topology, a PowerBudget that makes the power loop
write GPUNode specs, an InferenceService, Events, the policy ConfigMap), the agent's publisher
(`GpuNodeSync` over the simulated backend) and the admin API (`KubeAdminSource`, the inference
source and `KubernetesAuth`: users' tokens checked by TokenReview, their verbs by
SubjectAccessReview, both answered by the real apiserver).

Then (1) no request of those identities was refused (401/403), and (2) what each identity used
(verb, API group, resource/subresource, scope, from the audit log) is compared with what the
apiserver says it may do (SelfSubjectRulesReview with its own token, less what an account with
no bindings may do): a grant never used must be in `JUSTIFIED_UNUSED` with the code path that
needs it, else the test fails. `docs/rbac.md` is the comparison; the test fails when it differs
(VOLTPACK_UPDATE_EVIDENCE=1 rewrites it).
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client, utils

from tests.dry_runs import finished_dry_run
from tests.integration.conftest import wait_for
from tests.integration.services import missing_service
from tests.integration.test_helm import helm_binary
from tests.k8s_control_plane import (
    CONTROLLERS_APISERVER_ARGS,
    ControlPlane,
    bin_dir,
    missing_binaries,
    running_control_plane,
)
from voltpack.api.app import ApiDependencies, create_app
from voltpack.api.auth import KubernetesAuth
from voltpack.api.server import serving
from voltpack.cli import _publish_loop as publish_loop
from voltpack.emulator.dra.slices import driver_device_classes, node_resource_slices
from voltpack.operator.admin.source import KubeAdminSource
from voltpack.operator.gpunode_sync import GpuNodeSync
from voltpack.operator.inference.admin import KubeInferenceSource
from voltpack.operator.runner import Operator, OperatorConfig
from voltpack.policies.schema import parse_policy
from voltpack.telemetry.simulated import SimulatedBackend

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "voltpack"
REPORT = REPO / "docs" / "rbac.md"
USER_ROLES = REPO / "examples" / "rbac" / "voltpack-roles.yaml"
RELEASE, NAMESPACE = "vp", "voltpack-system"
HELM_ARGS = ("--set", "api.mode=deployment", "--set", "api.auth.mode=kubernetes")
WORKLOADS, PEOPLE, BASELINE = "team-a", "people", "rbac-baseline"
IDENTITIES = {
    "operator": f"{RELEASE}-voltpack-operator",
    "agent": f"{RELEASE}-voltpack-agent",
    "api": f"{RELEASE}-voltpack-api",
}
POLICY_CONFIGMAP = f"{RELEASE}-voltpack-policy"
LEASE = "voltpack-scheduler"
GROUP, VERSION = "voltpack.io", "v1alpha1"
AGENT_NODE = "h100-0"
RACK_LABEL = "voltpack.io/rack"
WAIT_S = 45.0
CLUSTER = "cluster"
"""The scope of a cluster-wide grant (a ClusterRoleBinding) and of a request for a
cluster-scoped object or across all namespaces."""

# Grants no request of the scenario used, each with the code that needs it. Keys:
# (identity, verb, group, resource, scope, resource name or "").
JUSTIFIED_UNUSED: dict[tuple[str, str, str, str, str, str], str] = {
    ("operator", "get", "voltpack.io", plural, "cluster", ""): (
        "a status write refused with 409 Conflict reads the object again "
        "(voltpack/operator/kube/status_writes.py; tests/integration/test_status_writes.py)"
    )
    for plural in ("gpujobs", "queues", "powerbudgets")
}
JUSTIFIED_UNUSED[("operator", "get", "", "pods", "cluster", "")] = (
    "a gang member whose binding failed, or a gang seen partly bound, is read back "
    "(voltpack/operator/kube/binder.py, gang_undo.py; tests/integration/test_gang_binding.py)"
)

# thresholds: stage 1 at 60 % of the budget locks the clocks of low-priority GPUs, so a budget
# far below the node's idle draw makes the power loop write the GPUNode's spec at once
POLICY = """
apiVersion: voltpack.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: rbac-test}
spec:
  scoring: {strategy: best-fit}
  power:
    policy: thresholds
    params: {thresholds: [0.6, 0.95], hold_s: 1, low_priority_rungs: [0, 1, 2],
             high_priority_rungs: [0, 0, 1]}
    stale_after_s: 30
    forecast: {model: seasonal_naive}
"""
INFERENCE_SPEC: dict[str, Any] = {
    "model": "llama3-8b",
    "slo": {"ttftMs": 3000, "tpotMs": 100},
    "ratePerSecond": 2,
    "requestSizes": [{"promptTokens": 512, "outputTokens": 256, "share": 1.0}],
    "gpuTypes": ["A10"],
    "container": {"image": "vllm/vllm-openai:v0.6.3", "cpuMilli": 2000, "memoryMib": 8192},
    # the Priority admission plugin refuses a pod's literal priority (docs/inference.md, Limits)
    "priorityClassName": "inference-high",
}
NODES = {  # name -> (GPU model label, GPUs, labels)
    "a10-0": ("NVIDIA-A10", 4, {}),
    "a10-1": ("NVIDIA-A10", 4, {}),
    AGENT_NODE: ("H100-SXM", 8, {RACK_LABEL: "r1"}),
}
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}


@dataclass(frozen=True, order=True)
class Permission:
    """One verb on one resource (with its subresource) in a scope, optionally one name."""

    verb: str
    group: str
    resource: str
    scope: str
    name: str = ""

    def covers(self, used: Permission) -> bool:
        """Whether this grant allows the request `used` (whose name may be any)."""
        return (
            (self.verb, self.group, self.resource) == (used.verb, used.group, used.resource)
            and self.scope in (CLUSTER, used.scope)
            and self.name in ("", used.name)
        )

    def text(self) -> str:
        group = self.group or "core"
        named = f" `{self.name}`" if self.name else ""
        return f"{self.verb} {group}/{self.resource}{named} ({self.scope})"


# --- the control plane and the chart -------------------------------------------------------


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    missing = missing_binaries()
    if missing:
        missing_service("kube-apiserver", f"{', '.join(missing)} not built in {bin_dir()}")
    folder = tmp_path_factory.mktemp("audit")
    policy = folder / "audit-policy.yaml"
    policy.write_text(json.dumps(AUDIT_POLICY))
    args = (
        f"--audit-policy-file={policy}",
        f"--audit-log-path={folder / 'audit.log'}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
        # no kubelet and no node-lifecycle controller: the nodes are created Ready, untainted
        *CONTROLLERS_APISERVER_ARGS,
    )
    with running_control_plane(extra_apiserver_args=args) as running:
        running.logs["audit"] = folder / "audit.log"
        yield running


def rendered_chart() -> list[dict[str, Any]]:
    result = subprocess.run(
        [helm_binary(), "template", RELEASE, str(CHART), "-n", NAMESPACE, "--include-crds",
         *HELM_ARGS],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


RBAC_KINDS = ("ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


def install(admin: client.ApiClient, docs: list[dict[str, Any]]) -> None:
    """The chart's CRDs (Established), namespaces, accounts, roles and bindings."""
    core = client.CoreV1Api(admin)
    for name in (NAMESPACE, WORKLOADS, PEOPLE, BASELINE):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    extensions = client.ApiextensionsV1Api(admin)
    for crd in crds:
        extensions.create_custom_resource_definition(crd)
    for crd in crds:
        wait_for(partial(established, extensions, crd["metadata"]["name"]), timeout_s=30,
                 what=f"{crd['metadata']['name']} Established")  # fmt: skip
    rbac = [d for d in docs if d["kind"] in RBAC_KINDS]
    assert {d["metadata"]["name"] for d in rbac if d["kind"] == "ServiceAccount"} == set(
        IDENTITIES.values()
    )
    for doc in rbac + list(yaml.safe_load_all(USER_ROLES.read_text())):
        utils.create_from_dict(admin, doc)


def established(extensions: client.ApiextensionsV1Api, name: str) -> bool:
    crd = extensions.read_custom_resource_definition(name)
    return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


def token_for(
    admin: client.ApiClient, account: str, namespace: str, bound_to: client.V1Pod | None = None
) -> str:
    """A token of the ServiceAccount from the TokenRequest API (the apiserver's audience);
    `bound_to`: valid only while that pod lives, as the kubelet asks for a pod's token."""
    bound = None
    if bound_to is not None:
        bound = client.V1BoundObjectReference(
            api_version="v1", kind="Pod", name=bound_to.metadata.name, uid=bound_to.metadata.uid
        )
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(
            audiences=[], expiration_seconds=3600, bound_object_ref=bound
        )
    )
    answer = client.CoreV1Api(admin).create_namespaced_service_account_token(
        account, namespace, request
    )
    return str(answer.status.token)


def client_for(plane: ControlPlane, token: str) -> client.ApiClient:
    configuration = client.Configuration(host=plane.url)
    configuration.api_key = {"authorization": token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    configuration.ssl_ca_cert = str(plane.ca_file)
    return client.ApiClient(configuration)


def user(admin: client.ApiClient, name: str, role: str | None) -> str:
    """A person as a ServiceAccount in PEOPLE bound to a voltpack admin-API role; its token."""
    client.CoreV1Api(admin).create_namespaced_service_account(
        PEOPLE, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
    )
    if role:
        utils.create_from_dict(admin, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{name}-{role}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": PEOPLE}],
        })  # fmt: skip
    return token_for(admin, name, PEOPLE)


# --- the cluster the components work on ----------------------------------------------------


def create_nodes(core: client.CoreV1Api) -> None:
    for name, (model, gpus, labels) in NODES.items():
        core.create_node(
            {"metadata": {"name": name, "labels": {"voltpack.io/gpu-model": model, **labels}}}
        )
        resources = {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
        core.patch_node_status(name, {"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "fake", "lastHeartbeatTime": None}],
        }})  # fmt: skip


DRA_NODE = "dra-0"


def create_dra_devices(admin: client.ApiClient) -> None:
    """A node whose GPUs a DRA driver publishes, and a pod asking for one through a claim:
    the operator reads the DRA objects, writes the claim's finalizer and allocation."""
    core, resource = client.CoreV1Api(admin), client.ResourceV1Api(admin)
    core.create_node({"metadata": {"name": DRA_NODE}})
    resources = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    core.patch_node_status(DRA_NODE, {"status": {
        "capacity": resources, "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "fake", "lastHeartbeatTime": None}],
    }})  # fmt: skip
    for device_class in driver_device_classes():
        resource.create_device_class(device_class)
    for item in node_resource_slices(DRA_NODE, "H100", None, 8):
        resource.create_resource_slice(item)
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    resource.create_namespaced_resource_claim(WORKLOADS, {
        "metadata": {"name": "dra-gpu"}, "spec": {"devices": {"requests": [request]}},
    })  # fmt: skip
    core.create_namespaced_pod(WORKLOADS, {
        "metadata": {"name": "dra-pod"},
        "spec": {
            "schedulerName": "voltpack",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "dra-gpu"}],
            "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    })  # fmt: skip
    # a pod no node can hold: it waits, with PodScheduled=False (pods/status patch)
    core.create_namespaced_pod(WORKLOADS, {
        "metadata": {"name": "too-big"},
        "spec": {"schedulerName": "voltpack", "containers": [{"name": "c", "image": "i",
                 "resources": {"limits": {"nvidia.com/gpu": "64"}}}]},
    })  # fmt: skip


def waits_unschedulable(admin: client.ApiClient) -> bool:
    pod = client.CoreV1Api(admin).read_namespaced_pod("too-big", WORKLOADS)
    return any(
        c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
        for c in pod.status.conditions or []
    )


def dra_claim_allocated(admin: client.ApiClient) -> bool:
    claim = client.ResourceV1Api(admin).read_namespaced_resource_claim("dra-gpu", WORKLOADS)
    pod = client.CoreV1Api(admin).read_namespaced_pod("dra-pod", WORKLOADS)
    return bool(claim.status and claim.status.allocation and pod.spec.node_name == DRA_NODE)


def create_workloads(custom: client.CustomObjectsApi) -> None:
    def cluster_object(plural: str, kind: str, name: str, spec: dict[str, Any]) -> None:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name},
                "spec": spec}  # fmt: skip
        custom.create_cluster_custom_object(GROUP, VERSION, plural, body)

    client.SchedulingV1Api(custom.api_client).create_priority_class(
        {"metadata": {"name": "inference-high"}, "value": 1000}
    )
    cluster_object("queues", "Queue", "research", {"quotas": [{"gpuModel": "*", "guaranteed": 8}]})
    cluster_object("topologies", "Topology", "fabric", {
        "levels": [{"nodeLabel": "network.topology.nvidia.com/block", "name": "leaf",
                    "oversubscription": 1.0}],
    })  # fmt: skip
    cluster_object("powerbudgets", "PowerBudget", "rack-r1", {
        "nodeSelector": {"matchLabels": {RACK_LABEL: "r1"}}, "budgetW": 500,
    })  # fmt: skip
    custom.create_namespaced_custom_object(GROUP, VERSION, WORKLOADS, "gpujobs", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "GPUJob",
        "metadata": {"name": "train", "namespace": WORKLOADS},
        "spec": {"queue": "research", "workers": 2, "gpusPerWorker": 1,
                 "template": {"spec": {"containers": [{"name": "w", "image": "trainer:1"}]}}},
    })  # fmt: skip
    custom.create_namespaced_custom_object(GROUP, VERSION, WORKLOADS, "inferenceservices", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": WORKLOADS}, "spec": INFERENCE_SPEC,
    })  # fmt: skip


# --- the components, each with its own account's token -------------------------------------


@contextmanager
def running_thread(target: Callable[[threading.Event], None]) -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=target, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=20)
        assert not thread.is_alive(), f"{target} did not stop"


def agent_loop(api: client.ApiClient) -> Callable[[threading.Event], None]:
    """`voltpack agent --publish --backend simulated`'s publisher loop (errors logged, retried)."""
    sync = GpuNodeSync(client.CustomObjectsApi(api), AGENT_NODE, SimulatedBackend("H100-SXM", 8))
    return partial(publish_loop, sync, 0.2)


def operator_config() -> OperatorConfig:
    return OperatorConfig(
        policy=parse_policy(POLICY), identity="rbac-test", namespace=NAMESPACE,
        lease_name=LEASE, cycle_interval_s=0.2, lease_duration_s=6, power=True,
        power_interval_s=0.3, policy_configmap=POLICY_CONFIGMAP, policy_refresh_s=0.3,
    )  # fmt: skip


def api_app(api: client.ApiClient) -> Any:
    policy = parse_policy(POLICY)
    source = KubeAdminSource(
        api, policy, POLICY, namespace=NAMESPACE, policy_configmap=POLICY_CONFIGMAP
    )
    source.start()
    auth = KubernetesAuth(api)
    deps = ApiDependencies(
        cluster=source, policies=source, authenticator=auth, authorizer=auth,
        inference=KubeInferenceSource(api),
    )  # fmt: skip
    return create_app(deps), source


# --- what the scenario waits for -----------------------------------------------------------


def custom_object(custom: client.CustomObjectsApi, plural: str, name: str,
                  namespace: str | None = None) -> dict[str, Any] | None:  # fmt: skip
    try:
        if namespace:
            found = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
        else:
            found = custom.get_cluster_custom_object(GROUP, VERSION, plural, name)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    return dict(found)


def has_status(custom: client.CustomObjectsApi, plural: str, name: str,
               namespace: str | None = None) -> bool:  # fmt: skip
    found = custom_object(custom, plural, name, namespace)
    return bool(found and found.get("status"))


def bound_workers(core: client.CoreV1Api) -> list[str]:
    pods = core.list_namespaced_pod(WORKLOADS, label_selector="voltpack.io/job=train").items
    return [p.spec.node_name for p in pods if p.spec.node_name]


def live_workers(core: client.CoreV1Api) -> list[str]:
    pods = core.list_namespaced_pod(WORKLOADS, label_selector="voltpack.io/job=train").items
    return [p.metadata.name for p in pods if not p.metadata.deletion_timestamp]


def events_in(core: client.CoreV1Api, namespace: str) -> int:
    return len(core.list_namespaced_event(namespace).items)


def gpunode_spec_written(custom: client.CustomObjectsApi) -> bool:
    found = custom_object(custom, "gpunodes", AGENT_NODE)
    return bool(found and (found.get("spec") or {}).get("gpus"))


def inference_replicas(core: client.CoreV1Api) -> int:
    pods = core.list_namespaced_pod(WORKLOADS).items
    return sum(1 for p in pods if "voltpack.io/job" not in (p.metadata.labels or {}))


# --- the audit log and the grants ----------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One audited request of an identity."""

    permission: Permission
    code: int
    uri: str


def audited(path: Path, accounts: dict[str, str]) -> dict[str, list[Request]]:
    """The requests of each identity (by name) from the audit log, one per audit ID."""
    users = {f"system:serviceaccount:{NAMESPACE}:{sa}": name for name, sa in accounts.items()}
    seen: dict[str, tuple[str, Request]] = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        identity = users.get(event["user"]["username"])
        if identity is None:
            continue
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        if not resource:
            resource = "nonResourceURL " + event["requestURI"].split("?")[0]
        permission = Permission(
            verb=event["verb"], group=ref.get("apiGroup", ""), resource=resource,
            scope=ref.get("namespace") or CLUSTER, name=ref.get("name", ""),
        )  # fmt: skip
        code = int((event.get("responseStatus") or {}).get("code") or 0)
        request = Request(permission, code, event["requestURI"])
        if event["stage"] == "ResponseComplete" or event["auditID"] not in seen:
            seen[event["auditID"]] = (identity, request)
    found: dict[str, list[Request]] = {name: [] for name in accounts}
    for identity, request in seen.values():
        found[identity].append(request)
    return found


def rules(api: client.ApiClient, namespace: str) -> set[Permission]:
    """What the token's holder may do in `namespace` (SelfSubjectRulesReview), by rule."""
    review = client.AuthorizationV1Api(api).create_self_subject_rules_review(
        client.V1SelfSubjectRulesReview(
            spec=client.V1SelfSubjectRulesReviewSpec(namespace=namespace)
        )
    )
    assert not review.status.incomplete, review.status.evaluation_error
    return {
        Permission(verb, group, resource, namespace, name)
        for rule in review.status.resource_rules
        for verb in rule.verbs
        for group in rule.api_groups or [""]
        for resource in rule.resources or []
        for name in rule.resource_names or [""]
    }


def granted(api: client.ApiClient, baseline: client.ApiClient) -> set[Permission]:
    """The account's grants beyond an unbound account's: cluster-wide ones (seen from a
    namespace the chart does not touch) and the release namespace's own."""

    def unscoped(permissions: set[Permission]) -> set[tuple[str, str, str, str]]:
        return {(p.verb, p.group, p.resource, p.name) for p in permissions}

    elsewhere = unscoped(rules(api, WORKLOADS)) - unscoped(rules(baseline, WORKLOADS))
    here = unscoped(rules(api, NAMESPACE)) - unscoped(rules(baseline, NAMESPACE)) - elsewhere
    return {Permission(v, g, r, CLUSTER, n) for v, g, r, n in elsewhere} | {
        Permission(v, g, r, NAMESPACE, n) for v, g, r, n in here
    }


# --- the report ----------------------------------------------------------------------------


def report(grants: dict[str, set[Permission]], used: dict[str, list[Request]]) -> str:
    lines = [
        "# RBAC: what each identity of the chart is granted and uses",
        "",
        "Generated by `tests/integration/test_real_rbac.py` (the test fails when this file differs",
        "from what it measures; `VOLTPACK_UPDATE_EVIDENCE=1` rewrites it). The chart is rendered",
        f"with `{' '.join(HELM_ARGS)}`",
        "(the API in its own Deployment with Kubernetes auth: three accounts) and applied to a",
        "real kube-apiserver (`make k8s`); the operator, the agent's GPUNode",
        "publisher and the admin API run with their accounts' TokenRequest tokens while the",
        "apiserver's audit log records every request. *Granted* is the apiserver's",
        "SelfSubjectRulesReview for each account, less what an account without bindings may do;",
        "*used* means a request of that identity in the audit log matched the grant; a grant",
        "never used must be justified by the code that needs it. In the default sidecar mode the",
        "operator's account holds both the operator's and the API's grants.",
        "",
        "Scope `cluster` is a ClusterRoleBinding's grant (and a request for a cluster-scoped",
        f"object or across namespaces); `{NAMESPACE}` is a Role's grant in the release namespace.",
        "",
    ]
    for identity, account in IDENTITIES.items():
        requests = used[identity]
        refused = [r for r in requests if r.code in (401, 403)]
        lines += [
            f"## {identity} (`system:serviceaccount:{NAMESPACE}:{account}`)",
            "",
            f"{len(grants[identity])} grants; requests refused (401/403): {len(refused)}.",
            "",
            "| grant | used | justification when unused |",
            "| --- | --- | --- |",
        ]
        for grant in sorted(grants[identity]):
            hits = [r for r in requests if grant.covers(r.permission)]
            scopes = sorted({r.permission.scope for r in hits})
            key = (identity, *fields(grant))
            why = "" if hits else JUSTIFIED_UNUSED.get(key, "**UNJUSTIFIED**")
            where = f"yes ({', '.join(scopes)})" if hits else "no"
            lines.append(f"| {grant.text()} | {where} | {why} |")
        unmatched = sorted(
            {r.permission.text() for r in requests
             if not any(g.covers(r.permission) for g in grants[identity])}
        )  # fmt: skip
        lines += ["", "Requests no chart grant covers (allowed to every account, e.g. discovery):"]
        lines += [f"- {text}" for text in unmatched] or ["- none"]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# --- the test ------------------------------------------------------------------------------


def run_scenario(
    admin: client.ApiClient, clients: dict[str, client.ApiClient], people: dict[str, str]
) -> None:
    """The components at work, each with its account's token, until every path has run."""
    core, custom = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    app, source = api_app(clients["api"])
    operator = Operator(clients["operator"], operator_config())
    with ExitStack() as stack:
        stack.callback(source.close)
        stack.enter_context(running_thread(agent_loop(clients["agent"])))
        stack.enter_context(running_thread(operator.run))
        url = stack.enter_context(serving(app))

        def call(who: str, method: str, path: str, body: object = None) -> int:
            headers = {"Authorization": f"Bearer {people[who]}"}
            answer = httpx.request(method, url + path, headers=headers, json=body, timeout=30)
            return answer.status_code

        # the operator: the gang bound, statuses written, the power loop's GPUNode spec
        wait_for(lambda: len(bound_workers(core)) == 2, timeout_s=WAIT_S, what="gang bound")
        wait_for(partial(dra_claim_allocated, admin), timeout_s=WAIT_S, what="claim allocated")
        wait_for(partial(waits_unschedulable, admin), timeout_s=WAIT_S, what="PodScheduled=False")
        for plural, name, namespace in [
            ("gpujobs", "train", WORKLOADS), ("queues", "research", None),
            ("topologies", "fabric", None), ("powerbudgets", "rack-r1", None),
            ("inferenceservices", "chat", WORKLOADS),
        ]:  # fmt: skip
            wait_for(partial(has_status, custom, plural, name, namespace), timeout_s=WAIT_S,
                     what=f"{plural}/{name} status")  # fmt: skip
        wait_for(lambda: inference_replicas(core) > 0, timeout_s=WAIT_S, what="replicas")
        wait_for(partial(gpunode_spec_written, custom), timeout_s=WAIT_S, what="GPUNode spec")
        for namespace in (WORKLOADS, "default"):  # a namespaced object's, a GPUNode's
            wait_for(partial(events_in, core, namespace), timeout_s=WAIT_S,
                     what=f"Events in {namespace}")  # fmt: skip

        # the admin API: people's tokens reviewed by the real apiserver
        text = POLICY.replace("rbac-test", "rbac-test-2")
        reads = ["cluster", "nodes", "jobs", "queues", "power/domains", "inferenceservices",
                 "policy"]  # fmt: skip
        for path in (f"/api/v1/{read}" for read in reads):
            assert call("alice", "GET", path) == 200, path
            assert call("viola", "GET", path) == 200, path
            assert call("mallory", "GET", path) == 403, path
        assert call("forger", "GET", "/api/v1/cluster") == 401  # TokenReview: not authenticated
        dry_run = finished_dry_run(url, {"Authorization": f"Bearer {people['alice']}"}, text)
        assert dry_run["status"] == "done", dry_run  # read through the chart's RBAC
        assert call("viola", "POST", "/api/v1/policy/dry-runs", {"text": text}) == 403
        assert call("viola", "PUT", "/api/v1/policy", {"text": text}) == 403
        assert call("alice", "PUT", "/api/v1/policy", {"text": text}) == 200  # creates
        assert call("alice", "PUT", "/api/v1/policy", {"text": POLICY}) == 200  # updates
        # the budget (500 W) is below the 8 GPUs' floor (1,600 W), so no cap value is in range
        # (a 422, tests/integration/test_api_limits.py); removing the cap writes the same object
        cap = {"cap_w": None}
        assert call("mallory", "POST", "/api/v1/power/domains/rack-r1/cap", cap) == 403
        assert call("alice", "POST", "/api/v1/power/domains/rack-r1/cap", cap) == 200

        # the GPUJob deleted: the operator deletes its workers and lifts its finalizer
        custom.delete_namespaced_custom_object(GROUP, VERSION, WORKLOADS, "gpujobs", "train")
        wait_for(lambda: custom_object(custom, "gpujobs", "train", WORKLOADS) is None,
                 timeout_s=WAIT_S, what="GPUJob finalized")  # fmt: skip
        # (deleted gracefully: without a kubelet a bound pod keeps its deletionTimestamp)
        wait_for(lambda: not live_workers(core), timeout_s=WAIT_S, what="workers deleted")
    # stopped: the operator has released its Lease (a get and an update)


def refusals(used: dict[str, list[Request]]) -> str:
    return "\n".join(
        f"{identity}: {r.code} {r.permission.text()} {r.uri}"
        for identity, requests in used.items()
        for r in requests
        if r.code in (401, 403)
    )


def fields(grant: Permission) -> tuple[str, str, str, str, str]:
    return (grant.verb, grant.group, grant.resource, grant.scope, grant.name)


def test_each_identity_can_do_what_its_code_does_and_nothing_more(plane: ControlPlane) -> None:
    started = time.monotonic()
    admin = plane.api_client()
    install(admin, rendered_chart())
    client.CoreV1Api(admin).create_namespaced_service_account(
        BASELINE, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="nobody"))
    )
    clients = {
        name: client_for(plane, token_for(admin, account, NAMESPACE))
        for name, account in IDENTITIES.items()
    }
    baseline = client_for(plane, token_for(admin, "nobody", BASELINE))
    people = {
        "alice": user(admin, "alice", "voltpack-admin"),
        "viola": user(admin, "viola", "voltpack-viewer"),
        "mallory": user(admin, "mallory", None),
        "forger": "not-a-token-the-apiserver-issued",
    }
    create_nodes(client.CoreV1Api(admin))
    create_workloads(client.CustomObjectsApi(admin))
    create_dra_devices(admin)
    try:
        run_scenario(admin, clients, people)
    except AssertionError as failure:  # e.g. a wait timed out: say what was refused
        refused = refusals(audited(plane.logs["audit"], IDENTITIES)) or "none"
        raise AssertionError(f"{failure}\nrequests refused:\n{refused}") from None

    used = audited(plane.logs["audit"], IDENTITIES)  # before the rules reviews below
    grants = {name: granted(api, baseline) for name, api in clients.items()}
    for api in [*clients.values(), baseline, admin]:
        api.close()  # type: ignore[no-untyped-call]
    assert not refusals(used), f"requests refused:\n{refusals(used)}"
    for identity, requests in used.items():
        assert requests, f"{identity} made no request"

    problems = []
    for identity, permissions in grants.items():
        for grant in sorted(permissions):
            key = (identity, *fields(grant))
            hit = any(grant.covers(r.permission) for r in used[identity])
            if not hit and key not in JUSTIFIED_UNUSED:
                problems.append(f"{identity}: {grant.text()} is granted, never used, unjustified")
            if hit and key in JUSTIFIED_UNUSED:
                problems.append(f"{identity}: {grant.text()} is used: drop its justification")
    for key in JUSTIFIED_UNUSED:
        if not any((key[0], *fields(grant)) == key for grant in grants.get(key[0], set())):
            problems.append(f"JUSTIFIED_UNUSED names {key}, which is not granted")
    text = report(grants, used)
    print(f"chart applied, scenario run and compared in {time.monotonic() - started:.1f} s")
    if os.environ.get("VOLTPACK_UPDATE_EVIDENCE"):
        REPORT.write_text(text)
    assert not problems, "\n".join(problems) + "\n\n" + text
    current = REPORT.read_text() if REPORT.exists() else ""
    assert current == text, "docs/rbac.md is stale (VOLTPACK_UPDATE_EVIDENCE=1 rewrites it):\n" + (
        "".join(difflib.unified_diff(current.splitlines(True), text.splitlines(True)))
    )
