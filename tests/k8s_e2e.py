r"""Kubernetes' own end-to-end tests (e2e.test, `make e2e-test`) against the tests' real control
plane (tests/k8s_control_plane.py) with kwok nodes, and their JUnit report read back per test.

    with e2e_control_plane(scheduler="kube-scheduler") as plane:
        create_kwok_nodes(plane, 3)
        run = run_e2e(plane, [r"\[sig-scheduling\] SchedulerPredicates "], report_dir=tmp)
        run.results["[sig-scheduling] SchedulerPredicates [Serial] validates ..."].status

The control plane runs kube-controller-manager with `E2E_CONTROLLERS` (what the e2e framework
and the tests wait for: a test namespace's deletion, ReplicaSets and ReplicationControllers and
their garbage collection, a pre-bound PersistentVolumeClaim, NoExecute taint eviction) and, as
the scheduler, either kube-scheduler (the reference) or nothing, for voltpack's operator to
schedule as `default-scheduler` (`voltpack_operator`). The nodes get what the framework
expects of a kubelet's (`create_kwok_nodes`; kwok's extra Stage `KWOK_KUBELET_ALLOCATABLE`).
docs/k8s-conformance.md describes the run, its focus and what each test needs.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kubernetes import client

from tests.integration.backends import RealCluster
from tests.k8s_control_plane import (
    KWOK_NODE_ANNOTATION,
    KWOK_STAGES,
    REPO,
    ControlPlane,
    bin_dir,
    missing_binaries,
    running_control_plane,
    stop_process,
)

KWOK_KUBELET_ALLOCATABLE = Path(__file__).with_name("kwok_kubelet_allocatable.yaml")
"""kwok's extra Stage for the e2e run: a node's allocatable follows its capacity, as a kubelet's."""
E2E_TEST_ENV = "VOLTPACK_E2E_TEST"
"""The e2e.test binary to run, if not `e2e.test` beside the control plane's binaries."""
SCHEDULERS = ("kube-scheduler", "voltpack")
"""Who places the e2e tests' pods: kube-scheduler (the reference) or voltpack's operator."""
E2E_CONTROLLERS = (
    "namespace-controller",  # the framework deletes each test's namespace, the next waits
    "garbage-collector-controller",  # DeleteRCAndWaitForGC, a deleted ReplicaSet's pods
    "replicaset-controller",  # runPauseRS, the preemption path's ReplicaSets
    "replicationcontroller-controller",  # the SchedulerPredicates' AfterEach looks for its RC
    "persistentvolume-binder-controller",  # the pre-bound PV/PVC of the PVC node-affinity test
    "taint-eviction-controller",  # NoExecuteTaintManager: evicts pods off NoExecute taints
    # not for DaemonSets (the focus has none): it adds the pod informer's spec.nodeName index,
    # without which the taint-eviction controller finds no pods on a tainted node ("Index with
    # name spec.nodeName does not exist"; only it and the node-lifecycle controller add it)
    "daemonset-controller",
)
"""kube-controller-manager's controllers the e2e run needs (no node-lifecycle controller: it
would taint kwok's nodes, which send no heartbeats, unreachable)."""
KWOK_NODE_CAPACITY = {
    "cpu": "4",
    "memory": "16Gi",
    "ephemeral-storage": "100Gi",
    "pods": "110",
}
"""Each kwok node's capacity and allocatable: a small real node's, with the ephemeral storage
the local-storage predicate test divides among its pods."""
E2E_TIMEOUT_S = 3600.0
OPERATOR_IDENTITY = "voltpack-e2e"
E2E_POLICY = Path(__file__).with_name("e2e_policy.yaml")
"""The operator's policy in the e2e run: least-allocated scores, preemption without delay."""
OPERATOR_NAMESPACE = "voltpack-system"
"""Where the operator keeps its leader Lease."""
DEFAULT_E2E_FLAGS = (
    "--provider=skeleton",
    # no ServiceAccount controller runs (the ServiceAccount admission plugin is off)
    "--e2e-verify-service-account=false",
    "--ginkgo.no-color",
    "--ginkgo.v",
    # what the e2e framework would otherwise try to collect from nodes on a failure
    "--dump-logs-on-failure=false",
    "--disable-log-dump",
)


