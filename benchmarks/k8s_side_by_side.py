"""kube-scheduler and voltpack side by side on a real control plane (etcd, kube-apiserver, kwok).

Every run gets a fresh control plane (tests/k8s_control_plane.py, the binaries `make k8s`
builds) with kwok-managed fake nodes (`kwok.x-k8s.io/node: fake`) and one scheduler as its own
process:

- throughput, per shape: kube-scheduler's own benchmark workloads (scheduler_perf's
  SchedulingBasic, SchedulingNodeAffinity, SchedulingPodAntiAffinity, TopologySpreading,
  SchedulingWithNodeInclusionPolicy ("taints") and the (preferred) pod affinity and spreading
  variants, read at run time from the pinned k8s.io/kubernetes module: benchmarks/k8s_shapes.py)
  and voltpack's own "gpu" shape (N nodes of 16 GPUs, M single-GPU pods). The scheduler binds a
  warm-up pod and the shape's init pods, is paused while the measure pods are created, and is
  timed from its resume until the last measure pod is bound: pods/s, its CPU-seconds per pod
  and peak memory, for kube-scheduler with the QPS and burst scheduler_perf uses (5000/5000;
  its default client settings, QPS 50 / burst 100, on request) and voltpack's operator with
  the shipped default policy `fgd` (`voltpack operator`), in `--repeats` alternating rounds.
  Every binding is then replayed through kube-scheduler's own filters (the oracle:
  benchmarks/k8s_oracle_replay.py) and the violations counted;
- packing: the openb default trace's whole-GPU and CPU-only pods (GPU-sharing pods skipped),
  in trace order and then the FGD protocol's random copies, up to 130% of the GPUs in demand,
  on its 1,213 nodes, all created before the scheduler starts; once binding has settled, the
  share of GPUs allocated and the idle GPUs (GPUs no pod holds: packing_openb's "unallocated
  GPUs") for kube-scheduler's default scoring (LeastAllocated), its MostAllocated (bin-packing)
  configuration and voltpack.

The scheduler configurations are benchmarks/k8s/*.yaml. A pod's progress is followed with one
streaming watch. Results: <out>/k8s_side_by_side.{json,md} (summaries and Markdown of the
throughput section: benchmarks/k8s_shapes_report.py); see docs/k8s-side-by-side.md.

Usage:
  python benchmarks/k8s_side_by_side.py [--out DIR] [--shapes gpu,basic,...] [--repeats 3]
  python benchmarks/k8s_side_by_side.py --quick   # gpu 200x1,000, scheduler_perf's 500Nodes
  python benchmarks/k8s_side_by_side.py --only throughput --shapes taints,basic --repeats 1
  python benchmarks/k8s_side_by_side.py --only packing
  python benchmarks/k8s_side_by_side.py --only throughput --shapes gpu --scale 5000x10000 \
      --scale 10000x30000
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
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
from k8s_oracle_replay import cluster_objects, confirmed, replay, save_run
from k8s_process_stats import (
    machine_cpu_s,
    py_spy,
    signal_tree,
    tree_cpu_s,
    tree_pids,
    tree_rss_peak_mib,
    wait_quiet,
)
from k8s_shapes import (
    DEFAULT_WORKLOAD,
    SCHEDULER_PERF_SHAPES,
    Shape,
    ShapeSourceError,
    scheduler_perf_dir,
    scheduler_perf_shape,
)
from k8s_shapes_report import ratios, summarise, throughput_lines
from kubernetes import client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.k8s_control_plane

from tests.k8s_control_plane import (  # noqa: E402
    KWOK_NODE_ANNOTATION,
    ControlPlane,
    bin_dir,
    running_control_plane,
    stop_process,
)
from tests.scheduler_oracle import BUILD_HINT as ORACLE_BUILD_HINT  # noqa: E402
from tests.scheduler_oracle import missing_oracle  # noqa: E402
from voltpack.model.cluster import Node  # noqa: E402
from voltpack.model.workload import Pod  # noqa: E402
from voltpack.operator.kube.client import call_json  # noqa: E402
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
SHAPES = ("gpu", *SCHEDULER_PERF_SHAPES)
"""Throughput shapes: voltpack's single-GPU pods and scheduler_perf's (benchmarks/k8s_shapes.py)."""
QUICK_WORKLOAD = "500Nodes"


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
KUBE_NO_PLUGINS = Contender(
    "kube-scheduler", "no Filter or Score plugins (the request path alone: a ceiling), QPS 5000",
    "kube-scheduler-no-plugins", RAISED_QPS, RAISED_BURST,
)  # fmt: skip
VOLTPACK = Contender("voltpack", "operator, shipped default policy fgd")
CONTENDERS = {"kube-default": KUBE_DEFAULT, "kube-qps5000": KUBE_RAISED,
              "kube-no-plugins": KUBE_NO_PLUGINS, "voltpack": VOLTPACK}  # fmt: skip
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
            namespace = body["metadata"].get("namespace") or NAMESPACE
            local.core.create_namespaced_pod(namespace, body, _preload_content=False)

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(create, bodies, chunksize=32):
            pass
    return time.perf_counter() - started


class WatchExpiredError(RuntimeError):
    """The watch's version is gone (410 after etcd compaction): list again."""


