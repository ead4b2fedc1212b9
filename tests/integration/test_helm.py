"""The Helm chart, rendered by the real helm binary (`make tools` installs it in .tools/).

helm lint; helm template with the default values and every values file in helm/voltpack/ci/;
every rendered manifest checked by kubernetes-validate --strict; security settings of every pod;
RBAC against the API calls the code makes; the CRDs against `make crds`; the example custom
resources against their CRDs; values.schema.json; dashboards, policy, API modes, the Dockerfile.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import typer
import yaml

from tests.integration.services import missing_service
from voltpack.cli import app
from voltpack.policies.schema import load_policy

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "voltpack"
K8S_VERSION = "1.30.0"
RELEASE, NAMESPACE = "vp", "voltpack-system"
MONITORING_API = "monitoring.coreos.com/v1"
# prometheus-operator kinds: kubernetes-validate has no schema for them (they are CRDs of
# another project, not shipped offline); test_prometheus_operator_objects checks them instead.
PROMETHEUS_OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}
UID = 10001

# name -> (values files, extra helm arguments)
CASES: dict[str, tuple[list[Path], list[str]]] = {
    "default": ([], []),
    "default-with-prometheus-operator": ([], ["--api-versions", MONITORING_API]),
    **{
        path.name.removesuffix("-values.yaml"): ([path], [])
        for path in sorted((CHART / "ci").glob("*-values.yaml"))
    },
}


def helm_binary() -> str:
    for candidate in (os.environ.get("HELM"), str(REPO / ".tools" / "helm"), shutil.which("helm")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    missing_service("helm", "not in .tools/helm, $HELM or PATH (`make tools` installs it)")


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [helm_binary(), *args], capture_output=True, text=True, timeout=120, check=False
    )


@functools.cache
def render_text(case: str, *more: str) -> str:
    files, extra = CASES[case]
    args = ["template", RELEASE, str(CHART), "-n", NAMESPACE, "--include-crds", *extra, *more]
    for path in files:
        args += ["-f", str(path)]
    result = run_helm(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(case: str, *more: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(render_text(case, *more)) if doc]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [doc for doc in of_kind(docs, kind) if doc["metadata"]["name"] == name]
    return found


def workloads(docs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield from (doc for doc in docs if doc["kind"] in ("Deployment", "DaemonSet"))


def values_of(case: str) -> dict[str, Any]:
    merged: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    for path in CASES[case][0]:
        merge(merged, yaml.safe_load(path.read_text(encoding="utf-8")))
    return merged


def merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


# --- helm lint and Kubernetes schemas ---------------------------------------------------------


# helm lint cannot pretend the cluster serves an API: monitoring-on forces those objects instead
@pytest.mark.parametrize("case", sorted(case for case in CASES if not CASES[case][1]))
def test_helm_lint_strict(case: str) -> None:
    args = ["lint", "--strict", str(CHART), "-n", NAMESPACE]
    for path in CASES[case][0]:
        args += ["-f", str(path)]
    result = run_helm(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_manifest_is_valid_for_kubernetes(case: str, tmp_path: Path) -> None:
    docs = render(case)
    core = [doc for doc in docs if doc["kind"] not in PROMETHEUS_OPERATOR_KINDS]
    for doc in core:  # one by one, for a message that names the object
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{doc['kind']} {doc['metadata']['name']}: {error}")
    # and the command line tool itself, on the whole rendering
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump_all(core), encoding="utf-8")
    tool = Path(sys.executable).parent / "kubernetes-validate"
    result = subprocess.run(
        [str(tool), "--strict", "--quiet", "-k", K8S_VERSION, str(manifest)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    # everything carries the release's labels and lives in the release namespace when namespaced
    for doc in docs:
        if doc["kind"] == "CustomResourceDefinition":
            continue
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == RELEASE, doc["metadata"]["name"]
        assert labels["app.kubernetes.io/part-of"] == "voltpack"
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert doc["metadata"]["namespace"] in (NAMESPACE, "monitoring")


def test_prometheus_operator_objects_follow_the_api_and_the_values() -> None:
    assert not of_kind(render("default"), "ServiceMonitor")  # "auto" without the API
    assert not of_kind(render("default"), "PrometheusRule")
    assert not of_kind(render("monitoring-off"), "ServiceMonitor")
    for case in ("default-with-prometheus-operator", "monitoring-on"):
        docs = render(case)
        services = of_kind(docs, "Service")
        monitors = of_kind(docs, "ServiceMonitor")
        assert {m["metadata"]["labels"]["app.kubernetes.io/component"] for m in monitors} == {
            "operator",
            "agent",
        }
        for monitor in monitors:
            spec = monitor["spec"]
            assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
            wanted = spec["selector"]["matchLabels"]
            (service,) = [s for s in services if wanted.items() <= s["metadata"]["labels"].items()]
            ports = {p["name"] for p in service["spec"]["ports"]}
            assert {e["port"] for e in spec["endpoints"]} <= ports
            # the alerts and dashboards select on job=~".*voltpack-agent.*"
            job = service["metadata"]["labels"][spec["jobLabel"]]
            assert job == "voltpack-" + wanted["app.kubernetes.io/component"]
        (rule,) = of_kind(docs, "PrometheusRule")
        shipped = yaml.safe_load((CHART / "rules" / "voltpack-alerts.yaml").read_text())
        assert rule["spec"] == shipped["spec"]
        assert rule["apiVersion"] == MONITORING_API
    on = render("monitoring-on")
    assert all(
        m["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        for m in of_kind(on, "ServiceMonitor") + of_kind(on, "PrometheusRule")
    )


# --- security --------------------------------------------------------------------------------


def quantity_set(resources: dict[str, Any], part: str, *names: str) -> bool:
    return all(resources.get(part, {}).get(name) not in (None, "") for name in names)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_pod_is_locked_down_unless_the_values_opt_out(case: str) -> None:
    values = values_of(case)
    found = set()
    for workload in workloads(render(case)):
        component = workload["metadata"]["labels"]["app.kubernetes.io/component"]
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not {"hostNetwork", "hostPID", "hostIPC"} & set(pod)
        host_paths = [v for v in pod.get("volumes", []) if "hostPath" in v]
        assert component == "agent" or not host_paths, component
        for container in pod["containers"]:
            found.add(container["name"])
            where = f"{workload['metadata']['name']}/{container['name']}"
            resources = container["resources"]
            assert quantity_set(resources, "requests", "cpu", "memory"), where
            assert quantity_set(resources, "limits", "cpu", "memory"), where
            image = container["image"]
            assert ":" in image and not image.endswith(":latest"), where
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True, where
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert "/tmp" in mounts, where  # the one writable place (HOME, matplotlib)
            if container["name"] == "agent" and values["agent"]["privileged"]:
                assert security["privileged"] is True
                assert security["runAsUser"] == 0
                continue
            assert security["runAsNonRoot"] is True, where
            assert security["runAsUser"] == UID, where
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["privileged"] is False, where
            assert security["capabilities"] == {"drop": ["ALL"]}, where
            assert "add" not in security["capabilities"], where
    assert "operator" in found
    assert ("agent" in found) == values["agent"]["enabled"]
    assert ("api" in found) == (values["api"]["mode"] != "disabled")


def test_only_the_privileged_values_make_a_privileged_container() -> None:
    for case in CASES:
        privileged = [
            c["name"]
            for w in workloads(render(case))
            for c in w["spec"]["template"]["spec"]["containers"]
            if c["securityContext"].get("privileged")
        ]
        assert privileged == (["agent"] if case == "agent-privileged" else []), case


# --- RBAC ------------------------------------------------------------------------------------

# Kubernetes client calls -> (API group, resource, verbs). A `list_*` feeds a ResourceCache,
# which also watches.
CLIENT_CALLS: dict[str, tuple[str, str, set[str]]] = {
    "list_node": ("", "nodes", {"list", "watch"}),
    "list_pod_for_all_namespaces": ("", "pods", {"list", "watch"}),
    "create_namespaced_pod": ("", "pods", {"create"}),
    "patch_namespaced_pod": ("", "pods", {"patch"}),
    "delete_namespaced_pod": ("", "pods", {"delete"}),
    "read_namespaced_pod": ("", "pods", {"get"}),
    "create_namespaced_pod_binding": ("", "pods/binding", {"create"}),  # pods/<name>/binding
    "patch_namespaced_pod_status": ("", "pods/status", {"patch"}),
    "list_namespace": ("", "namespaces", {"list", "watch"}),
    "list_persistent_volume_claim_for_all_namespaces": (
        "",
        "persistentvolumeclaims",
        {"list", "watch"},
    ),
    "list_persistent_volume": ("", "persistentvolumes", {"list", "watch"}),
    "list_storage_class": ("storage.k8s.io", "storageclasses", {"list", "watch"}),
    "list_pod_disruption_budget_for_all_namespaces": (
        "policy",
        "poddisruptionbudgets",
        {"list", "watch"},
    ),
    "create_namespaced_binding": ("", "bindings", {"create"}),  # POST bindings: another grant
    "create_namespaced_event": ("", "events", {"create"}),
    "read_namespaced_lease": ("coordination.k8s.io", "leases", {"get"}),
    "replace_namespaced_lease": ("coordination.k8s.io", "leases", {"update"}),
    "create_namespaced_lease": ("coordination.k8s.io", "leases", {"create"}),
    "read_namespaced_config_map": ("", "configmaps", {"get"}),
    "list_resource_slice": ("resource.k8s.io", "resourceslices", {"list", "watch"}),
    "list_device_class": ("resource.k8s.io", "deviceclasses", {"list", "watch"}),
    "list_resource_claim_for_all_namespaces": (
        "resource.k8s.io",
        "resourceclaims",
        {"list", "watch"},
    ),
    "patch_namespaced_resource_claim": ("resource.k8s.io", "resourceclaims", {"patch"}),
    "patch_namespaced_resource_claim_status": (
        "resource.k8s.io",
        "resourceclaims/status",
        {"patch"},
    ),
}
CUSTOM_CALLS = {
    "list_cluster_custom_object": {"list", "watch"},
    "get_cluster_custom_object": {"get"},
    "get_namespaced_custom_object": {"get"},
    "create_cluster_custom_object": {"create"},
    "patch_cluster_custom_object": {"patch"},
    "patch_namespaced_custom_object": {"patch"},
    "patch_cluster_custom_object_status": {"patch"},
    "patch_namespaced_custom_object_status": {"patch"},
}
CUSTOM_PLURALS = {"gpujobs", "gpunodes", "queues", "powerbudgets"}
OPERATOR_PLURALS = CUSTOM_PLURALS | {"topologies", "inferenceservices"}
OPERATOR_MODULES = [
    "runner", "kube/cache", "kube/binder", "scheduling/jobs", "scheduling/queues", "power/loop",
    "kube/leader", "kube/policy_reload", "scheduling/job_history", "scheduling/topology_view",
    "inference/services", "kube/setup_problems", "dra/support", "dra/writer",
    "scheduling/gang_undo", "scheduling/gang_recovery", "scheduling/training_rounds",
    "kube/pod_conditions",
]  # fmt: skip
# The admin API (voltpack/operator/admin/source.py, voltpack/api/auth.py): its custom-object
# lists take the plural as a variable, so its grants are spelled out here, one per call.
API_GRANTS = {
    ("", "nodes", "list"), ("", "nodes", "watch"),  # list_node (cached reads, dry-run cache)
    ("", "pods", "list"), ("", "pods", "watch"),  # list_pod_for_all_namespaces
    ("", "events", "list"), ("", "events", "watch"),  # why a pod waits (a ResourceCache)
    *{("voltpack.io", p, v) for p in CUSTOM_PLURALS for v in ("list", "watch")},
    ("voltpack.io", "powerbudgets", "patch"),  # a manual cap
    ("voltpack.io", "inferenceservices", "list"),  # inference/admin.py: the plans (a cache)
    ("voltpack.io", "inferenceservices", "watch"),
    *{("resource.k8s.io", r, v)  # each pod's devices (dra/figures.py)
      for r in ("resourceslices", "resourceclaims") for v in ("list", "watch")},
}  # fmt: skip
API_POLICY_GRANTS = {("", "configmaps", v) for v in ("get", "update", "create")}
API_AUTH_GRANTS = {
    ("authentication.k8s.io", "tokenreviews", "create"),
    ("authorization.k8s.io", "subjectaccessreviews", "create"),
}
AGENT_MODULES = ["gpunode_sync"]


def permissions_used(modules: list[str]) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every Kubernetes call in these voltpack/operator modules."""
    used: set[tuple[str, str, str]] = set()
    for module in modules:
        source = (REPO / "voltpack" / "operator" / f"{module}.py").read_text(encoding="utf-8")
        constant = re.search(r'^PLURAL = "(\w+)"', source, re.M)
        # raw POSTs (`client.post_json`) to a core subresource, e.g. a pod's binding, or to a
        # namespaced collection (an Event)
        raw_paths = re.findall(r'"/api/v1/namespaces/\{[^}]+\}/(\w+)/\{[^}]+\}/(\w+)"', source)
        raw_collections = re.findall(r'"/api/v1/namespaces/\{[^}]+\}/(\w+)"', source)
        raw_calls = len(re.findall(r"\bpost_json\(", source)) - source.count("def post_json(")
        assert raw_calls == len(raw_paths) + len(raw_collections), (
            f"{module}: a post_json call without its path literal"
        )
        used |= {("", f"{resource}/{sub}", "create") for resource, sub in raw_paths}
        used |= {("", resource, "create") for resource in raw_collections}
        for match in re.finditer(
            r"\.((?:list|read|create|replace|patch|delete|get)_\w+)\b", source
        ):
            call = match[1]
            if call in CLIENT_CALLS:
                group, resource, verbs = CLIENT_CALLS[call]
                used |= {(group, resource, verb) for verb in verbs}
            elif call in CUSTOM_CALLS:
                # the plural: the first literal or PLURAL among the call's arguments
                arguments = source[match.end() : match.end() + 160]
                plural = re.search(
                    r'"(gpujobs|gpunodes|queues|powerbudgets|topologies|inferenceservices)"|\bPLURAL\b',
                    arguments,
                )
                assert plural, f"{module}.{call}: no plural found in {arguments!r}"
                resource = plural[1] or (constant[1] if constant else "")
                assert resource in OPERATOR_PLURALS, (module, call, resource)
                suffix = "/status" if call.endswith("_status") else ""
                used |= {("voltpack.io", resource + suffix, verb) for verb in CUSTOM_CALLS[call]}
            else:
                unknown = re.match(
                    r"(list|read|get|create|replace|patch|delete)_(namespaced|cluster)", call
                )
                assert not unknown, f"{module}.{call}: unknown to this test; add it to CLIENT_CALLS"
    return used


