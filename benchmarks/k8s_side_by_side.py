"""kube-scheduler and voltpack side by side on a real control plane (etcd, kube-apiserver, kwok).

Every run gets a fresh control plane (tests/k8s_control_plane.py, the binaries `make k8s`
builds) with kwok-managed fake nodes (`kwok.x-k8s.io/node: fake`); its nodes and pods are
created first, then one scheduler starts as its own process and the clock runs from its start
(cache sync included):

- throughput: N nodes of 16 GPUs (`nvidia.com/gpu`), M single-GPU pods; pods bound per second
  until every pod has `spec.nodeName`, and the scheduler's CPU-seconds and peak memory, for
  kube-scheduler with the QPS and burst its own scheduler_perf uses (5000/5000; with its
  default client settings, QPS 50 / burst 100, on request) and for voltpack's operator with the
  shipped default policy `fgd` (`voltpack operator`), in `--repeats` alternating rounds;
- packing: the openb default trace's whole-GPU and CPU-only pods (GPU-sharing pods skipped),
  in trace order and then the FGD protocol's random copies, up to 130% of the GPUs in demand,
  on its 1,213 nodes; once binding has settled, the share of GPUs allocated and the idle GPUs
  (GPUs no pod holds: packing_openb's "unallocated GPUs") for kube-scheduler's default scoring
  (LeastAllocated), its MostAllocated (bin-packing) configuration and voltpack.

The scheduler configurations are benchmarks/k8s/*.yaml. A pod's progress is followed with one
streaming watch. Results: <out>/k8s_side_by_side.{json,md}; see docs/k8s-side-by-side.md.

Usage:
  python benchmarks/k8s_side_by_side.py [--out DIR] [--nodes 5000] [--pods 10000]
  python benchmarks/k8s_side_by_side.py --quick          # 200 nodes / 1,000 pods, 200-node packing
  python benchmarks/k8s_side_by_side.py --only packing
  python benchmarks/k8s_side_by_side.py --only throughput --scale 5000x10000 --scale 10000x30000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from _common import RESULTS_DIR, save
from kubernetes import client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.k8s_control_plane

from tests.k8s_control_plane import (  # noqa: E402
    KWOK_NODE_ANNOTATION,
    ControlPlane,
    bin_dir,
    running_control_plane,
)
from voltpack.model.cluster import Node  # noqa: E402
from voltpack.model.workload import Pod  # noqa: E402
from voltpack.policies.schema import example_policy_path, load_policy  # noqa: E402
from voltpack.sim.datasets import OPENB_DEFAULT_PODS, OPENB_NODES, openb_dir  # noqa: E402
from voltpack.sim.experiment import arrival_order, inflate, run_experiment  # noqa: E402
from voltpack.sim.traces.openb import load_nodes, load_pods  # noqa: E402

NAMESPACE = "bench"
GPU = "nvidia.com/gpu"
MODEL_LABEL = "voltpack.io/gpu-model"
CONFIGS = Path(__file__).resolve().parent / "k8s"
CRDS = REPO / "helm" / "voltpack" / "crds"
RAISED_QPS, RAISED_BURST = 5000.0, 5000
"""kubernetes/kubernetes test/integration/scheduler_perf/util.go, mustSetupCluster."""
DEFAULT_QPS, DEFAULT_BURST = 50.0, 100
"""KubeSchedulerConfiguration v1 clientConnection defaults."""
NO_NODE_TAINTS = ("--disable-admission-plugins", "TaintNodesByCondition")
"""No controller-manager runs to lift the not-ready taint this plugin puts on new nodes (appends
to the launcher's `ServiceAccount`; scheduler_perf disables both as well)."""
DEMAND_RATIO = 1.3
SEED = 42


@dataclass(frozen=True)
class Contender:
    """One scheduler set-up: kube-scheduler with a configuration file, or voltpack's operator."""

    scheduler: str
    config: str
    profile: str | None = None
    """benchmarks/k8s/<profile>.yaml for kube-scheduler."""
    qps: float | None = None
    burst: int | None = None

    @property
    def scheduler_name(self) -> str:
        return "voltpack" if self.scheduler == "voltpack" else "default-scheduler"

    def start(self, plane: ControlPlane, log: Path) -> subprocess.Popen[bytes]:
        """The scheduler as its own process, logging to `log`."""
        with log.open("wb") as out:
            if self.scheduler == "voltpack":
                argv = [sys.executable, "-m", "voltpack", "operator", "--policy", "fgd",
                        "--identity", "side-by-side", "--metrics-port", "-1"]  # fmt: skip
                env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig)}
                return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
            config = self.scheduler_config(plane)
            path = log.with_suffix(".yaml")
            path.write_text(json.dumps(config, indent=1))
            argv = [str(bin_dir() / "kube-scheduler"), "--config", str(path),
                    "--secure-port", "0", "--v", "1"]  # fmt: skip
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

    def scheduler_config(self, plane: ControlPlane) -> dict[str, Any]:
        """The KubeSchedulerConfiguration file with this run's kubeconfig and client limits."""
        config: dict[str, Any] = yaml.safe_load((CONFIGS / f"{self.profile}.yaml").read_text())
        connection: dict[str, Any] = {"kubeconfig": str(plane.kubeconfig)}
        if self.qps is not None:
            connection |= {"qps": self.qps, "burst": self.burst}
        config["clientConnection"] = connection
        return config

    def describe(self) -> dict[str, Any]:
        if self.scheduler == "voltpack":
            return {"command": "python -m voltpack operator --policy fgd (shipped defaults)"}
        return {
            "config_file": f"benchmarks/k8s/{self.profile}.yaml",
            "client_qps": self.qps if self.qps is not None else DEFAULT_QPS,
            "client_burst": self.burst if self.burst is not None else DEFAULT_BURST,
        }