def pod_key(pod: dict[str, Any]) -> str:
    """namespace/name, how PodWatch names a pod."""
    metadata = pod["metadata"]
    return f"{metadata.get('namespace') or NAMESPACE}/{metadata['name']}"


class PodWatch:
    """Follows the pods of every namespace through one streaming watch (by `pod_key`): which
    exist, where each is bound and when the watch saw it bound (in bind order: one stream is in
    resourceVersion order), and which a scheduler tried and marked unschedulable (condition
    PodScheduled=False)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.core = client.CoreV1Api(plane.api_client())
        self.bound: dict[str, str] = {}
        """pod -> node, in the order the bindings were seen (a relist refills it by name)."""
        self.bound_at: dict[str, float] = {}
        """pod -> time.perf_counter() when the watch first saw it bound."""
        self.seen: set[str] = set()
        self.unschedulable: set[str] = set()
        self.ever_unschedulable: set[str] = set()
        """Pods a scheduler marked unschedulable at some point (bound since or not)."""
        self.events = 0
        self.relists = 0
        self._stop = threading.Event()
        self._version = ""
        self._relist()
        self._thread = threading.Thread(target=self._run, name="pod-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                response: Any = self.core.list_pod_for_all_namespaces(
                    watch=True, resource_version=self._version,
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
        response: Any = self.core.list_pod_for_all_namespaces(_preload_content=False)
        listed = json.loads(response.data)
        self.relists += 1
        self.bound.clear()
        self.seen.clear()
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
        name = pod_key(obj)
        if kind == "DELETED":
            self.bound.pop(name, None)
            self.seen.discard(name)
            self.unschedulable.discard(name)
            return
        self.seen.add(name)
        node = (obj.get("spec") or {}).get("nodeName")
        if node:
            if name not in self.bound:
                self.bound_at.setdefault(name, time.perf_counter())
            self.bound[name] = node
            self.unschedulable.discard(name)
            return
        conditions = (obj.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions):
            self.unschedulable.add(name)
            self.ever_unschedulable.add(name)

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
def prepared_cluster(
    nodes: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]],
    namespaces: Sequence[str] = (NAMESPACE,),
) -> Iterator[Cluster]:
    """Control plane up, CRDs installed, Node bodies created and Ready, pods created (unbound)."""
    started = time.perf_counter()
    with (
        running_control_plane(kwok=True, extra_apiserver_args=NO_NODE_TAINTS) as plane,
        plane.api_client() as api,
    ):
        timings = {"control_plane_start_s": time.perf_counter() - started}
        core = client.CoreV1Api(api)
        for namespace in dict.fromkeys([*namespaces, "voltpack-system"]):
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        extensions = client.ApiextensionsV1Api(api)
        for path in sorted(CRDS.glob("*.yaml")):
            extensions.create_custom_resource_definition(yaml.safe_load(path.read_text()))
        timings["node_create_s"] = create_all(plane, nodes)
        mark = time.perf_counter()
        wait_until("kwok makes the nodes Ready", lambda: ready_nodes(core) >= len(nodes), 600)
        timings["nodes_ready_wait_s"] = time.perf_counter() - mark
        watch = PodWatch(plane)
        try:
            timings["node_create_per_s"] = len(nodes) / timings["node_create_s"]
            if pods:
                timings["pod_create_s"] = create_all(plane, pods)
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
        stop_process(process, 30)


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


def gpu_shape(node_count: int, pod_count: int, scheduler_name: str) -> Shape:
    """voltpack's own shape: `node_count` nodes of 16 GPUs, `pod_count` single-GPU pods (1 CPU,
    4 GiB), all timed (no init pods)."""
    nodes = [Node.empty(name=f"bench-node-{i:05d}", cpu_milli=96000, memory_mib=1536000,
                        gpu_count=16, gpu_model="V100M32") for i in range(node_count)]  # fmt: skip
    one_gpu = Pod(name="one-gpu", cpu_milli=1000, memory_mib=4096, num_gpu=1, gpu_milli=1000)
    pods = [bench_pod(f"bench-{i:05d}", one_gpu, scheduler_name) for i in range(pod_count)]
    source = {"test_case": "voltpack single-GPU pods", "workload": f"{node_count}x{pod_count}"}
    return Shape("gpu", [kwok_node(n) for n in nodes], [], pods, [NAMESPACE], source)


WARMUP_NAMESPACE = "bench-warmup"


def warmup_pod(scheduler_name: str) -> dict[str, Any]:
    """The pod that shows the scheduler is up and placing pods before the init pods come: no
    labels, no requests (BestEffort), its own namespace (no shape's constraint counts it)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "warmup", "namespace": WARMUP_NAMESPACE},
        "spec": {"schedulerName": scheduler_name,
                 "containers": [{"name": "main", "image": "bench:1"}]},
    }  # fmt: skip