def granted(docs: list[dict[str, Any]], account: str) -> set[tuple[str, str, str]]:
    roles = {
        (d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("Role", "ClusterRole")
    }
    grants: set[tuple[str, str, str]] = set()
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s["name"] == account for s in binding["subjects"]):
            continue
        role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        for rule in role["rules"]:
            grants |= {
                (g, r, v)
                for g in rule["apiGroups"]
                for r in rule["resources"]
                for v in rule["verbs"]
            }
    return grants


def test_rbac_grants_exactly_what_the_code_calls() -> None:
    docs = render("default")
    operator = granted(docs, f"{RELEASE}-voltpack-operator")
    agent = granted(docs, f"{RELEASE}-voltpack-agent")
    # the operator's finalizer on GPUJobs is a patch of the object (covered by gpujobs patch);
    # the API runs in the operator's pod by default, with its account
    assert operator == permissions_used(OPERATOR_MODULES) | API_GRANTS | API_POLICY_GRANTS
    assert agent == permissions_used(AGENT_MODULES)
    assert agent == {
        ("voltpack.io", "gpunodes", "get"),
        ("voltpack.io", "gpunodes", "create"),
        ("voltpack.io", "gpunodes/status", "patch"),
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_rbac_has_no_wildcards_and_no_secrets(case: str) -> None:
    docs = render(case)
    for role in of_kind(docs, "ClusterRole") + of_kind(docs, "Role"):
        for rule in role["rules"]:
            where = f"{role['metadata']['name']}: {rule}"
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], where
            assert not {"secrets", "serviceaccounts/token"} & set(rule["resources"])
            if "configmaps" in rule["resources"]:
                # only the policy ConfigMap, in the release namespace (create cannot be named)
                assert role["kind"] == "Role", where
                assert rule.get("resourceNames") == [f"{RELEASE}-voltpack-policy"] or rule[
                    "verbs"
                ] == ["create"], where
            assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"])
            assert "nonResourceURLs" not in rule, where
    # the Lease permissions are namespaced, and only the scheduler's Lease can be read or written
    (lease_role,) = [r for r in of_kind(docs, "Role") if "leader-election" in r["metadata"]["name"]]
    assert lease_role["metadata"]["namespace"] == NAMESPACE
    named_rules = [r for r in lease_role["rules"] if "resourceNames" in r]
    assert named_rules[0] == {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": ["voltpack-scheduler"],
        "verbs": ["get", "update"],
    }
    assert all(r["metadata"]["namespace"] == NAMESPACE for r in of_kind(docs, "Role"))
    # one service account per component; every binding names one that the chart creates
    accounts = {sa["metadata"]["name"] for sa in of_kind(docs, "ServiceAccount")}
    for binding in of_kind(docs, "ClusterRoleBinding") + of_kind(docs, "RoleBinding"):
        assert {s["name"] for s in binding["subjects"]} <= accounts
    used = {
        w["metadata"]["labels"]["app.kubernetes.io/component"]: w["spec"]["template"]["spec"][
            "serviceAccountName"
        ]
        for w in workloads(docs)
    }
    assert len(set(used.values())) == len(used), used