KUBE_DEFAULT = Contender("kube-scheduler", "LeastAllocated, client QPS 50 / burst 100 (defaults)",
                         "kube-scheduler-least-allocated")  # fmt: skip
KUBE_RAISED = Contender(
    "kube-scheduler", "LeastAllocated, client QPS 5000 / burst 5000 (scheduler_perf)",
    "kube-scheduler-least-allocated", RAISED_QPS, RAISED_BURST,
)  # fmt: skip
KUBE_LEAST = Contender("kube-scheduler", "LeastAllocated (default scoring), QPS 5000",
                       "kube-scheduler-least-allocated", RAISED_QPS, RAISED_BURST)  # fmt: skip
KUBE_MOST = Contender(
    "kube-scheduler", "MostAllocated (cpu 1, memory 1, nvidia.com/gpu 3), QPS 5000",
    "kube-scheduler-most-allocated", RAISED_QPS, RAISED_BURST,
)  # fmt: skip
VOLTPACK = Contender("voltpack", "operator, shipped default policy fgd")
CONTENDERS = {"kube-default": KUBE_DEFAULT, "kube-qps5000": KUBE_RAISED, "voltpack": VOLTPACK}
"""Throughput's contenders by `--contenders` name."""


def kwok_node(node: Node) -> dict[str, Any]:
    """A Node object kwok manages: the node's CPU, memory, GPUs and GPU model."""
    resources = {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi", "pods": "1000",
                 GPU: str(node.gpu_count)}  # fmt: skip
    labels = {"kubernetes.io/hostname": node.name, "type": "kwok"}
    if node.gpu_model:
        labels[MODEL_LABEL] = node.gpu_model
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": labels,
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
        },
        "status": {"capacity": resources, "allocatable": dict(resources)},
    }


def bench_pod(name: str, pod: Pod, scheduler_name: str) -> dict[str, Any]:
    """A pod asking for `pod`'s CPU, memory and whole GPUs."""
    requests = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    resources: dict[str, Any] = {"requests": requests}
    if pod.num_gpu:
        requests[GPU] = str(pod.num_gpu)
        resources["limits"] = {GPU: str(pod.num_gpu)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [{"name": "main", "image": "bench:1", "resources": resources}],
        },
    }


def create_all(plane: ControlPlane, bodies: Sequence[dict[str, Any]], threads: int = 8) -> float:
    """POST every Node or Pod body with `threads` clients; seconds taken."""
    local = threading.local()

    def create(body: dict[str, Any]) -> None:
        if not hasattr(local, "core"):
            local.core = client.CoreV1Api(plane.api_client())
        if body["kind"] == "Node":
            local.core.create_node(body, _preload_content=False)
        else:
            local.core.create_namespaced_pod(NAMESPACE, body, _preload_content=False)

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(create, bodies, chunksize=32):
            pass
    return time.perf_counter() - started


class WatchExpiredError(RuntimeError):
    """The watch's version is gone (410 after etcd compaction): list again."""