def e2e_binary() -> Path:
    """The e2e.test to run: $VOLTPACK_E2E_TEST, else beside the control plane's binaries."""
    return Path(os.environ.get(E2E_TEST_ENV) or bin_dir() / "e2e.test")


def missing_e2e(*, scheduler: str = "kube-scheduler") -> list[str]:
    """What a run with `scheduler` needs that is not built (empty when all is)."""
    missing = missing_binaries(kwok=True, controllers=True, scheduler=scheduler == "kube-scheduler")
    binary = e2e_binary()
    if not os.access(binary, os.X_OK):
        missing.append(str(binary))
    return missing


@contextlib.contextmanager
def e2e_control_plane(*, scheduler: str = "kube-scheduler") -> Iterator[ControlPlane]:
    """etcd, kube-apiserver, kwok and kube-controller-manager (`E2E_CONTROLLERS`), plus
    kube-scheduler when `scheduler` is "kube-scheduler" (for "voltpack" no scheduler runs:
    start the operator with `voltpack_operator`)."""
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler {scheduler!r}: one of {SCHEDULERS}")
    with running_control_plane(
        kwok=True,
        controllers=True,
        controller_names=E2E_CONTROLLERS,
        scheduler=scheduler == "kube-scheduler",
        kwok_stages=(KWOK_STAGES, KWOK_KUBELET_ALLOCATABLE),
    ) as plane:
        yield plane


def kwok_node(
    name: str, internal_ip: str, capacity: dict[str, str] | None = None
) -> dict[str, object]:
    """A Node object kwok manages (`KWOK_NODE_ANNOTATION`), labelled as a kubelet labels its
    node; its status (kept on create) gives `capacity` as capacity and allocatable and the
    addresses a kubelet reports (the hostPort tests read the InternalIP)."""
    resources = dict(capacity or KWOK_NODE_CAPACITY)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
        },
        "status": {
            "capacity": resources,
            "allocatable": dict(resources),
            "addresses": [
                {"type": "InternalIP", "address": internal_ip},
                {"type": "Hostname", "address": name},
            ],
        },
    }


NODE_DAEMONS = ("kube-proxy", "fluentd-elasticsearch", "node-problem-detector")
"""The kube-system pods the e2e framework wants Running on every schedulable node before the
preemption and NoExecute specs (`e2enode.WaitForTotalHealthy`, regular expressions
`.*kube-proxy.*`, ...): without them each such spec waits its full minute first."""


NO_SCHEDULER = "e2e-no-scheduler"
"""The schedulerName of the daemons' stand-ins: no scheduler takes them, the harness binds them."""


