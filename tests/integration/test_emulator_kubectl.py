"""`kubectl` (a real binary, as a subprocess) against the emulator: get, apply, patch, delete."""

from __future__ import annotations

import json

from kubernetes import client

from tests.integration.conftest import Kubectl, binding, pod_manifest, wait_for
from tests.integration.test_emulator_crd import WIDGET_CRD

CRD_YAML = json.dumps(WIDGET_CRD)

WIDGET_YAML = """\
apiVersion: example.voltpack.io/v1
kind: Widget
metadata:
  name: from-kubectl
spec:
  size: {size}
"""


def test_kubectl_get_nodes_and_pods_in_all_namespaces(
    kubectl: Kubectl, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod("default", pod_manifest("web-0", gpus=1))
    core.create_namespaced_binding(
        "default", binding("web-0", "gpu-a100-0"), _preload_content=False
    )
    core.create_namespaced_pod("kube-system", pod_manifest("agent-0"))
    wait_for(
        lambda: core.read_namespaced_pod("web-0", "default").status.phase == "Running",
        what="web-0 to run",
    )
    lines = kubectl("get", "nodes,pods", "-A").stdout.splitlines()
    rows = [line.split() for line in lines]
    assert rows[0][:3] == ["NAME", "STATUS", "ROLES"]
    nodes = [row[:2] for row in rows if row and row[0].startswith("node/")]
    assert nodes == [
        ["node/cpu-0", "Ready"],
        ["node/gpu-a100-0", "Ready"],
        ["node/gpu-a100-1", "Ready"],
        ["node/gpu-v100-0", "Ready"],
    ]
    pods = {row[1]: row for row in rows if row and row[0] in ("default", "kube-system")}
    assert pods["pod/web-0"][0] == "default" and pods["pod/web-0"][3] == "Running"
    assert pods["pod/agent-0"][0] == "kube-system" and pods["pod/agent-0"][3] == "Pending"
    header = next(line for line in lines if "NAMESPACE" in line)
    assert header.split()[:4] == ["NAMESPACE", "NAME", "READY", "STATUS"]
    wide = kubectl("get", "pods", "-o", "wide").stdout
    assert "gpu-a100-0" in wide and "10.244." in wide


def test_kubectl_apply_custom_resources_and_get_them(kubectl: Kubectl) -> None:
    created = kubectl("apply", "-f", "-", input_text=CRD_YAML)
    assert "customresourcedefinition.apiextensions.k8s.io/widgets.example.voltpack.io created" in (
        created.stdout
    )
    kubectl("wait", "--for=condition=Established", "crd/widgets.example.voltpack.io")
    first = kubectl("apply", "-f", "-", input_text=WIDGET_YAML.format(size=3))
    assert "widget.example.voltpack.io/from-kubectl created" in first.stdout
    again = kubectl("apply", "-f", "-", input_text=WIDGET_YAML.format(size=3))
    assert "unchanged" in again.stdout
    changed = kubectl("apply", "-f", "-", input_text=WIDGET_YAML.format(size=5))
    assert "configured" in changed.stdout
    table = kubectl("get", "widgets").stdout.splitlines()
    assert table[0].split() == ["NAME", "SIZE", "READY"]
    assert table[1].split()[:2] == ["from-kubectl", "5"]
    assert kubectl("get", "wd", "from-kubectl", "-o", "jsonpath={.spec.color}").stdout == "blue"
    obj = kubectl.json("get", "widget", "from-kubectl")
    assert obj["metadata"]["generation"] == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]


def test_kubectl_apply_reports_schema_violations(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", input_text=CRD_YAML)
    kubectl("wait", "--for=condition=Established", "crd/widgets.example.voltpack.io")
    result = kubectl("apply", "-f", "-", input_text=WIDGET_YAML.format(size=0), check=False)
    assert result.returncode != 0
    assert "spec.size" in result.stderr and "greater than or equal to 1" in result.stderr
    unknown = WIDGET_YAML.format(size=1) + "  bogus: 1\n"
    strict = kubectl("apply", "-f", "-", input_text=unknown, check=False)
    assert strict.returncode != 0 and 'unknown field "spec.bogus"' in strict.stderr


def test_kubectl_apply_patch_label_and_delete_core_objects(
    kubectl: Kubectl, core: client.CoreV1Api
) -> None:
    config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: '1'\n"
    assert "configmap/settings created" in kubectl("apply", "-f", "-", input_text=config).stdout
    updated = config.replace("a: '1'", "a: '2'\n  b: '3'")
    assert "configured" in kubectl("apply", "-f", "-", input_text=updated).stdout
    assert core.read_namespaced_config_map("settings", "default").data == {"a": "2", "b": "3"}
    kubectl("label", "configmap", "settings", "team=ml")
    kubectl("patch", "configmap", "settings", "--type=merge", "-p", '{"data":{"c":"4"}}')
    kubectl(
        "patch",
        "configmap",
        "settings",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/data/a"}]',
    )
    kubectl("patch", "configmap", "settings", "-p", '{"data":{"d":"5"}}')
    cm = core.read_namespaced_config_map("settings", "default")
    assert cm.metadata.labels == {"team": "ml"}
    assert cm.data == {"b": "3", "c": "4", "d": "5"}
    assert kubectl("get", "cm", "-l", "team=ml", "-o", "name").stdout.split() == [
        "configmap/settings"
    ]
    kubectl("delete", "configmap", "settings")
    assert kubectl("get", "cm", "-o", "name").stdout.strip() == ""
    missing = kubectl("get", "cm", "settings", check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr


def test_kubectl_field_selector_and_json_output(kubectl: Kubectl, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("on-v100", node_name="gpu-v100-0"))
    core.create_namespaced_pod("default", pod_manifest("elsewhere"))
    listed = kubectl.json("get", "pods", "--field-selector", "spec.nodeName=gpu-v100-0")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["on-v100"]
    nodes = kubectl.json("get", "nodes", "-l", "voltpack.io/gpu-model=A100")
    assert sorted(n["metadata"]["name"] for n in nodes["items"]) == ["gpu-a100-0", "gpu-a100-1"]
    assert nodes["items"][0]["status"]["capacity"]["nvidia.com/gpu"] == "8"


def test_kubectl_imperative_create_sends_protobuf(kubectl: Kubectl, core: client.CoreV1Api) -> None:
    assert "namespace/team-b created" in kubectl("create", "namespace", "team-b").stdout
    kubectl("create", "configmap", "conf", "-n", "team-b", "--from-literal=mode=fast")
    kubectl("create", "secret", "generic", "token", "-n", "team-b", "--from-literal=key=s3cr3t")
    assert core.read_namespaced_config_map("conf", "team-b").data == {"mode": "fast"}
    secret = core.read_namespaced_secret("token", "team-b")
    assert secret.type == "Opaque" and secret.data == {"key": "czNjcjN0"}
    kubectl("delete", "namespace", "team-b")
    assert "team-b" not in kubectl("get", "namespaces", "-o", "name").stdout