class PodWatch:
    """Follows the pods of NAMESPACE through one streaming watch: where each is bound, and
    which a scheduler tried and marked unschedulable (condition PodScheduled=False)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.core = client.CoreV1Api(plane.api_client())
        self.bound: dict[str, str] = {}
        self.unschedulable: set[str] = set()
        self.events = 0
        self._stop = threading.Event()
        self._version = ""
        self._relist()
        self._thread = threading.Thread(target=self._run, name="pod-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                response: Any = self.core.list_namespaced_pod(
                    NAMESPACE, watch=True, resource_version=self._version,
                    allow_watch_bookmarks=True, timeout_seconds=1800, _preload_content=False,
                )  # fmt: skip
                pending = b""
                for chunk in response.stream(1 << 16):
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        if line.strip():
                            self._event(json.loads(line))
                    if self._stop.is_set():
                        break
                response.release_conn()
            except Exception as error:  # reconnect from the last version seen
                if not self._stop.is_set():
                    print(f"pod watch: {error!r}; reconnecting", file=sys.stderr, flush=True)
                    time.sleep(0.5)
                    if isinstance(error, WatchExpiredError):
                        self._relist()

    def _relist(self) -> None:
        """The pods as they are now, and the version to watch from."""
        response: Any = self.core.list_namespaced_pod(NAMESPACE, _preload_content=False)
        listed = json.loads(response.data)
        self.bound.clear()
        self.unschedulable.clear()
        for pod in listed["items"]:
            self._event({"type": "ADDED", "object": pod})
        self._version = listed["metadata"]["resourceVersion"]

    def _event(self, event: dict[str, Any]) -> None:
        kind, obj = event["type"], event["object"]
        if kind == "ERROR":
            raise WatchExpiredError(f"watch error: {obj}")
        self._version = obj["metadata"]["resourceVersion"]
        if kind == "BOOKMARK":
            return
        self.events += 1
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self.bound.pop(name, None)
            self.unschedulable.discard(name)
            return
        node = (obj.get("spec") or {}).get("nodeName")
        if node:
            self.bound[name] = node
            self.unschedulable.discard(name)
            return
        conditions = (obj.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions):
            self.unschedulable.add(name)

    def stop(self) -> None:
        self._stop.set()


def wait_until(what: str, ready: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not done after {timeout_s:.0f} s")
        time.sleep(0.5)


def ready_nodes(core: client.CoreV1Api) -> int:
    """Nodes kwok has made Ready."""
    response: Any = core.list_node(_preload_content=False)
    items = json.loads(response.data)["items"]
    return sum(
        1
        for node in items
        for c in (node.get("status") or {}).get("conditions") or []
        if c.get("type") == "Ready" and c.get("status") == "True"
    )


@dataclass
class Cluster:
    """A fresh control plane with its kwok nodes and this run's pods, not yet scheduled."""

    plane: ControlPlane
    watch: PodWatch
    timings: dict[str, float] = field(default_factory=dict)


@contextlib.contextmanager
def prepared_cluster(nodes: Sequence[Node], pods: Sequence[dict[str, Any]]) -> Iterator[Cluster]:
    """Control plane up, CRDs installed, nodes created and Ready, pods created (unbound)."""
    started = time.perf_counter()
    with (
        running_control_plane(kwok=True, extra_apiserver_args=NO_NODE_TAINTS) as plane,
        plane.api_client() as api,
    ):
        timings = {"control_plane_start_s": time.perf_counter() - started}
        core = client.CoreV1Api(api)
        for namespace in (NAMESPACE, "voltpack-system"):
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        extensions = client.ApiextensionsV1Api(api)
        for path in sorted(CRDS.glob("*.yaml")):
            extensions.create_custom_resource_definition(yaml.safe_load(path.read_text()))
        timings["node_create_s"] = create_all(plane, [kwok_node(n) for n in nodes])
        mark = time.perf_counter()
        wait_until("kwok makes the nodes Ready", lambda: ready_nodes(core) >= len(nodes), 600)
        timings["nodes_ready_wait_s"] = time.perf_counter() - mark
        watch = PodWatch(plane)
        try:
            timings["pod_create_s"] = create_all(plane, pods)
            timings["node_create_per_s"] = len(nodes) / timings["node_create_s"]
            timings["pod_create_per_s"] = len(pods) / timings["pod_create_s"]
            yield Cluster(plane, watch, {k: round(v, 2) for k, v in timings.items()})
        finally:
            watch.stop()