def node_daemon_pod(name: str) -> dict[str, object]:
    """A stand-in for one of a node's system daemons in kube-system, asking for nothing, for
    `create_kwok_nodes` to bind (kwok runs it)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "kube-system", "labels": {"k8s-app": name}},
        "spec": {
            "schedulerName": NO_SCHEDULER,
            "containers": [{"name": "daemon", "image": "registry.k8s.io/pause:3.10"}],
            "tolerations": [{"operator": "Exists"}],
        },
    }


def bind_pod(core: client.CoreV1Api, namespace: str, name: str, node: str) -> None:
    """Binds a pod through `pods/binding`, as a scheduler does: the apiserver then sets its
    PodScheduled condition, which the e2e framework demands of every pod on a node (a pod
    created with `spec.nodeName` has none: a kubelet would add it, kwok does not)."""
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}  # fmt: skip
    core.create_namespaced_binding(namespace, body, _preload_content=False)


def create_kwok_nodes(
    plane: ControlPlane, count: int, *, prefix: str = "kwok-node", timeout_s: float = 60.0
) -> list[str]:
    """`count` kwok nodes (`kwok_node`, InternalIPs 10.240.0.1, ...) with their
    `NODE_DAEMONS` pods, returned once kwok has made each node Ready and run each pod."""
    names = [f"{prefix}-{i}" for i in range(count)]
    with plane.api_client() as api:
        core = client.CoreV1Api(api)
        for index, name in enumerate(names):
            core.create_node(kwok_node(name, f"10.240.0.{index + 1}"))
            for daemon in NODE_DAEMONS:
                pod = node_daemon_pod(f"{daemon}-{name}")
                core.create_namespaced_pod("kube-system", pod)
                bind_pod(core, "kube-system", f"{daemon}-{name}", name)
        deadline = time.monotonic() + timeout_s
        while True:
            ready = {
                node.metadata.name
                for node in core.list_node().items
                if any(
                    c.type == "Ready" and c.status == "True" for c in node.status.conditions or []
                )
            }
            running = {
                pod.metadata.name
                for pod in core.list_namespaced_pod("kube-system").items
                if pod.status.phase == "Running"
            }
            daemons = {f"{daemon}-{name}" for daemon in NODE_DAEMONS for name in names}
            if set(names) <= ready and daemons <= running:
                return names
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"kwok made {sorted(ready)} Ready, not all of {names}, or has not run "
                    f"{sorted(daemons - running)}"
                )
            time.sleep(0.2)


@dataclass(frozen=True)
class CaseResult:
    """One spec of a JUnit report."""

    name: str
    """The spec's full text, e.g. `[sig-scheduling] SchedulerPredicates [Serial] validates ...`
    (without Ginkgo's `[It]` and its label list)."""
    status: str
    """Ginkgo's state: passed, failed, skipped, pending, panicked, interrupted, timedout..."""
    message: str = ""
    """The failure (or skip) message and its location, empty when passed."""
    time_s: float = 0.0


@dataclass
class E2ERun:
    """A finished e2e.test run."""

    argv: list[str]
    returncode: int
    duration_s: float
    log: Path
    report: Path
    results: dict[str, CaseResult]
    """Per spec name (`CaseResult.name`), the suite's setup nodes left out."""

    def log_tail(self, lines: int = 60) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else "(no log)"
        return "\n".join(text.splitlines()[-lines:])


_LEAF_TYPE = re.compile(r"^\[(It|BeforeSuite|AfterSuite|SynchronizedBeforeSuite|"
                        r"SynchronizedAfterSuite|ReportBeforeSuite|ReportAfterSuite|"
                        r"DeferCleanup \(Suite\))\]\s*")  # fmt: skip
_SUITE_NODES = {"BeforeSuite", "AfterSuite", "SynchronizedBeforeSuite", "SynchronizedAfterSuite",
                "ReportBeforeSuite", "ReportAfterSuite", "DeferCleanup (Suite)"}  # fmt: skip


def spec_name(junit_name: str) -> tuple[str, str]:
    """(leaf node type, spec text) of a Ginkgo JUnit testcase name, `[It] TEXT [label, ...]`:
    the labels are dropped when each is also an inline `[label]` tag of TEXT (as the e2e
    framework writes every label: `[Serial]`, `[Conformance]`, `[sig-scheduling]`)."""
    leaf = ""
    found = _LEAF_TYPE.match(junit_name)
    if found:
        leaf = found[1]
        junit_name = junit_name[found.end() :]
    labels = re.search(r"\s\[([^\[\]]+)\]$", junit_name)
    if labels:
        text = junit_name[: labels.start()]
        if all(f"[{label}]" in text for label in labels[1].split(", ")):
            junit_name = text
    return leaf, junit_name.strip()


def parse_junit(path: Path) -> tuple[dict[str, CaseResult], list[CaseResult]]:
    """The specs of Ginkgo's JUnit report at `path` by name, and its suite-level nodes
    (BeforeSuite, ReportAfterSuite, ...) apart: a failed setup fails every spec."""
    specs: dict[str, CaseResult] = {}
    suite: list[CaseResult] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        leaf, name = spec_name(case.get("name", ""))
        status = case.get("status") or "passed"
        message = ""
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is not None:
                if tag != "skipped" and status == "passed":
                    status = "failed"
                message = " ".join(
                    part for part in (element.get("message", ""), element.text or "") if part
                ).strip()
                break
        result = CaseResult(name, status, message, float(case.get("time") or 0.0))
        if leaf in _SUITE_NODES:
            suite.append(result)
        else:
            specs[name] = result
    return specs, suite


def e2e_argv(
    kubeconfig: Path | None,
    focus: Sequence[str],
    skip: Sequence[str] = (),
    *,
    report: Path,
    dry_run: bool = False,
    timeout_s: float = E2E_TIMEOUT_S,
    extra: Sequence[str] = (),
) -> list[str]:
    """e2e.test's command line: each of `focus` (regular expressions, any may match) and
    `skip` a --ginkgo.focus / --ginkgo.skip, the JUnit report at `report`."""
    argv = [str(e2e_binary()), *DEFAULT_E2E_FLAGS]
    if kubeconfig is not None:
        argv += ["--kubeconfig", str(kubeconfig)]
    argv += [f"--ginkgo.focus={pattern}" for pattern in focus]
    argv += [f"--ginkgo.skip={pattern}" for pattern in skip]
    argv += [f"--ginkgo.junit-report={report}", f"--ginkgo.timeout={int(timeout_s)}s"]
    if dry_run:
        argv.append("--ginkgo.dry-run")
    return argv + list(extra)


def run_e2e(
    plane: ControlPlane | None,
    focus: Sequence[str],
    skip: Sequence[str] = (),
    *,
    report_dir: Path,
    dry_run: bool = False,
    timeout_s: float = E2E_TIMEOUT_S,
    extra: Sequence[str] = (),
    echo: IO[str] | None = None,
) -> E2ERun:
    """Runs e2e.test against `plane` (None with `dry_run`: only which specs the focus selects)
    and reads its JUnit report. Its output goes to `report_dir/e2e.log` (and to `echo`)."""
    report_dir.mkdir(parents=True, exist_ok=True)
    report = report_dir / "junit.xml"
    log = report_dir / "e2e.log"
    argv = e2e_argv(
        plane.kubeconfig if plane else None, focus, skip, report=report, dry_run=dry_run,
        timeout_s=timeout_s, extra=extra,
    )  # fmt: skip
    started = time.monotonic()
    with log.open("w", buffering=1) as out:  # line-buffered: the log can be followed
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd=report_dir, text=True, errors="replace",
        )  # fmt: skip
        assert process.stdout is not None
        for line in process.stdout:
            out.write(line)
            if echo is not None:
                echo.write(line)
        # Ginkgo's own timeout ends the run first; this only guards against a hung binary
        returncode = process.wait(timeout=timeout_s + 120)
    duration = time.monotonic() - started
    results = parse_junit(report)[0] if report.exists() else {}
    return E2ERun(argv, returncode, duration, log, report, results)