def wait_bound(
    watch: PodWatch,
    keys: Sequence[str],
    process: subprocess.Popen[bytes],
    log: Path,
    what: str,
    timeout_s: float,
) -> None:
    deadline = time.perf_counter() + timeout_s
    while any(key not in watch.bound for key in keys):
        check_alive(process, log)
        if time.perf_counter() > deadline:
            missing = sum(1 for key in keys if key not in watch.bound)
            raise TimeoutError(
                f"{what}: {missing} of {len(keys)} not bound after {timeout_s:.0f} s"
            )
        time.sleep(0.1)


def shape_run(
    contender: Contender,
    shape: Shape,
    timeout_s: float,
    check: bool,
    keep: Path | None = None,
    profile: Path | None = None,
) -> dict[str, Any]:
    """One scheduler on one shape, as scheduler_perf runs it: the scheduler runs, a warm-up
    pod and then the init pods are created and bound by it; then it is paused (SIGSTOP), the
    measure pods created, and the clock starts when it is resumed (SIGCONT) with all of them
    pending, until the last of them is bound. Then, with `check`, every binding of the run is
    replayed through kube-scheduler's filters (the oracle). `keep`: a file to write the run's
    objects and bind order to (`python benchmarks/k8s_oracle_replay.py FILE` replays it).
    `profile`: where py-spy writes what voltpack's operator did while timed (raw stacks)."""
    init_keys = [pod_key(p) for p in shape.init_pods]
    measure_keys = [pod_key(p) for p in shape.measure_pods]
    namespaces = [*shape.namespaces, WARMUP_NAMESPACE]
    with prepared_cluster(shape.nodes, [], namespaces) as cluster:
        plane, watch = cluster.plane, cluster.watch
        timings = dict(cluster.timings)
        log = plane.workdir / "scheduler.log"
        apiserver = apiserver_pid(plane)
        with started(contender, cluster, "scheduler") as process:
            mark = time.perf_counter()
            create_all(plane, [warmup_pod(contender.scheduler_name)])
            wait_bound(watch, [f"{WARMUP_NAMESPACE}/warmup"], process, log, "warm-up pod", 300)
            timings["scheduler_start_to_warmup_bound_s"] = time.perf_counter() - mark
            mark = time.perf_counter()
            if shape.init_pods:
                timings["init_pod_create_s"] = create_all(plane, shape.init_pods)
                wait_bound(watch, init_keys, process, log, "init pods", timeout_s)
            timings["init_pods_bound_s"] = time.perf_counter() - mark
            idle_share = wait_quiet(process.pid)
            paused = tree_pids(process.pid)
            signal_tree(paused, signal.SIGSTOP)
            try:
                mark = time.perf_counter()
                timings["measure_pod_create_s"] = create_all(plane, shape.measure_pods)
                wait_until("the watch sees the measure pods",
                           lambda: all(k in watch.seen for k in measure_keys), 300)  # fmt: skip
                timings["measure_pod_create_per_s"] = len(measure_keys) / (
                    time.perf_counter() - mark
                )
                spy = (
                    py_spy(process.pid, profile)
                    if profile and contender.scheduler == "voltpack"
                    else None
                )
                before = load()
                scheduler_cpu_before_s = tree_cpu_s(process.pid)
                apiserver_cpu_before_s = tree_cpu_s(apiserver) if apiserver else 0.0
                machine_before = machine_cpu_s()
                begin = time.perf_counter()
            finally:
                signal_tree(paused, signal.SIGCONT)
            deadline = begin + timeout_s
            while any(k not in watch.bound for k in measure_keys):
                check_alive(process, log)
                progress(contender, watch, begin)
                if time.perf_counter() > deadline:
                    break
                time.sleep(0.05)
            end = time.perf_counter()
            # both write each bound pod's Scheduled Event from a queue of their own: the work
            # is done when the last pod is bound and its Event written, so the clock (and the
            # CPU readings) stop at the later of the two
            events = scheduled_events_tally(plane, measure_keys, begin, timeout_s=120.0)
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
            # before the scheduler is stopped: what binding these pods cost it
            scheduler_cpu_s = tree_cpu_s(process.pid) - scheduler_cpu_before_s
            rss_peak_mib = tree_rss_peak_mib(process.pid)
            apiserver_cpu_s = tree_cpu_s(apiserver) - apiserver_cpu_before_s if apiserver else None
            machine_after = machine_cpu_s()
        # how busy all cores were while timed (every process: the control plane, kwok, this
        # benchmark's watch): near 1, the machine and not the scheduler set the pace
        machine_busy_share = (machine_after[0] - machine_before[0]) / max(
            machine_after[1] - machine_before[1], 1e-9
        )
        after = load()
        bound = sum(1 for k in measure_keys if k in watch.bound)
        complete = bound == len(measure_keys)
        if complete:
            end = max(watch.bound_at[k] for k in measure_keys)
        bindings_s = end - begin
        elapsed = max(bindings_s, events["scheduled_events_done_s"] or float("inf"))
        # when the measure pods were bound, from the resume: a slow start or a slow rate
        times = sorted(watch.bound_at[k] - begin for k in measure_keys if k in watch.bound_at)
        bound_after_s = {
            "first_bound_s": times[0] if times else None,
            "half_bound_s": times[len(times) // 2] if times else None,
        }
        bind_order, bindings = list(watch.bound), dict(watch.bound)
        relists = watch.relists
        marked = len(watch.ever_unschedulable & set(measure_keys))
        if keep is not None:
            keep.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, keep.with_name(keep.name.replace(".json.gz", ".log")))
        objects = cluster_objects(plane.api_client()) if check or keep else None
    if keep is not None and objects is not None:
        save_run(keep, objects, bind_order, bindings, measure_keys)
    oracle = replay(objects, bind_order, bindings, set(measure_keys)) if check and objects else None
    return {
        "shape": shape.name,
        "scheduler": contender.scheduler,
        "config": contender.config,
        "nodes": len(shape.nodes),
        "init_pods": len(init_keys),
        "pods": len(measure_keys),
        "pods_per_s": round(bound / elapsed, 1),
        "pods_per_s_bindings_only": round(bound / bindings_s, 1),
        "bound": bound,
        "complete": complete,
        "seconds": round(elapsed, 2),
        "loadavg_before": before,
        "loadavg_after": after,
        "scheduler_cpu_s": round(scheduler_cpu_s, 2),
        "scheduler_cpu_s_per_pod": round(scheduler_cpu_s / max(bound, 1), 6),
        "scheduler_rss_peak_mib": round(rss_peak_mib, 1),
        "scheduler_idle_cpu_share_before": idle_share,
        "apiserver_cpu_s": None if apiserver_cpu_s is None else round(apiserver_cpu_s, 2),
        "machine_busy_share": round(machine_busy_share, 3),
        # every process's busy CPU-seconds over the scheduler's reading's interval (the control
        # plane, kwok, this watch, any other load on the machine)
        "machine_busy_cpu_s": round(machine_after[0] - machine_before[0], 2),
        "machine_cores": os.cpu_count(),
        **events,
        "oracle": oracle if oracle is not None else {"checked": 0, "error": "not checked"},
        "oracle_violations": None if oracle is None else oracle.get("violations"),
        "oracle_confirmed_violations": None if oracle is None else confirmed(oracle),
        "oracle_unchecked": None if oracle is None else oracle.get("final_state_unchecked", 0),
        "watch_relists": relists - 1,
        "measure_pods_marked_unschedulable": marked,
        "profiled": spy is not None,
        **{k: None if v is None else round(v, 2) for k, v in bound_after_s.items()},
        **contender.describe(),
        **{k: round(v, 2) for k, v in timings.items()},
    }