def test_the_api_deployment_has_exactly_the_apis_grants() -> None:
    docs = render("api-deployment")
    api = granted(docs, f"{RELEASE}-voltpack-api")
    assert api == API_GRANTS | API_POLICY_GRANTS
    operator = granted(docs, f"{RELEASE}-voltpack-operator")
    assert operator == permissions_used(OPERATOR_MODULES)  # the API's grants stay with the API


def test_kubernetes_auth_adds_only_the_review_grants() -> None:
    docs = render("default", "--set", "api.auth.mode=kubernetes")
    operator = granted(docs, f"{RELEASE}-voltpack-operator")
    expected = permissions_used(OPERATOR_MODULES) | API_GRANTS | API_POLICY_GRANTS
    assert operator == expected | API_AUTH_GRANTS
    _, container = api_container(docs)
    assert not [a for a in container["args"] if a.startswith("--token-file")]
    assert not of_kind(docs, "Secret")


# --- CRDs and example resources ----------------------------------------------------------------


def test_chart_crds_are_what_make_crds_generates(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "voltpack.operator.kube.crds", str(tmp_path)],
        check=True, cwd=REPO, capture_output=True, timeout=120,
    )  # fmt: skip
    generated = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.glob("*.yaml")}
    shipped = {p.name: p.read_text(encoding="utf-8") for p in (CHART / "crds").glob("*.yaml")}
    assert generated == shipped, "run `make crds`"
    rendered = of_kind(render("default"), "CustomResourceDefinition")
    assert sorted(r["metadata"]["name"] for r in rendered) == sorted(
        name.removesuffix(".yaml") for name in shipped
    )