def selected_specs(
    focus: Sequence[str], skip: Sequence[str] = (), *, report_dir: Path
) -> list[str]:
    """The names of the specs `focus` and `skip` select (a Ginkgo dry run: no cluster)."""
    run = run_e2e(None, focus, skip, report_dir=report_dir, dry_run=True)
    if not run.report.exists():
        raise RuntimeError(f"e2e.test --ginkgo.dry-run wrote no report:\n{run.log_tail()}")
    return sorted(name for name, result in run.results.items() if result.status != "skipped")


def voltpack_operator_argv(identity: str = OPERATOR_IDENTITY) -> list[str]:
    """voltpack's operator as the cluster's scheduler: it places the pods whose schedulerName
    is `default-scheduler` (every e2e pod) under `E2E_POLICY`, without power management,
    metrics or a policy ConfigMap. No `--server`: that flag gives a client without credentials
    or CA (for the emulator), so the operator reads the plane's admin kubeconfig (KUBECONFIG)."""
    return [
        sys.executable, "-m", "voltpack", "operator", "--identity", identity,
        "--namespace", OPERATOR_NAMESPACE, "--scheduler-name", "default-scheduler",
        "--policy", str(E2E_POLICY), "--no-power", "--metrics-port", "-1",
        "--policy-configmap", "",
    ]  # fmt: skip


@contextlib.contextmanager
def voltpack_operator(plane: ControlPlane, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The chart's CRDs applied and the Lease namespace made, then the operator
    (`voltpack_operator_argv`) running against `plane`, stopped on exit; its output in `log`."""
    cluster = RealCluster(plane)
    cluster.install_crds()
    cluster.ensure_namespace(OPERATOR_NAMESPACE)
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "PYTHONPATH": str(REPO)}
    with log.open("wb") as out:
        process = subprocess.Popen(
            voltpack_operator_argv(), stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, env=env, cwd=REPO,
        )  # fmt: skip
        try:
            yield process
        finally:
            stop_process(process, 15)