@contextlib.contextmanager
def started(contender: Contender, cluster: Cluster, tag: str) -> Iterator[subprocess.Popen[bytes]]:
    log = cluster.plane.workdir / f"{tag}.log"
    process = contender.start(cluster.plane, log)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def check_alive(process: subprocess.Popen[bytes], log: Path) -> None:
    if process.poll() is not None:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(f"the scheduler exited with status {process.returncode}:\n{tail}")


_last_progress = [0.0]


def progress(contender: Contender, watch: PodWatch, begin: float) -> None:
    """Every 15 s on stderr: pods bound and marked unschedulable so far."""
    now = time.perf_counter()
    if now - _last_progress[0] >= 15:
        _last_progress[0] = now
        print(f"  {contender.scheduler} ({contender.config}): {now - begin:.0f} s, "
              f"{len(watch.bound)} bound, {len(watch.unschedulable)} unschedulable",
              file=sys.stderr, flush=True)  # fmt: skip


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name (field 3 onwards); [] for a process gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def tree_pids(root: int) -> list[int]:
    """`root` and its live descendants."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields:
                parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += parents.get(pid, [])
    return found


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) of `root` and its descendants, the reaped ones included."""
    total_ticks = 0
    for pid in tree_pids(root):
        fields = _stat_fields(pid)
        if fields:  # utime, stime, cutime, cstime: fields 14-17 of stat
            total_ticks += sum(int(v) for v in fields[11:15])
    return total_ticks / CLOCK_TICKS_PER_S


def tree_rss_peak_mib(root: int) -> float:
    """Peak resident memory (VmHWM) of `root` plus that of each live descendant, MiB."""
    total_kib = 0
    for pid in tree_pids(root):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total_kib += int(line.split()[1])
    return total_kib / 1024


def apiserver_pid(plane: ControlPlane) -> int | None:
    """The kube-apiserver serving `plane` (the one whose command line names its workdir)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if argv[0].endswith(b"kube-apiserver") and str(plane.workdir).encode() in b" ".join(
                argv
            ):
                return int(entry.name)
    return None


def throughput_run(
    contender: Contender, node_count: int, pod_count: int, timeout_s: float
) -> dict[str, Any]:
    """Pods bound per second from the scheduler's start until all `pod_count` are bound."""
    nodes = [Node.empty(name=f"bench-node-{i:05d}", cpu_milli=96000, memory_mib=1536000,
                        gpu_count=16, gpu_model="V100M32") for i in range(node_count)]  # fmt: skip
    one_gpu = Pod(name="one-gpu", cpu_milli=1000, memory_mib=4096, num_gpu=1, gpu_milli=1000)
    pods = [bench_pod(f"bench-{i:05d}", one_gpu, contender.scheduler_name)
            for i in range(pod_count)]  # fmt: skip
    with prepared_cluster(nodes, pods) as cluster:
        before = load()
        tag = "scheduler"
        apiserver = apiserver_pid(cluster.plane)
        apiserver_cpu_before_s = tree_cpu_s(apiserver) if apiserver else 0.0
        begin = time.perf_counter()
        with started(contender, cluster, tag) as process:
            deadline = begin + timeout_s
            rss_peak_mib = 0.0
            while len(cluster.watch.bound) < pod_count and time.perf_counter() < deadline:
                check_alive(process, cluster.plane.workdir / f"{tag}.log")
                progress(contender, cluster.watch, begin)
                time.sleep(0.05)
            elapsed = time.perf_counter() - begin
            # before the scheduler is stopped: what binding these pods cost it
            scheduler_cpu_s = tree_cpu_s(process.pid)
            rss_peak_mib = tree_rss_peak_mib(process.pid)
            apiserver_cpu_s = tree_cpu_s(apiserver) - apiserver_cpu_before_s if apiserver else None
        bound = len(cluster.watch.bound)
        return {
            "scheduler": contender.scheduler,
            "config": contender.config,
            "nodes": node_count,
            "pods": pod_count,
            "pods_per_s": round(bound / elapsed, 1),
            "bound": bound,
            "complete": bound >= pod_count,
            "seconds": round(elapsed, 2),
            "loadavg_before": before,
            "loadavg_after": load(),
            "scheduler_cpu_s": round(scheduler_cpu_s, 2),
            "scheduler_cpu_s_per_pod": round(scheduler_cpu_s / max(bound, 1), 6),
            "scheduler_rss_peak_mib": round(rss_peak_mib, 1),
            "apiserver_cpu_s": None if apiserver_cpu_s is None else round(apiserver_cpu_s, 2),
            **contender.describe(),
            **cluster.timings,
        }