def scheduled_events_tally(
    plane: ControlPlane, keys: Sequence[str], begin: float, timeout_s: float
) -> dict[str, Any]:
    """The measure pods' `Scheduled` Events: the share written by now (the last pod just
    bound), and the seconds from `begin` until all were (polled; None if not within
    `timeout_s`). core/v1 lists kube-scheduler's events.k8s.io Events too."""
    wanted = set(keys)
    namespaces = sorted({key.split("/", 1)[0] for key in keys})
    core = client.CoreV1Api(plane.api_client())

    def written() -> int:
        seen = set()
        for namespace in namespaces:
            reply = call_json(
                core.list_namespaced_event, namespace, field_selector="reason=Scheduled"
            )
            for event in reply.get("items") or []:
                involved = event.get("involvedObject") or {}
                seen.add(f"{involved.get('namespace')}/{involved.get('name')}")
        return len(seen & wanted)

    at_end = written()
    done_s: float | None = None
    deadline = time.perf_counter() + timeout_s
    count = at_end
    while count < len(wanted) and time.perf_counter() < deadline:
        time.sleep(0.5)
        count = written()
    if count >= len(wanted):
        done_s = time.perf_counter() - begin
    return {
        "scheduled_events_share_at_last_binding": round(at_end / max(len(wanted), 1), 3),
        "scheduled_events_done_s": None if done_s is None else round(done_s, 2),
    }


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
    gpus = {f"{NAMESPACE}/p-{i:05d}": pod.num_gpu for i, pod in enumerate(data.arrivals)}
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
    with prepared_cluster([kwok_node(n) for n in data.nodes], pods) as cluster:
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
        "runs as its own process. Measured on a shared 2-core machine (see the 1-minute load "
        "averages): re-run on a quiet machine before quoting.",
    ]
    for section in figures.get("carried_over", []):
        lines += ["", f"The {section} section is carried over from the previous run (`--only`)."]
    if figures["throughput"]:
        lines += ["", *throughput_lines(figures)]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    parser.add_argument("--nodes", type=int, default=5000, help="throughput: 16-GPU nodes")
    parser.add_argument("--pods", type=int, default=10_000, help="throughput: single-GPU pods")
    parser.add_argument("--packing-nodes", type=int, default=None,
                        help="packing: evenly spaced subset of openb's 1,213 nodes")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help="gpu 200 nodes / 1,000 pods, scheduler_perf's 500Nodes workloads, "
                             "200-node packing")  # fmt: skip
    parser.add_argument("--only", choices=("throughput", "packing"), default=None)
    parser.add_argument("--timeout", type=float, default=1800.0, help="per run, seconds")
    parser.add_argument("--shapes", type=lambda text: text.split(","), default=list(SHAPES),
                        help=f"throughput shapes, comma-separated, of {','.join(SHAPES)} "
                             "(default: all)")  # fmt: skip
    parser.add_argument("--workload", default=None,
                        help=f"scheduler_perf workload of each test case (default "
                             f"{DEFAULT_WORKLOAD}; --quick: {QUICK_WORKLOAD})")  # fmt: skip
    parser.add_argument("--scale", type=parse_scale, action="append", default=None,
                        help="gpu shape NODESxPODS, repeatable")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=3,
                        help="throughput runs per contender and shape, alternating")  # fmt: skip
    parser.add_argument("--contenders", type=lambda text: text.split(","),
                        default=["kube-qps5000", "voltpack"],
                        help=f"comma-separated, of {','.join(CONTENDERS)}")  # fmt: skip
    parser.add_argument("--keep-bindings", action="store_true",
                        help="each run's objects and bind order to <out>/bindings/")  # fmt: skip
    parser.add_argument("--profile", type=Path, default=None,
                        help="py-spy voltpack while timed, into DIR (distorts it)")  # fmt: skip
    parser.add_argument("--skip-oracle", action="store_true",
                        help="do not replay the bindings through the oracle")  # fmt: skip
    parser.add_argument("--report", type=Path, default=None,
                        help="summarise a saved result JSON again (and its .md)")  # fmt: skip
    args = parser.parse_args()
    if args.report is not None:
        rewrite_report(args.report)
        return
    unknown = [name for name in args.contenders if name not in CONTENDERS]
    if unknown or args.repeats < 1:
        parser.error(f"--contenders: unknown {unknown}; known {list(CONTENDERS)}"
                     if unknown else "--repeats must be at least 1")  # fmt: skip
    unknown = [name for name in args.shapes if name not in SHAPES]
    if unknown:
        parser.error(f"--shapes: unknown {unknown}; known {list(SHAPES)}")
    if args.only != "packing" and not args.skip_oracle and missing_oracle():
        parser.error(f"scheduler-oracle is not built: {ORACLE_BUILD_HINT} (or --skip-oracle)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the control plane on kill
    if args.quick:
        args.nodes, args.pods = 200, 1000
        args.packing_nodes = args.packing_nodes or 200
    workload = args.workload or (QUICK_WORKLOAD if args.quick else DEFAULT_WORKLOAD)
    settle_s = 10.0 if args.quick else 20.0
    wall = time.perf_counter()
    figures: dict[str, Any] = {"versions": versions(), "throughput": [], "packing": []}
    if args.only != "packing":
        try:
            root = scheduler_perf_dir() if set(args.shapes) - {"gpu"} else None
        except ShapeSourceError as error:
            raise SystemExit(f"k8s_side_by_side: {error}") from None
        figures["throughput_shapes"] = {}
        scales = args.scale or [(args.nodes, args.pods)]
        plans: list[tuple[str, Callable[[str], Shape]]] = []
        for name in args.shapes:
            if name == "gpu":
                for nodes, pods in scales:
                    label = "gpu" if len(scales) == 1 else f"gpu {nodes}x{pods}"
                    plans.append((label, functools.partial(gpu_shape, nodes, pods)))
            else:
                make = functools.partial(scheduler_perf_shape, name, workload_name=workload,
                                         root=root)  # fmt: skip
                plans.append((name, make))
        for label, make_shape in plans:
            figures["throughput_shapes"][label] = make_shape("default-scheduler").describe()
            for run, name in enumerate(run_order(args.contenders, args.repeats)):
                contender = CONTENDERS[name]
                print(f"{label}: {contender.scheduler} ({contender.config}), run {run}",
                      file=sys.stderr, flush=True)  # fmt: skip
                mark = time.perf_counter()
                shape = make_shape(contender.scheduler_name)
                keep = None
                if args.keep_bindings:
                    keep = (
                        (args.out or RESULTS_DIR)
                        / "bindings"
                        / (f"{label.replace(' ', '-')}-{contender.scheduler}-{run}.json.gz")
                    )
                profile = None
                if args.profile:
                    profile = args.profile / f"{label.replace(' ', '-')}-{run}.txt"
                row = guarded_run(
                    contender, shape, args.timeout, not args.skip_oracle, keep, profile
                )
                row |= {"run": run, "run_wall_s": round(time.perf_counter() - mark, 1)}
                print(json.dumps(row), flush=True)
                figures["throughput"].append(row)
        sum_up(figures)
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


def sum_up(figures: dict[str, Any]) -> None:
    """The throughput runs' summary and ratios (against kube-scheduler with scheduler_perf's
    client limits, and the ceiling of the request path where it ran) into `figures`."""
    figures["throughput_summary"] = summarise(figures["throughput"])
    figures["throughput_ratios"] = ratios(
        figures["throughput_summary"], KUBE_RAISED.config, KUBE_NO_PLUGINS.config
    )


def rewrite_report(path: Path) -> None:
    """A saved result's summary, ratios and Markdown made again with this report code (the runs
    themselves unchanged): `path` and the `.md` beside it are rewritten."""
    figures = json.loads(path.read_text())
    if figures.get("throughput"):
        sum_up(figures)
    path.write_text(json.dumps(figures, indent=1) + "\n")
    path.with_suffix(".md").write_text(markdown(figures))


def guarded_run(
    contender: Contender,
    shape: Shape,
    timeout_s: float,
    check: bool,
    keep: Path | None,
    profile: Path | None = None,
) -> dict[str, Any]:
    """shape_run, or a row saying what went wrong (the other runs go on)."""
    try:
        return shape_run(contender, shape, timeout_s, check, keep, profile)
    except (RuntimeError, TimeoutError, OSError) as error:
        print(f"{shape.name}: {contender.scheduler} failed: {error}", file=sys.stderr, flush=True)
        now = load()
        return {"shape": shape.name, "scheduler": contender.scheduler, "config": contender.config,
                "nodes": len(shape.nodes), "init_pods": len(shape.init_pods),
                "pods": len(shape.measure_pods), "pods_per_s": 0.0, "bound": 0,
                "complete": False, "seconds": 0.0, "loadavg_before": now, "loadavg_after": now,
                "oracle_violations": None, "error": str(error)[-2000:]}  # fmt: skip


CARRIED = {
    "throughput": (
        "throughput",
        "throughput_summary",
        "throughput_ratios",
        "throughput_shapes",
    ),
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
