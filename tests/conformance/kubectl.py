"""Common kubectl commands run against both backends; exit code and output compared.

The HTTP corpus already holds kubectl's requests; these steps run the real `kubectl` binary so
what a user sees (tables, apply's created/unchanged/configured, errors) is compared too. They run
after the corpus (its namespace, CRDs, pods and GPUJobs exist). Output is normalised: the server
URL, ages (`5s`), uids and resourceVersions.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.conformance.corpus import NS
from tests.conformance.replay import Backend

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
_AGE = re.compile(r"(?<![\w.-])\d+(?:[smhd]\d*)+(?![\w.-])")
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_RV = re.compile(r'(resourceVersion["=:\s]+)"?\d+"?')

CONFIGMAP = f"""\
apiVersion: v1
kind: ConfigMap
metadata:
  name: from-kubectl
  namespace: {NS}
data:
  k: "{{value}}"
"""
BAD_GPUJOB = f"""\
apiVersion: voltpack.io/v1alpha1
kind: GPUJob
metadata:
  name: too-few
  namespace: {NS}
spec:
  queue: research
  workers: 1
  minWorkers: 2
  template:
    spec:
      containers: [{{name: t, image: t:1}}]
"""


@dataclass(frozen=True)
class KubectlStep:
    name: str
    args: tuple[str, ...]
    stdin: str | None = None
    known: str = ""
    """Why a difference in this command's output does not matter (empty: none may differ)."""


KUBECTL_STEPS: tuple[KubectlStep, ...] = (
    KubectlStep("get-pods-names", ("get", "pods", "-n", NS, "-o", "name")),
    KubectlStep("get-pods-table", ("get", "pods", "-n", NS)),
    KubectlStep("get-gpujobs-table", ("get", "gpujobs", "-A")),
    KubectlStep("get-gpunode-jsonpath",
                ("get", "gpunode", "gpu-node-0", "-o", "jsonpath={.spec.gpus[0].powerLimitW}")),
    KubectlStep("get-ns-labels", ("get", "ns", NS, "-o", "jsonpath={.metadata.labels}")),
    KubectlStep("get-missing", ("get", "pod", "nobody", "-n", NS)),
    KubectlStep("wait-crd", ("wait", "--for=condition=Established",
                             "crd/gpujobs.voltpack.io", "--timeout=20s")),
    KubectlStep("apply-create", ("apply", "-f", "-"), CONFIGMAP.format(value="1")),
    KubectlStep("apply-unchanged", ("apply", "-f", "-"), CONFIGMAP.format(value="1")),
    KubectlStep("apply-configured", ("apply", "-f", "-"), CONFIGMAP.format(value="2")),
    KubectlStep("apply-server-side-conflict",
                ("apply", "--server-side", "--field-manager=conformance", "-f", "-"),
                CONFIGMAP.format(value="3"),
                known="the emulator's server-side apply keeps no field managers (see "
                      "voltpack/emulator/__init__.py), so it cannot see that kubectl's "
                      "client-side apply owns .data.k and applies where kube-apiserver answers "
                      "409 Conflict; voltpack never uses server-side apply"),
    KubectlStep("apply-server-side-forced",
                ("apply", "--server-side", "--force-conflicts", "--field-manager=conformance",
                 "-f", "-"), CONFIGMAP.format(value="3")),
    KubectlStep("apply-cel-violation", ("apply", "-f", "-"), BAD_GPUJOB),
    KubectlStep("patch-merge", ("patch", "configmap", "from-kubectl", "-n", NS,
                                "--type", "merge", "-p", '{"data":{"k":"4"}}')),
    KubectlStep("label", ("label", "configmap", "from-kubectl", "-n", NS, "tier=gold")),
    KubectlStep("get-by-label", ("get", "cm", "-n", NS, "-l", "tier=gold", "-o", "name")),
    KubectlStep("delete", ("delete", "configmap", "from-kubectl", "-n", NS)),
    KubectlStep("delete-missing", ("delete", "configmap", "from-kubectl", "-n", NS)),
    KubectlStep("auth-can-i", ("auth", "can-i", "create", "gpujobs.voltpack.io", "-n", NS),
                known="kubectl sends no bearer token to an http:// server, so the emulator "
                      "answers for system:anonymous (`kubectl auth whoami` says so) where the "
                      "real apiserver, over https, answers for the admin; the same review with "
                      "the token (self-sar in the HTTP corpus) answers alike"),
    KubectlStep("api-resources-voltpack", ("api-resources", "--api-group=voltpack.io")),
)  # fmt: skip


@dataclass(frozen=True)
class KubectlAnswer:
    code: int
    stdout: str
    stderr: str


def normalise(text: str, url: str) -> str:
    text = text.replace(url, "<server>")
    text = _UID.sub("<uid>", text)
    text = _RV.sub(r"\1<rv>", text)
    text = _AGE.sub("<age>", text)
    return "\n".join(" ".join(line.split()) for line in text.strip().splitlines())


def _kubeconfig(backend: Backend, home: Path) -> Path:
    cluster: dict[str, object] = {"server": backend.url}
    if backend.ca_file:
        cluster["certificate-authority"] = backend.ca_file
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": backend.token}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = home / "kubeconfig"
    path.write_text(json.dumps(config))
    return path


def run(
    backend: Backend, steps: tuple[KubectlStep, ...] = KUBECTL_STEPS
) -> dict[str, KubectlAnswer]:
    """Runs each kubectl step against `backend` (own kubeconfig and discovery cache)."""
    answers = {}
    with tempfile.TemporaryDirectory(prefix="voltpack-kubectl-") as tmp:
        home = Path(tmp)
        env = {**os.environ, "KUBECONFIG": str(_kubeconfig(backend, home)), "HOME": tmp}
        for step in steps:
            result = subprocess.run(
                [KUBECTL, "--cache-dir", str(home / "cache"), "--request-timeout", "20s",
                 *step.args],
                input=step.stdin, capture_output=True, text=True, env=env, timeout=60,
                check=False,
            )  # fmt: skip
            answers[step.name] = KubectlAnswer(
                result.returncode,
                normalise(result.stdout, backend.url),
                normalise(result.stderr, backend.url),
            )
    return answers


def differences(step: KubectlStep, real: KubectlAnswer, emulator: KubectlAnswer) -> list[str]:
    """What differs between the two runs of one command (exit code, stdout, stderr)."""
    found = []
    for what in ("code", "stdout", "stderr"):
        a, b = getattr(real, what), getattr(emulator, what)
        if a != b:
            found.append(f"kubectl {' '.join(step.args)}: {what}: real={a!r} emulator={b!r}")
    return found