def strict_schema(node: Any) -> Any:
    """A CRD's OpenAPI v3 schema as JSON Schema (draft 4), refusing fields the CRD would prune."""
    if isinstance(node, list):
        return [strict_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: strict_schema(value)
        for key, value in node.items()
        if not key.startswith("x-kubernetes-") and key != "nullable"
    }
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def crd_validators() -> dict[tuple[str, str], jsonschema.Draft4Validator]:
    validators = {}
    for path in (CHART / "crds").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        for version in crd["spec"]["versions"]:
            schema = strict_schema(version["schema"]["openAPIV3Schema"])
            jsonschema.Draft4Validator.check_schema(schema)
            api_version = f"{crd['spec']['group']}/{version['name']}"
            validators[(api_version, crd["spec"]["names"]["kind"])] = jsonschema.Draft4Validator(
                schema
            )
    return validators


def example_resources() -> list[tuple[str, dict[str, Any]]]:
    """Every voltpack custom resource in examples/, README.md and docs/*.md."""
    found = []
    for path in sorted((REPO / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            found.append((path.name, doc))
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
            for doc in yaml.safe_load_all(block):
                if (
                    isinstance(doc, dict)
                    and (doc.get("kind"), doc.get("apiVersion"))
                    and any(
                        key == (doc.get("apiVersion"), doc.get("kind")) for key in crd_validators()
                    )
                ):
                    found.append((path.name, doc))
    return found


def test_every_example_resource_matches_its_crd() -> None:
    examples = example_resources()
    kinds = {doc["kind"] for _, doc in examples}
    assert kinds == {"GPUJob", "Queue", "PowerBudget", "GPUNode", "Topology", "InferenceService"}
    assert any(source == "README.md" for source, _ in examples)
    for source, doc in examples:
        validator = crd_validators()[(doc["apiVersion"], doc["kind"])]
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(doc)]
        assert not errors, f"{source} {doc['kind']} {doc['metadata']['name']}: {errors}"


def test_the_example_check_refuses_a_misspelt_field_and_a_wrong_type() -> None:
    (_, job) = next((s, d) for s, d in example_resources() if d["kind"] == "GPUJob")
    validator = crd_validators()[(job["apiVersion"], "GPUJob")]
    typo = copy.deepcopy(job)
    typo["spec"]["gpusPerWroker"] = typo["spec"].pop("gpusPerWorker")
    assert any("gpusPerWroker" in e.message for e in validator.iter_errors(typo))
    wrong = copy.deepcopy(job)
    wrong["spec"]["workers"] = "two"
    assert any(list(e.path) == ["spec", "workers"] for e in validator.iter_errors(wrong))


# --- values.schema.json --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("agent.privilegd=true", "additional properties 'privilegd' not allowed"),
        ("operator.replicas=two", "got string, want integer"),
        ("api.mode=both", "value must be one of 'sidecar', 'deployment', 'disabled'"),
        ("image.tag=latest", "/image/tag"),
        ("operator.resources.limits=null", "/operator/resources"),
        ("schedulerNames=voltpack", "at '/schedulerNames': got string, want array"),
        ("schedulerNames[0]=", "at '/schedulerNames/0': minLength: got 0, want 1"),
        ("schedulerNames={voltpack,voltpack}", "at '/schedulerNames': items at 0 and 1 are equal"),
    ],
)
def test_values_schema_rejects_mistakes(setting: str, message: str) -> None:
    result = run_helm("template", RELEASE, str(CHART), "--set", setting)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("[]", "at '/schedulerNames': minItems: got 0, want 1"),
        ('[voltpack, ""]', "at '/schedulerNames/1': minLength: got 0, want 1"),
    ],
)
def test_the_schema_refuses_no_scheduler_name_and_an_empty_one(
    names: str, message: str, tmp_path: Path
) -> None:
    """An empty list would leave the operator serving nothing the values say; an empty name is
    no schedulerName a pod can have. Both are refused before anything renders."""
    values = tmp_path / "values.yaml"
    values.write_text(f"schedulerNames: {names}\n", encoding="utf-8")
    result = run_helm("template", RELEASE, str(CHART), "-f", str(values))
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr, result.stderr
    assert message in result.stderr, result.stderr


