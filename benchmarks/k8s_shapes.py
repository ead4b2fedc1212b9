"""kube-scheduler's own benchmark workloads (scheduler_perf), read at run time from the pinned
k8s.io/kubernetes module in Go's module cache, as Node and Pod bodies for both schedulers.

`$(go env GOMODCACHE)/k8s.io/kubernetes@<pin>/test/integration/scheduler_perf/` (the pin of
tools/kubernetes/go.mod, the version `make k8s` builds the binaries from) holds each test case
in a `performance-config.yaml`: a `workloadTemplate` of operations (createNodes,
createNamespaces, createPods; the one with `collectMetrics: true` is what scheduler_perf times)
and `workloads` giving its parameters per size (`5000Nodes`: initNodes, initPods, measurePods,
...). The templates it names (`../templates/*.yaml`, relative to the config) give the node and
pod specs. Nothing is copied into this repository and nothing is downloaded: a missing module is
an error that says how to fetch it.

What scheduler_perf does and this module does likewise (test/integration/scheduler_perf,
v1.34.4):

- every node gets the label `kubernetes.io/hostname` = its name (node_util.go, PrepareNodes);
  a `labelNodePrepareStrategy` gives its label values round robin (test/utils/runners.go);
  a createNodes without `nodeTemplatePath` uses `makeBaseNode` (util.go: pods 110, cpu 4,
  memory 32Gi, the capacity of templates/node-default.yaml, which is read instead);
- a createPods without `namespace` puts its pods in `namespace-<op index>`
  (runCreatePodsOp), without `podTemplatePath` uses the test case's `defaultPodTemplatePath`;
- templates are decoded by sigs.k8s.io/yaml into Go structs, whose JSON field names match
  case-insensitively: templates/pod-with-node-inclusion-policy.yaml spells
  `NodeAffinityPolicy`/`NodeTaintsPolicy`, which the Go decoder takes as `nodeAffinityPolicy`/
  `nodeTaintsPolicy` and kube-apiserver (case-sensitive) would drop; such keys are respelled
  here (each one is listed in `Shape.notes`).

Unlike scheduler_perf: names are the template's `generateName` plus an index (deterministic,
so both schedulers get the same objects), and nodes get kwok's annotation instead of the
template's Ready condition (kwok makes them Ready) and `allocatable` = `capacity` when the
template gives none (what kube-apiserver's defaulting and makeBaseNode give). A workload's
`featureGates` are recorded, not applied: both schedulers run v1.34.4's defaults (the gates these
workloads name, SchedulerQueueingHints and NodeInclusionPolicyInPodTopologySpread, are on by
default; queueing hints only change how pods that failed are retried).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
GO_MOD = REPO / "tools" / "kubernetes" / "go.mod"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
HOSTNAME_LABEL = "kubernetes.io/hostname"
DEFAULT_WORKLOAD = "5000Nodes"

SCHEDULER_PERF_SHAPES: dict[str, tuple[str, str]] = {
    "basic": ("misc/performance-config.yaml", "SchedulingBasic"),
    "node-affinity": ("affinity/performance-config.yaml", "SchedulingNodeAffinity"),
    "pod-anti-affinity": ("affinity/performance-config.yaml", "SchedulingPodAntiAffinity"),
    "topology-spreading": ("topology_spreading/performance-config.yaml", "TopologySpreading"),
    "taints": (
        "topology_spreading/performance-config.yaml",
        "SchedulingWithNodeInclusionPolicy",
    ),
    "pod-affinity": ("affinity/performance-config.yaml", "SchedulingPodAffinity"),
    "preferred-pod-affinity": (
        "affinity/performance-config.yaml",
        "SchedulingPreferredPodAffinity",
    ),
    "preferred-pod-anti-affinity": (
        "affinity/performance-config.yaml",
        "SchedulingPreferredPodAntiAffinity",
    ),
    "preferred-topology-spreading": (
        "topology_spreading/performance-config.yaml",
        "PreferredTopologySpreading",
    ),
}
"""Shape name -> (config relative to scheduler_perf/, test case name). `taints` is the only
test case of these configs whose nodes carry taints (templates/node-with-taint.yaml: 1,000 of
5,000 nodes `foo:NoSchedule`; its pods spread over hostnames honouring taints)."""

SPREAD_FIELDS = ("maxSkew", "topologyKey", "whenUnsatisfiable", "labelSelector", "minDomains",
                 "nodeAffinityPolicy", "nodeTaintsPolicy", "matchLabelKeys")  # fmt: skip
"""core/v1 TopologySpreadConstraint's JSON names, for the case-insensitive respelling."""


class ShapeSourceError(RuntimeError):
    """scheduler_perf's configs cannot be read (no Go, module not in the cache, a test case or
    an operation this reader does not know)."""