def summarise(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per scheduler set-up and size (in the order first met): runs, and the median, min and
    max of pods/s, scheduler CPU-seconds per pod and peak RSS; every run must be complete for
    `all_complete`."""
    groups: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["scheduler"], row["config"], row["nodes"], row["pods"]), []).append(
            row
        )
    summary = []
    for (scheduler, config, nodes, pods), runs in groups.items():
        entry: dict[str, Any] = {"scheduler": scheduler, "config": config, "nodes": nodes,
                                 "pods": pods, "runs": len(runs),
                                 "all_complete": all(r["complete"] for r in runs)}  # fmt: skip
        for field_name in ("pods_per_s", "scheduler_cpu_s_per_pod", "scheduler_rss_peak_mib"):
            values = [r[field_name] for r in runs if r.get(field_name) is not None]
            if values:
                entry[field_name] = {"median": float(np.median(values)), "min": min(values),
                                     "max": max(values)}  # fmt: skip
        entry["loadavg_before"] = [r["loadavg_before"][0] for r in runs]
        summary.append(entry)
    return summary


def ratios(summary: Sequence[dict[str, Any]], baseline_config: str) -> list[dict[str, Any]]:
    """Per size: voltpack's median pods/s and CPU-seconds per pod over those of the set-up
    named `baseline_config` (kube-scheduler with scheduler_perf's client limits)."""
    out = []
    for ours in (e for e in summary if e["scheduler"] == "voltpack"):
        size = (ours["nodes"], ours["pods"])
        same = [e for e in summary if e["config"] == baseline_config]
        theirs = next((e for e in same if (e["nodes"], e["pods"]) == size), None)
        if theirs is None or "pods_per_s" not in theirs:
            continue
        cpu_ours = ours.get("scheduler_cpu_s_per_pod", {}).get("median")
        cpu_theirs = theirs.get("scheduler_cpu_s_per_pod", {}).get("median")
        out.append({
            "nodes": ours["nodes"], "pods": ours["pods"],
            "pods_per_s_ratio": ours["pods_per_s"]["median"] / theirs["pods_per_s"]["median"],
            "cpu_s_per_pod_ratio": cpu_ours / cpu_theirs if cpu_ours and cpu_theirs else None,
        })  # fmt: skip
    return out


def run_order(names: Sequence[str], repeats: int) -> list[str]:
    """The contenders in alternating rounds: the given order, then reversed, and so on (A B,
    B A, A B): a drift in the machine's load falls on each side alike."""
    order: list[str] = []
    for round_index in range(repeats):
        order += list(names) if round_index % 2 == 0 else list(reversed(names))
    return order


def parse_scale(text: str) -> tuple[int, int]:
    """'5000x10000' -> (5000 nodes, 10000 pods)."""
    try:
        nodes, pods = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--scale {text!r}: give NODESxPODS, e.g. 5000x10000"
        ) from None
    if nodes <= 0 or pods <= 0:
        raise argparse.ArgumentTypeError(f"--scale {text!r}: nodes and pods must be positive")
    return nodes, pods


@dataclass(frozen=True)
class PackingInput:
    """The openb nodes and the arrivals replayed on them."""

    nodes: list[Node]
    arrivals: list[Pod]
    skipped_sharing: int
    trace_pods: int
    cloned: int

    @property
    def total_gpus(self) -> int:
        return sum(node.gpu_count for node in self.nodes)


def packing_input(node_limit: int | None) -> PackingInput:
    """openb's default trace, whole-GPU and CPU-only pods, in trace order and then the FGD
    protocol's random copies (seed 42), cut where GPU demand would pass 130% of the GPUs.

    `node_limit`: an evenly spaced subset of the nodes (every k-th), for quick runs.
    """
    data = openb_dir()
    nodes = load_nodes(data / OPENB_NODES)
    if node_limit is not None and node_limit < len(nodes):
        step = len(nodes) / node_limit
        nodes = [nodes[int(i * step)] for i in range(node_limit)]
    trace = load_pods(data / OPENB_DEFAULT_PODS)
    kept = [pod for pod in trace if not pod.is_gpu_sharing]
    capacity_milli = sum(n.gpu_count for n in nodes) * 1000
    rng = np.random.default_rng(SEED)
    ordered = arrival_order(kept, "creation", rng)
    inflated = inflate(ordered, kept, capacity_milli, DEMAND_RATIO, rng)
    arrivals, demand = [], 0
    for pod in inflated:
        if demand + pod.gpu_request_milli > DEMAND_RATIO * capacity_milli:
            break
        demand += pod.gpu_request_milli
        arrivals.append(pod)
    cloned = max(len(arrivals) - len(kept), 0)
    return PackingInput(nodes, arrivals, len(trace) - len(kept), len(trace), cloned)


def gpu_figures(data: PackingInput, bound: dict[str, str]) -> dict[str, Any]:
    """Allocated share of the GPUs and idle GPUs (GPUs no bound pod holds), from the bindings."""
    gpus = {f"p-{i:05d}": pod.num_gpu for i, pod in enumerate(data.arrivals)}
    used: dict[str, int] = {}
    for pod, node in bound.items():
        used[node] = used.get(node, 0) + gpus.get(pod, 0)
    capacity = {node.name: node.gpu_count for node in data.nodes}
    over = {n: u for n, u in used.items() if u > capacity.get(n, 0)}
    if over:
        raise RuntimeError(f"nodes given more GPUs than they have: {over}")
    allocated = sum(used.values())
    total = data.total_gpus
    gpu_pods = [name for name, count in gpus.items() if count]
    return {
        "allocation_pct": round(100 * allocated / total, 2),
        "idle_gpus": total - allocated,
        "allocated_gpus": allocated,
        "total_gpus": total,
        "pods_bound": len(bound),
        "gpu_pods_unbound": sum(1 for name in gpu_pods if name not in bound),
        "cpu_pods_unbound": sum(1 for n, c in gpus.items() if not c and n not in bound),
        "nodes_with_idle_gpus": sum(
            1 for n in data.nodes if n.gpu_count and used.get(n.name, 0) < n.gpu_count
        ),
    }


def packing_run(
    contender: Contender, data: PackingInput, settle_s: float, timeout_s: float
) -> dict[str, Any]:
    """Replay the arrivals (created before the scheduler starts) and wait until binding settles:
    no new binding for `settle_s` after the first, and for kube-scheduler every pod attempted."""
    pods = [bench_pod(f"p-{i:05d}", pod, contender.scheduler_name)
            for i, pod in enumerate(data.arrivals)]  # fmt: skip
    with prepared_cluster(data.nodes, pods) as cluster:
        watch, before, tag = cluster.watch, load(), "scheduler"
        begin = time.perf_counter()
        with started(contender, cluster, tag) as process:
            count, changed = 0, time.perf_counter()
            while time.perf_counter() < begin + timeout_s:
                check_alive(process, cluster.plane.workdir / f"{tag}.log")
                progress(contender, watch, begin)
                now = time.perf_counter()
                if len(watch.bound) != count:
                    count, changed = len(watch.bound), now
                attempted = len(watch.bound) + len(watch.unschedulable) >= len(pods)
                everyone = attempted or contender.scheduler == "voltpack"
                if count and everyone and now - changed >= settle_s:
                    break
                time.sleep(0.2)
            settled = time.perf_counter() - begin
            last_bind = changed - begin
            bound = dict(watch.bound)
        return {
            "scheduler": contender.scheduler,
            "config": contender.config,
            **gpu_figures(data, bound),
            "pods": len(pods),
            "seconds_to_last_binding": round(last_bind, 1),
            "seconds_to_settled": round(settled, 1),
            "loadavg_before": before,
            "loadavg_after": load(),
            **contender.describe(),
            **cluster.timings,
        }


def simulator_reference(data: PackingInput) -> dict[str, Any]:
    """voltpack's simulator on the same nodes and arrivals with the same policy (fgd)."""
    arrivals = [p.model_copy(update={"creation_time_s": float(i)})
                for i, p in enumerate(data.arrivals)]  # fmt: skip
    capacity = data.total_gpus * 1000
    demand = sum(p.gpu_request_milli for p in arrivals)
    result = run_experiment(
        data.nodes, arrivals, load_policy(example_policy_path("fgd")), SEED,
        target_demand_ratio=demand / capacity * (1 - 1e-9), order="creation",
    )  # fmt: skip
    allocated = result.allocation_ratio_pct[-1]
    return {
        "scheduler": "voltpack simulator",
        "config": "fgd, same arrivals",
        "allocation_pct": round(allocated, 2),
        "idle_gpus": round((100 - allocated) / 100 * data.total_gpus),
    }


def versions() -> dict[str, str]:
    out = {}
    for name in ("kube-apiserver", "kube-scheduler", "etcd", "kwok"):
        done = subprocess.run([str(bin_dir() / name), "--version"], capture_output=True,
                              text=True, timeout=30, check=False)  # fmt: skip
        out[name] = (done.stdout or done.stderr).strip().splitlines()[0]
    return out


def markdown(figures: dict[str, Any]) -> str:
    lines = [
        "# kube-scheduler and voltpack side by side on a real control plane",
        "",
        "etcd + kube-apiserver + kwok (fake nodes), a fresh control plane per run; each scheduler "
        "runs as its own process and the clock starts with it. Measured on a shared 2-core "
        "machine (see the 1-minute load averages): re-run on a quiet machine before quoting.",
    ]
    for section in figures.get("carried_over", []):
        lines += ["", f"The {section} section is carried over from the previous run (`--only`)."]
    if figures["throughput"]:
        lines += ["", "## Throughput (single-GPU pods, 16-GPU nodes)", ""]
        lines += throughput_summary_lines(figures)
        lines += [
            "",
            "Every run, in the order run:",
            "",
            "| scheduler | config | nodes | pods | pods/s | bound | s | scheduler CPU ms/pod "
            "| scheduler peak RSS MiB | apiserver CPU s | load before/after |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in figures["throughput"]:
            cpu = r.get("scheduler_cpu_s_per_pod")
            rss = r.get("scheduler_rss_peak_mib")
            api = r.get("apiserver_cpu_s")
            lines.append(
                f"| {r['scheduler']} | {r['config']} | {r['nodes']:,} | {r['pods']:,} | "
                f"{r['pods_per_s']:.1f} | {r['bound']:,} | {r['seconds']:.1f} | "
                f"{'' if cpu is None else f'{cpu * 1000:.2f}'} | "
                f"{'' if rss is None else f'{rss:,.0f}'} | {'' if api is None else api} | "
                f"{r['loadavg_before'][0]} / {r['loadavg_after'][0]} |"
            )
    if figures["packing"]:
        packing = figures["packing_input"]
        lines += [
            "",
            "## Packing (openb default trace, whole-GPU and CPU-only pods, 130% GPU demand)",
            "",
            f"{packing['nodes']:,} nodes, {packing['total_gpus']:,} GPUs; {packing['pods']:,} "
            f"pods ({packing['cloned']:,} of them the FGD protocol's random copies); "
            f"{packing['skipped_gpu_sharing']:,} GPU-sharing pods of the trace skipped. "
            "Idle GPUs: GPUs no bound pod holds.",
            "",
            "| scheduler | config | allocation | idle GPUs | GPU pods unbound | load before/after "
            "|",
            "|---|---|---:|---:|---:|---|",
        ]
        for r in figures["packing"]:
            lines.append(
                f"| {r['scheduler']} | {r['config']} | {r['allocation_pct']:.2f}% | "
                f"{r['idle_gpus']:,} | {r['gpu_pods_unbound']:,} | "
                f"{r['loadavg_before'][0]} / {r['loadavg_after'][0]} |"
            )
        sim = figures["simulator_reference"]
        lines += [
            "",
            f"voltpack's simulator, same nodes, arrivals and policy: {sim['allocation_pct']:.2f}% "
            f"allocated, {sim['idle_gpus']:,} idle GPUs.",
        ]
    return "\n".join(lines) + "\n"


def throughput_summary_lines(figures: dict[str, Any]) -> list[str]:
    """The medians (min-max) per set-up and size, and voltpack over kube-scheduler."""
    summary = figures.get("throughput_summary") or []
    if not summary:
        return []

    def spread(entry: dict[str, Any], key: str, scale: float, digits: int) -> str:
        figure = entry.get(key)
        if not figure:
            return ""
        return (f"{figure['median'] * scale:,.{digits}f} ({figure['min'] * scale:,.{digits}f}"
                f"-{figure['max'] * scale:,.{digits}f})")  # fmt: skip

    lines = [
        "Medians of the runs (min-max); runs alternate between the contenders.",
        "",
        "| scheduler | config | nodes | pods | runs | pods/s | scheduler CPU ms/pod "
        "| scheduler peak RSS MiB | all bound | load before each run |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for e in summary:
        lines.append(
            f"| {e['scheduler']} | {e['config']} | {e['nodes']:,} | {e['pods']:,} | {e['runs']} | "
            f"{spread(e, 'pods_per_s', 1, 1)} | {spread(e, 'scheduler_cpu_s_per_pod', 1000, 2)} | "
            f"{spread(e, 'scheduler_rss_peak_mib', 1, 0)} | {'yes' if e['all_complete'] else 'no'} "
            f"| {', '.join(str(x) for x in e['loadavg_before'])} |"
        )
    for r in figures.get("throughput_ratios") or []:
        cpu = r["cpu_s_per_pod_ratio"]
        lines.append(
            f"\n{r['nodes']:,} nodes / {r['pods']:,} pods: voltpack binds "
            f"**{r['pods_per_s_ratio']:.2f}x** kube-scheduler's pods/s (QPS 5000)"
            + (f" at **{cpu:.2f}x** its CPU-seconds per pod." if cpu else ".")
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    parser.add_argument("--nodes", type=int, default=5000, help="throughput: 16-GPU nodes")
    parser.add_argument("--pods", type=int, default=10_000, help="throughput: single-GPU pods")
    parser.add_argument("--packing-nodes", type=int, default=None,
                        help="packing: evenly spaced subset of openb's 1,213 nodes")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help="200 nodes / 1,000 pods, 200-node packing")  # fmt: skip
    parser.add_argument("--only", choices=("throughput", "packing"), default=None)
    parser.add_argument("--timeout", type=float, default=1800.0, help="per run, seconds")
    parser.add_argument("--scale", type=parse_scale, action="append", default=None,
                        help="throughput NODESxPODS, repeatable")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=3,
                        help="throughput runs per contender and size, alternating")  # fmt: skip
    parser.add_argument("--contenders", type=lambda text: text.split(","),
                        default=["kube-qps5000", "voltpack"],
                        help=f"comma-separated, of {','.join(CONTENDERS)}")  # fmt: skip
    args = parser.parse_args()
    unknown = [name for name in args.contenders if name not in CONTENDERS]
    if unknown or args.repeats < 1:
        parser.error(f"--contenders: unknown {unknown}; known {list(CONTENDERS)}"
                     if unknown else "--repeats must be at least 1")  # fmt: skip
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the control plane on kill
    if args.quick:
        args.nodes, args.pods = 200, 1000
        args.packing_nodes = args.packing_nodes or 200
    settle_s = 10.0 if args.quick else 20.0
    wall = time.perf_counter()
    figures: dict[str, Any] = {"versions": versions(), "throughput": [], "packing": []}
    if args.only != "packing":
        scales = args.scale or [(args.nodes, args.pods)]
        for nodes, pods in scales:
            for run, name in enumerate(run_order(args.contenders, args.repeats)):
                row = throughput_run(CONTENDERS[name], nodes, pods, args.timeout)
                row["run"] = run
                print(json.dumps(row), flush=True)
                figures["throughput"].append(row)
        figures["throughput_summary"] = summarise(figures["throughput"])
        figures["throughput_ratios"] = ratios(figures["throughput_summary"], KUBE_RAISED.config)
    if args.only != "throughput":
        data = packing_input(args.packing_nodes)
        figures["packing_input"] = {
            "trace": OPENB_DEFAULT_PODS, "nodes": len(data.nodes), "total_gpus": data.total_gpus,
            "trace_pods": data.trace_pods, "skipped_gpu_sharing": data.skipped_sharing,
            "pods": len(data.arrivals), "cloned": data.cloned, "seed": SEED,
            "demand_ratio": DEMAND_RATIO, "settle_s": settle_s,
        }  # fmt: skip
        for contender in (KUBE_LEAST, KUBE_MOST, VOLTPACK):
            row = packing_run(contender, data, settle_s, args.timeout)
            print(json.dumps(row), flush=True)
            figures["packing"].append(row)
        figures["simulator_reference"] = simulator_reference(data)
    figures["wall_s"] = round(time.perf_counter() - wall, 1)
    if args.only:
        carry_over(
            figures,
            args.out or RESULTS_DIR,
            "packing" if args.only == "throughput" else "throughput",
        )
    save("k8s_side_by_side", figures, markdown(figures), args.out)


CARRIED = {
    "throughput": ("throughput", "throughput_summary", "throughput_ratios"),
    "packing": ("packing", "packing_input", "simulator_reference"),
}


def carry_over(figures: dict[str, Any], folder: Path, section: str) -> None:
    """With `--only`, keep the other section from the previous results file, marked as such."""
    previous_path = folder / "k8s_side_by_side.json"
    if not previous_path.exists():
        return
    previous = json.loads(previous_path.read_text())
    for key in CARRIED[section]:
        if key in previous:
            figures[key] = previous[key]
    figures.setdefault("carried_over", []).append(section)


if __name__ == "__main__":
    main()