def test_values_yaml_documents_only_keys_the_schema_knows() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(schema).validate(values)
    for case in CASES:
        jsonschema.Draft7Validator(schema).validate(values_of(case))


# --- dashboards, policy, components --------------------------------------------------------------


def test_dashboards_are_configmaps_for_the_grafana_sidecar() -> None:
    maps = [
        m
        for m in of_kind(render("default"), "ConfigMap")
        if m["metadata"]["labels"]["app.kubernetes.io/component"] == "dashboards"
    ]
    shipped = {p.name: p for p in (CHART / "dashboards").glob("*.json")}
    assert len(maps) == len(shipped) == 3
    for configmap in maps:
        assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
        ((key, text),) = configmap["data"].items()
        assert json.loads(text) == json.loads(shipped[key].read_text(encoding="utf-8"))
    other = run_helm(
        "template", RELEASE, str(CHART), "--set", "monitoring.dashboards.label=dash",
        "--set", "monitoring.dashboards.labelValue=yes",
    )  # fmt: skip
    docs = [d for d in yaml.safe_load_all(other.stdout) if d and d["kind"] == "ConfigMap"]
    assert sum(d["metadata"]["labels"].get("dash") == "yes" for d in docs) == 3
    assert not [
        m
        for m in of_kind(render("monitoring-off"), "ConfigMap")
        if "grafana_dashboard" in m["metadata"]["labels"]
    ]
    on = render("monitoring-on")
    assert {
        m["metadata"]["namespace"]
        for m in of_kind(on, "ConfigMap")
        if "grafana_dashboard" in m["metadata"]["labels"]
    } == {"monitoring"}