@dataclass
class Shape:
    """One workload: the nodes, the namespaces, the pods bound before the clock starts and the
    pods it times, for one scheduler name."""

    name: str
    nodes: list[dict[str, Any]]
    init_pods: list[dict[str, Any]]
    measure_pods: list[dict[str, Any]]
    namespaces: list[str] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)
    """Where it was read from: config, test case, workload, params, templates, feature gates."""
    notes: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        return {
            "shape": self.name,
            "nodes": len(self.nodes),
            "init_pods": len(self.init_pods),
            "measure_pods": len(self.measure_pods),
            "namespaces": self.namespaces,
            **self.source,
            "notes": self.notes,
        }


def pinned_version(go_mod: Path = GO_MOD) -> str:
    """The k8s.io/kubernetes version tools/kubernetes/go.mod pins (e.g. v1.34.4)."""
    found = re.search(r"^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v\S+)", go_mod.read_text(), re.M)
    if found is None:
        raise ShapeSourceError(f"{go_mod} does not require k8s.io/kubernetes")
    return found[1]


def go_mod_cache() -> Path:
    """$GOMODCACHE, else what `go env GOMODCACHE` says."""
    configured = os.environ.get("GOMODCACHE")
    if configured:
        return Path(configured)
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists()
                                else None)  # fmt: skip
    if go is None:
        raise ShapeSourceError(
            "no `go` on PATH and GOMODCACHE unset: cannot find Go's module cache"
        )
    done = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    if done.returncode != 0 or not done.stdout.strip():
        raise ShapeSourceError(f"`go env GOMODCACHE` failed: {done.stderr.strip()}")
    return Path(done.stdout.strip())


def scheduler_perf_dir(version: str | None = None) -> Path:
    """test/integration/scheduler_perf of the pinned k8s.io/kubernetes in the module cache."""
    version = version or pinned_version()
    folder = (go_mod_cache() / "k8s.io" / f"kubernetes@{version}" / "test" / "integration"
              / "scheduler_perf")  # fmt: skip
    if not (folder / "misc" / "performance-config.yaml").is_file():
        raise ShapeSourceError(
            f"scheduler_perf's configs are not at {folder}: k8s.io/kubernetes@{version} is not in "
            "Go's module cache. `make k8s` puts it there (it builds the binaries from it), or "
            f"`cd tools/kubernetes && go mod download k8s.io/kubernetes` (this benchmark never "
            "downloads it itself)"
        )
    return folder


def test_case(config: Path, name: str) -> dict[str, Any]:
    cases = yaml.safe_load(config.read_text())
    for case in cases:
        if case.get("name") == name:
            found: dict[str, Any] = case
            return found
    raise ShapeSourceError(f"{config}: no test case {name!r}")


def workload_size(workload: Mapping[str, Any]) -> tuple[int, int]:
    """(nodes, pods) a workload creates, to pick the largest: its parameters named *Nodes and
    the others (pods, namespaces...) summed."""
    params = workload.get("params") or {}
    nodes = sum(v for k, v in params.items() if k.lower().endswith("nodes"))
    return nodes, sum(v for k, v in params.items() if not k.lower().endswith("nodes"))


def pick_workload(case: Mapping[str, Any], wanted: str) -> tuple[dict[str, Any], str | None]:
    """The workload named `wanted`, else the largest; the second value says so."""
    workloads = case.get("workloads") or []
    for workload in workloads:
        if workload.get("name") == wanted:
            return workload, None
    if not workloads:
        raise ShapeSourceError(f"test case {case.get('name')!r} has no workloads")
    largest: dict[str, Any] = max(workloads, key=workload_size)
    return largest, (f"{case.get('name')} has no {wanted} workload: its largest, "
                     f"{largest.get('name')}, is used")  # fmt: skip


def count_of(op: Mapping[str, Any], params: Mapping[str, Any], what: str) -> int:
    if "count" in op:
        return int(op["count"])
    param = str(op.get("countParam", ""))
    if not param.startswith("$") or param[1:] not in params:
        raise ShapeSourceError(f"{what}: countParam {param!r} is not a parameter of the workload")
    return int(params[param[1:]])


def read_template(config: Path, relative: str, cache: dict[str, dict[str, Any]]) -> dict[str, Any]:
    path = (config.parent / relative).resolve()
    key = str(path)
    if key not in cache:
        if not path.is_file():
            raise ShapeSourceError(f"{config}: template {relative} not found at {path}")
        cache[key] = yaml.safe_load(path.read_text())
    return copy.deepcopy(cache[key])


def respell_spread_keys(pod: dict[str, Any], notes: list[str], template: str) -> None:
    """topologySpreadConstraints keys as Go's case-insensitive JSON decoder reads them."""
    wanted = {name.lower(): name for name in SPREAD_FIELDS}
    for constraint in (pod.get("spec") or {}).get("topologySpreadConstraints") or []:
        for key in list(constraint):
            proper = wanted.get(key.lower())
            if proper is not None and proper != key:
                constraint[proper] = constraint.pop(key)
                note = f"{template}: `{key}` read as `{proper}` (as Go's JSON decoder matches it)"
                if note not in notes:
                    notes.append(note)