def test_the_chart_policy_is_the_shipped_default() -> None:
    chart_copy = CHART / "files" / "policy.yaml"
    package_copy = REPO / "voltpack" / "policies" / "examples" / "fgd.yaml"
    assert chart_copy.read_bytes() == package_copy.read_bytes(), (
        "copy voltpack/policies/examples/fgd.yaml to helm/voltpack/files/policy.yaml"
    )


@pytest.mark.parametrize(("case", "name"), [("default", "fgd"), ("custom-policy", "pack-tight")])
def test_the_operator_runs_the_policy_from_its_configmap(
    case: str, name: str, tmp_path: Path
) -> None:
    docs = render(case)
    policy_map = named(docs, "ConfigMap", f"{RELEASE}-voltpack-policy")
    path = tmp_path / "policy.yaml"
    path.write_text(policy_map["data"]["policy.yaml"], encoding="utf-8")
    assert load_policy(path).metadata.name == name
    deployment = named(docs, "Deployment", f"{RELEASE}-voltpack-operator")
    pod = deployment["spec"]["template"]["spec"]
    (operator,) = [c for c in pod["containers"] if c["name"] == "operator"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "policy"]
    assert volume["configMap"]["name"] == policy_map["metadata"]["name"]
    (mount,) = [m for m in operator["volumeMounts"] if m["name"] == "policy"]
    assert f"--policy={mount['mountPath']}/policy.yaml" in operator["args"]
    assert deployment["spec"]["replicas"] == values_of(case)["operator"]["replicas"]


def parse_cli(args: list[str]) -> dict[str, Any]:
    """Parse `voltpack ARGS` with the real command line, without running it."""
    group = typer.main.get_command(app)
    command = group.commands[args[0]]  # type: ignore[attr-defined]
    context = command.make_context(args[0], list(args[1:]))
    return dict(context.params)


def test_the_operator_and_agent_arguments_are_ones_the_cli_accepts() -> None:
    docs = render("default")
    operator = named(docs, "Deployment", f"{RELEASE}-voltpack-operator")
    (container,) = [
        c for c in operator["spec"]["template"]["spec"]["containers"] if c["name"] == "operator"
    ]
    params = parse_cli(container["args"])
    assert params["identity"] == "$(POD_NAME)" and params["namespace"] == "$(POD_NAMESPACE)"
    assert params["metrics_port"] == container["ports"][0]["containerPort"]
    assert params["power"] is True
    agent = named(docs, "DaemonSet", f"{RELEASE}-voltpack-agent")
    spec = agent["spec"]["template"]["spec"]
    params = parse_cli(spec["containers"][0]["args"])
    assert params["publish"] is True and params["actuate"] is True
    assert params["node_name"] == "$(NODE_NAME)" and params["sysfs_root"] == "/host"
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    off = named(render("monitoring-off"), "DaemonSet", f"{RELEASE}-voltpack-agent")
    params = parse_cli(off["spec"]["template"]["spec"]["containers"][0]["args"])
    assert params["actuate"] is False and params["sysfs_root"] == "/"


def api_container(docs: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (w["metadata"]["name"], c)
        for w in workloads(docs)
        for c in w["spec"]["template"]["spec"]["containers"]
        if c["name"] == "api"
    ]
    return found


def test_api_modes() -> None:
    sidecar = render("default")
    owner, container = api_container(sidecar)
    assert owner == f"{RELEASE}-voltpack-operator"
    flags = {arg.split("=")[0] for arg in container["args"][1:]}
    assert container["args"][0] == "api"
    assert flags == {
        "--host", "--port", "--namespace", "--policy-configmap", "--token-file", "--database-url",
        "--scheduler-name",
    }  # fmt: skip
    service = named(sidecar, "Service", f"{RELEASE}-voltpack-api")
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "operator"
    secret = named(sidecar, "Secret", f"{RELEASE}-voltpack-api-token")["data"]
    token = base64.b64decode(secret["token"]).decode()
    assert base64.b64decode(secret["tokens.csv"]).decode() == f"{token},admin,admin\n"

    separate = render("api-deployment")
    owner, container = api_container(separate)
    assert owner == f"{RELEASE}-voltpack-api"
    deployment = named(separate, "Deployment", owner)
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == f"{RELEASE}-voltpack-api"
    service = named(separate, "Service", f"{RELEASE}-voltpack-api")
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "api"
    url = {e["name"]: e for e in container["env"]}["VOLTPACK_DATABASE_URL"]
    assert url["valueFrom"]["secretKeyRef"] == {"name": "voltpack-db", "key": "url"}
    assert not of_kind(separate, "Secret")  # the token comes from the existing Secret
    (token,) = [
        v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "api-token"
    ]
    assert token["secret"]["secretName"] == "voltpack-api-token"

    disabled = render("monitoring-off")
    assert not [
        c
        for w in workloads(disabled)
        for c in w["spec"]["template"]["spec"]["containers"]
        if c["name"] == "api"
    ]
    assert not [s for s in of_kind(disabled, "Service") if s["metadata"]["name"].endswith("-api")]