def node_body(template: dict[str, Any], name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The template's node named `name`, labelled, for kwok to run."""
    body = copy.deepcopy(template)
    metadata = body.setdefault("metadata", {})
    metadata.pop("generateName", None)
    metadata["name"] = name
    metadata["labels"] = {**(metadata.get("labels") or {}), HOSTNAME_LABEL: name, **labels}
    metadata["annotations"] = {**(metadata.get("annotations") or {}), KWOK_NODE_ANNOTATION: "fake"}
    status = body.setdefault("status", {})
    status.pop("conditions", None)  # kwok makes the node Ready
    status.pop("phase", None)
    if "capacity" in status and not status.get("allocatable"):
        status["allocatable"] = dict(status["capacity"])
    return body


def pod_body(
    template: dict[str, Any], name: str, namespace: str, scheduler_name: str
) -> dict[str, Any]:
    body = copy.deepcopy(template)
    metadata = body.setdefault("metadata", {})
    metadata.pop("generateName", None)
    metadata["name"] = name
    metadata["namespace"] = namespace
    body.setdefault("spec", {})["schedulerName"] = scheduler_name
    return body


SUPPORTED_OPS = {
    "createNodes": {"opcode", "count", "countParam", "nodeTemplatePath",
                    "labelNodePrepareStrategy"},
    "createNamespaces": {"opcode", "prefix", "count", "countParam"},
    "createPods": {"opcode", "count", "countParam", "namespace", "podTemplatePath",
                   "collectMetrics"},
}  # fmt: skip


def scheduler_perf_shape(
    shape: str,
    scheduler_name: str,
    workload_name: str = DEFAULT_WORKLOAD,
    root: Path | None = None,
) -> Shape:
    """One of SCHEDULER_PERF_SHAPES as read from scheduler_perf's config and templates."""
    if shape not in SCHEDULER_PERF_SHAPES:
        raise ShapeSourceError(f"unknown shape {shape!r}; known {list(SCHEDULER_PERF_SHAPES)}")
    root = root or scheduler_perf_dir()
    relative, case_name = SCHEDULER_PERF_SHAPES[shape]
    config = root / relative
    case = test_case(config, case_name)
    workload, fallback = pick_workload(case, workload_name)
    params = workload.get("params") or {}
    notes = [fallback] if fallback else []
    templates: dict[str, dict[str, Any]] = {}
    nodes: list[dict[str, Any]] = []
    namespaces: list[str] = []
    init_pods: list[dict[str, Any]] = []
    measure_pods: list[dict[str, Any]] = []
    used_templates: list[str] = []
    measured = False
    for index, op in enumerate(case.get("workloadTemplate") or []):
        opcode = op.get("opcode")
        what = f"{config}: {case_name} operation {index} ({opcode})"
        unknown = set(op) - SUPPORTED_OPS.get(opcode, set())
        if opcode not in SUPPORTED_OPS or unknown:
            raise ShapeSourceError(f"{what}: not supported here ({sorted(unknown) or opcode})")
        count = count_of(op, params, what)
        if opcode == "createNodes":
            relative_template = op.get("nodeTemplatePath", "../templates/node-default.yaml")
            template = read_template(config, relative_template, templates)
            used_templates.append(relative_template)
            prefix = (template.get("metadata") or {}).get("generateName", "node-")
            strategy = op.get("labelNodePrepareStrategy") or {}
            for i in range(count):
                labels = {}
                if strategy:
                    values = strategy["labelValues"]
                    labels[strategy["labelKey"]] = str(values[i % len(values)])
                nodes.append(node_body(template, f"{prefix}{len(nodes):05d}", labels))
        elif opcode == "createNamespaces":
            namespaces += [f"{op['prefix']}-{i}" for i in range(count)]
        else:
            namespace = op.get("namespace") or f"namespace-{index}"
            if namespace not in namespaces:
                namespaces.append(namespace)
            relative_template = op.get("podTemplatePath") or case.get("defaultPodTemplatePath")
            if not relative_template:
                raise ShapeSourceError(f"{what}: no podTemplatePath and no default")
            template = read_template(config, relative_template, templates)
            used_templates.append(relative_template)
            respell_spread_keys(template, notes, relative_template)
            prefix = (template.get("metadata") or {}).get("generateName", "pod-")
            pods = [pod_body(template, f"{prefix}{index}-{i:05d}", namespace, scheduler_name)
                    for i in range(count)]  # fmt: skip
            if measured:
                raise ShapeSourceError(f"{what}: pods created after the timed ones")
            if op.get("collectMetrics"):
                measure_pods, measured = pods, True
            else:
                init_pods += pods
    if not measured:
        raise ShapeSourceError(f"{config}: {case_name} has no createPods with collectMetrics")
    source = {
        "scheduler_perf_config": str(config),
        "test_case": case_name,
        "workload": workload.get("name"),
        "params": params,
        "templates": sorted(set(used_templates)),
        "feature_gates": {
            **(case.get("featureGates") or {}),
            **(workload.get("featureGates") or {}),
        },
    }
    return Shape(shape, nodes, init_pods, measure_pods, namespaces, source, notes)