def scheduler_name_args(docs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """container name -> its --scheduler-name arguments, for the operator and the API."""
    operator = named(docs, "Deployment", f"{RELEASE}-voltpack-operator")
    (container,) = [
        c for c in operator["spec"]["template"]["spec"]["containers"] if c["name"] == "operator"
    ]
    found = {"operator": container["args"], "api": api_container(docs)[1]["args"]}
    return {
        name: [a for a in args if a.startswith("--scheduler-name")] for name, args in found.items()
    }


@pytest.mark.parametrize("mode", ["sidecar", "deployment"])
def test_both_containers_serve_every_scheduler_name(mode: str) -> None:
    """schedulerNames: [voltpack, default-scheduler] gives the operator and the API (a sidecar or
    its own Deployment) one --scheduler-name each, which their command lines take; the default
    is voltpack alone."""
    both = ["--scheduler-name=voltpack", "--scheduler-name=default-scheduler"]
    docs = render("replace-kube-scheduler", "--set", f"api.mode={mode}")
    assert scheduler_name_args(docs) == {"operator": both, "api": both}
    operator = named(docs, "Deployment", f"{RELEASE}-voltpack-operator")
    containers = {
        c["name"]: c
        for w in workloads(docs)
        for c in w["spec"]["template"]["spec"]["containers"]
        if c["name"] in ("operator", "api")
    }
    for container in containers.values():
        assert parse_cli(container["args"])["scheduler_name"] == ["voltpack", "default-scheduler"]
    owner, _ = api_container(docs)
    assert (owner == operator["metadata"]["name"]) == (mode == "sidecar")
    default = render("default", "--set", f"api.mode={mode}")
    assert scheduler_name_args(default) == {
        "operator": ["--scheduler-name=voltpack"],
        "api": ["--scheduler-name=voltpack"],
    }


def test_notes_name_the_served_schedulers() -> None:
    default = run_helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=client")
    assert default.returncode == 0, default.stderr
    assert "pods whose schedulerName is `voltpack`." in default.stdout
    assert "Replacing kube-scheduler" not in default.stdout
    both = run_helm(
        "install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=client",
        "-f", str(CHART / "ci" / "replace-kube-scheduler-values.yaml"),
    )  # fmt: skip
    assert both.returncode == 0, both.stderr
    assert "pods whose schedulerName is `voltpack` or `default-scheduler`." in both.stdout
    assert "kube-scheduler,\n  which must not run" in both.stdout


def test_notes_explain_the_privileged_trade_off() -> None:
    default = run_helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=client")
    assert default.returncode == 0, default.stderr
    assert "agent.privileged is false" in default.stdout
    assert "Set agent.privileged=true" in default.stdout
    privileged = run_helm(
        "install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=client",
        "-f", str(CHART / "ci" / "agent-privileged-values.yaml"),
    )  # fmt: skip
    assert privileged.returncode == 0, privileged.stderr
    assert "agent.privileged is false" not in privileged.stdout


# --- the Dockerfile (no Docker engine here: linted, not built) ----------------------------------


def test_dockerfile_runs_as_the_charts_non_root_user_from_pinned_images() -> None:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    instructions = [line.split(None, 1) for line in text.splitlines() if line and line[0] != "#"]
    instructions = [i for i in instructions if i[0].isupper()]
    # the base is a build argument (make image passes the Debian base it built); its default,
    # what `docker build .` uses, is a pinned image
    defaults = dict(
        args.strip().split("=", 1)
        for keyword, args in instructions
        if keyword == "ARG" and "=" in args
    )
    bases = [args.split()[0] for keyword, args in instructions if keyword == "FROM"]
    bases = [re.sub(r"\$\{(\w+)\}", lambda m: defaults[m[1]], b) for b in bases]
    assert bases and all(":" in b and not b.endswith(":latest") for b in bases), bases
    users = [args.strip() for keyword, args in instructions if keyword == "USER"]
    assert users[-1] == f"{UID}:{UID}"
    assert instructions[-1][0] == "CMD" or instructions[-1][0] == "ENTRYPOINT"
    assert ["ENTRYPOINT", '["voltpack"]'] in [[k, a.strip()] for k, a in instructions]
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run(
        [str(hadolint), str(REPO / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
