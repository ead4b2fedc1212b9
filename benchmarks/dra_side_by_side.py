"""kube-scheduler's DRA plugin and voltpack side by side: pods with GPU ResourceClaims on a real
control plane (etcd, kube-apiserver, kwok).

Every run gets a fresh control plane (tests/k8s_control_plane.py, the binaries `make k8s`
builds) with N kwok nodes that advertise no `nvidia.com/gpu`: their GPUs (and RDMA NICs) are
published in ResourceSlices as NVIDIA's GPU DRA driver and DRANet publish them
(`voltpack.emulator.dra.slices`: 8 GPUs and 4 NICs, one NIC per two GPUs on a PCIe root), with
the drivers' DeviceClasses. One ResourceClaim per pod is created by name (no
kube-controller-manager runs to make claims from templates): one GPU of class
`gpu.nvidia.com` (variant `gpu`), or a GPU and an RDMA NIC whose `resource.kubernetes.io/
pcieRoot` match (variant `gpu-nic`). Then the pods, each using its claim.

Two ways the pods arrive (`--arrival`):
- `before`: claims and pods exist before the scheduler starts; the clock runs from its start
  (cache sync included), as benchmarks/k8s_side_by_side.py measures;
- `during`: the scheduler starts first and gets `--warmup` seconds to sync; the clock runs from
  the first pod created (8 client threads create them) until the last one is bound.

A run ends when every pod is bound and every claim has `status.allocation`; it is then checked
from the API server's objects (dra_bench_objects.check_allocations: no device in two claims,
each claim's node selector selects its pod's node, reserved for its pod, constraints hold).

Schedulers (benchmarks/k8s_side_by_side.py's set-ups): kube-scheduler v1.34 default profile
(DynamicResources on by default) with its default client limits (QPS 50 / burst 100) and with
scheduler_perf's (5000 / 5000); voltpack's operator with the shipped policy fgd.

Results: <out>/dra_side_by_side.{json,md}; see docs/dra-side-by-side.md.

Usage:
  python benchmarks/dra_side_by_side.py [--out DIR] [--nodes 1000] [--gpus-per-node 8]
      [--pods 2000] [--variant gpu gpu-nic] [--arrival before during] [--py-spy DIR]
  python benchmarks/dra_side_by_side.py --quick      # 100 nodes / 200 pods
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from _common import RESULTS_DIR, save
from dra_bench_objects import (
    VARIANTS,
    check_allocations,
    claiming_pod,
    dra_node,
    gpu_claim,
)
from k8s_side_by_side import (
    CRDS,
    KUBE_DEFAULT,
    KUBE_RAISED,
    NAMESPACE,
    NO_NODE_TAINTS,
    VOLTPACK,
    Cluster,
    Contender,
    PodWatch,
    check_alive,
    load,
    progress,
    ready_nodes,
    started,
    versions,
    wait_until,
)
from kubernetes import client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.k8s_control_plane

from tests.k8s_control_plane import ControlPlane, running_control_plane  # noqa: E402
from voltpack.emulator.dra.slices import driver_device_classes, node_resource_slices  # noqa: E402

GPU_MODEL = "H100"
"""The slices' GPU product (NVIDIA H100 80GB HBM3; an NVLink domain of all 8)."""
ARRIVALS = ("before", "during")
CONTENDERS = {"kube-default": KUBE_DEFAULT, "kube-raised": KUBE_RAISED, "voltpack": VOLTPACK}
PY_SPY = Path("/tmp/pyspy/bin/py-spy")


def post_all(plane: ControlPlane, bodies: Sequence[dict[str, Any]], threads: int = 8) -> float:
    """Create every Node, Pod, DeviceClass, ResourceSlice or ResourceClaim body with `threads`
    clients; seconds taken."""
    local = threading.local()

    def create(body: dict[str, Any]) -> None:
        if not hasattr(local, "core"):
            api = plane.api_client()
            local.core, local.resource = client.CoreV1Api(api), client.ResourceV1Api(api)
        kind = body["kind"]
        calls: dict[str, Callable[[], object]] = {
            "Node": lambda: local.core.create_node(body, _preload_content=False),
            "Pod": lambda: local.core.create_namespaced_pod(
                NAMESPACE, body, _preload_content=False
            ),
            "DeviceClass": lambda: local.resource.create_device_class(body, _preload_content=False),
            "ResourceSlice": lambda: local.resource.create_resource_slice(
                body, _preload_content=False
            ),
            "ResourceClaim": lambda: local.resource.create_namespaced_resource_claim(
                NAMESPACE, body, _preload_content=False
            ),
        }
        calls[kind]()

    begin = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(create, bodies, chunksize=16):
            pass
    return time.perf_counter() - begin


def list_json(call: Callable[..., Any], *args: Any) -> list[dict[str, Any]]:
    """The items of a list call, parsed as plain JSON."""
    response = call(*args, _preload_content=False)
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    return items


def allocated_claims(resource: client.ResourceV1Api) -> int:
    claims = list_json(resource.list_namespaced_resource_claim, NAMESPACE)
    return sum(1 for c in claims if (c.get("status") or {}).get("allocation"))


def prepare(
    plane: ControlPlane, api: client.ApiClient, node_count: int, gpus: int, claims: list[Any]
) -> dict[str, float]:
    """Namespaces, voltpack's CRDs, the Ready kwok nodes, DeviceClasses, slices and claims."""
    core = client.CoreV1Api(api)
    for namespace in (NAMESPACE, "voltpack-system"):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    extensions = client.ApiextensionsV1Api(api)
    for path in sorted(CRDS.glob("*.yaml")):
        extensions.create_custom_resource_definition(yaml.safe_load(path.read_text()))
    names = [f"dra-node-{i:05d}" for i in range(node_count)]
    timings = {"node_create_s": post_all(plane, [dra_node(n) for n in names])}
    mark = time.perf_counter()
    wait_until("kwok makes the nodes Ready", lambda: ready_nodes(core) >= node_count, 600)
    timings["nodes_ready_wait_s"] = time.perf_counter() - mark
    slices = [s for n in names for s in node_resource_slices(n, GPU_MODEL, None, gpus)]
    timings["slice_create_s"] = post_all(plane, [*driver_device_classes(), *slices])
    timings["claim_create_s"] = post_all(plane, claims)
    return timings


def start_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy sampling `pid` into `out` (collapsed stacks) until the process exits."""
    if not PY_SPY.exists():
        print(f"no {PY_SPY}: not profiling", file=sys.stderr)
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [str(PY_SPY), "record", "--pid", str(pid), "--format", "raw", "--rate", "50",
            "--output", str(out), "--nonblocking"]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds the process has used (Linux /proc), None if unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def dra_run(
    contender: Contender,
    node_count: int,
    gpus: int,
    pod_count: int,
    variant: str,
    arrival: str,
    warmup_s: float,
    timeout_s: float,
    py_spy_dir: Path | None = None,
) -> dict[str, Any]:
    """One scheduler on a fresh control plane: pods bound (and claims allocated) per second."""
    name = contender.scheduler_name
    claims = [gpu_claim(f"c-{i:05d}", NAMESPACE, variant) for i in range(pod_count)]
    pods = [claiming_pod(f"p-{i:05d}", NAMESPACE, f"c-{i:05d}", name) for i in range(pod_count)]
    with (
        running_control_plane(kwok=True, extra_apiserver_args=NO_NODE_TAINTS) as plane,
        plane.api_client() as api,
    ):
        resource = client.ResourceV1Api(api)
        timings = prepare(plane, api, node_count, gpus, claims)
        watch = PodWatch(plane)
        creator: threading.Thread | None = None
        try:
            if arrival == "before":
                timings["pod_create_s"] = post_all(plane, pods)
            before, tag = load(), "scheduler"
            begin = time.perf_counter()
            with started(contender, Cluster(plane, watch), tag) as process:
                profiler = None
                if py_spy_dir is not None and contender.scheduler == "voltpack":
                    out = py_spy_dir / f"voltpack-{variant}-{arrival}.txt"
                    profiler = start_py_spy(process.pid, out)
                if arrival == "during":
                    time.sleep(warmup_s)
                    check_alive(process, plane.workdir / f"{tag}.log")
                    begin = time.perf_counter()

                    def create_pods() -> None:
                        timings["pod_create_s"] = post_all(plane, pods)

                    creator = threading.Thread(target=create_pods, name="pod-create")
                    creator.start()
                deadline = begin + timeout_s
                bound_at = allocated_at = None
                while time.perf_counter() < deadline:
                    check_alive(process, plane.workdir / f"{tag}.log")
                    progress(contender, watch, begin)
                    if bound_at is None and len(watch.bound) >= pod_count:
                        bound_at = time.perf_counter()
                    if bound_at is not None and allocated_claims(resource) >= pod_count:
                        allocated_at = time.perf_counter()
                        break
                    time.sleep(0.05)
                elapsed = (allocated_at or time.perf_counter()) - begin
                cpu_s = cpu_seconds(process.pid)
                if creator is not None:
                    creator.join()
                if profiler is not None:
                    profiler.send_signal(signal.SIGINT)
            after = load()
            if profiler is not None:
                profiler.wait(timeout=60)
            check = check_allocations(
                list_json(client.CoreV1Api(api).list_namespaced_pod, NAMESPACE),
                list_json(resource.list_namespaced_resource_claim, NAMESPACE),
                list_json(resource.list_resource_slice),
            )
            log = plane.workdir / f"{tag}.log"
            if not check.ok:
                print("\n".join(log.read_text(errors="replace").splitlines()[-20:]),
                      file=sys.stderr)  # fmt: skip
        finally:
            watch.stop()
        bound = len(watch.bound)
        return {
            "scheduler": contender.scheduler,
            "config": contender.config,
            "variant": variant,
            "arrival": arrival,
            "nodes": node_count,
            "gpus_per_node": gpus,
            "pods": pod_count,
            "pods_per_s": round(pod_count / elapsed, 1) if allocated_at else None,
            "bound": bound,
            "complete": allocated_at is not None,
            "seconds": round(elapsed, 2),
            "seconds_to_all_bound": round(bound_at - begin, 2) if bound_at else None,
            "scheduler_cpu_s": round(cpu_s, 1) if cpu_s is not None else None,
            "check": check.as_dict(),
            "loadavg_before": before,
            "loadavg_after": after,
            **contender.describe(),
            **{k: round(v, 2) for k, v in timings.items()},
        }


def markdown(figures: dict[str, Any]) -> str:
    lines = [
        "# kube-scheduler's DRA plugin and voltpack side by side on a real control plane",
        "",
        f"etcd + kube-apiserver + kwok, a fresh control plane per run; {figures['nodes']:,} "
        f"kwok nodes whose {figures['gpus_per_node']} GPUs each are only in ResourceSlices "
        "(plus 4 RDMA NICs per node), one ResourceClaim per pod. `before`: pods created before "
        "the scheduler starts, clock from its start; `during`: clock from the first pod created "
        "(scheduler running and synced). Time runs until every pod is bound and every claim "
        "allocated. Shared 2-core machine: see the 1-minute load averages.",
        "",
        "| claim | arrival | scheduler | config | pods | pods/s | s | scheduler CPU s | checks "
        "| load before/after |",
        "|---|---|---|---|---:|---:|---:|---:|---|---|",
    ]
    for r in figures["runs"]:
        check = r["check"]
        verdict = "ok" if check["ok"] else f"{check['problem_count']} problems"
        rate = f"{r['pods_per_s']:.1f}" if r["pods_per_s"] is not None else "incomplete"
        cpu = r.get("scheduler_cpu_s")
        lines.append(
            f"| {r['variant']} | {r['arrival']} | {r['scheduler']} | {r['config']} | "
            f"{r['pods']:,} | {rate} | {r['seconds']:.1f} | "
            f"{'-' if cpu is None else cpu} | {verdict} | "
            f"{r['loadavg_before'][0]} / {r['loadavg_after'][0]} |"
        )
    lines += [
        "",
        "`gpu`: one GPU of class gpu.nvidia.com per claim; `gpu-nic`: a GPU and an RDMA NIC "
        "(class dra.net) with matchAttribute resource.kubernetes.io/pcieRoot. Checks: every pod "
        "bound, every claim allocated and reserved for its pod, its node selector selects the "
        "pod's node, its devices published on that node, constraints hold, no device in two "
        "claims. Scheduler CPU s: user + system CPU seconds of the scheduler's process from its "
        "start to the end of the run (with `during`, the warm-up included).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help=f"results folder ({RESULTS_DIR})")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--pods", type=int, default=2000, help="pods, one claim each")
    parser.add_argument("--variant", nargs="+", choices=VARIANTS, default=["gpu"])
    parser.add_argument("--arrival", nargs="+", choices=ARRIVALS, default=list(ARRIVALS))
    parser.add_argument("--schedulers", nargs="+", choices=sorted(CONTENDERS),
                        default=list(CONTENDERS))  # fmt: skip
    parser.add_argument("--warmup", type=float, default=20.0,
                        help="`during`: seconds the scheduler syncs before pods come")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=1200.0, help="per run, seconds")
    parser.add_argument("--py-spy", type=Path, default=None,
                        help="folder for py-spy's collapsed stacks of voltpack's runs")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="100 nodes / 200 pods")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.pods = 100, 200
    if min(args.nodes, args.gpus_per_node, args.pods) <= 0:
        parser.error("--nodes, --gpus-per-node and --pods must be positive")
    if args.pods > args.nodes * args.gpus_per_node:
        parser.error(f"{args.pods} pods need more GPUs than {args.nodes} x {args.gpus_per_node}")
    nics_per_node = (args.gpus_per_node + 1) // 2
    if "gpu-nic" in args.variant and args.pods > args.nodes * nics_per_node:
        parser.error(f"gpu-nic: {args.pods} pods need more NICs than {args.nodes} x "
                     f"{nics_per_node}")  # fmt: skip
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the control plane on kill
    wall = time.perf_counter()
    figures: dict[str, Any] = {
        "versions": versions(),
        "nodes": args.nodes,
        "gpus_per_node": args.gpus_per_node,
        "pods": args.pods,
        "gpu_model": GPU_MODEL,
        "warmup_s": args.warmup,
        "loadavg_start": load(),
        "runs": [],
    }
    for variant in args.variant:
        for arrival in args.arrival:
            for key in args.schedulers:
                row = dra_run(CONTENDERS[key], args.nodes, args.gpus_per_node, args.pods,
                              variant, arrival, args.warmup, args.timeout,
                              args.py_spy)  # fmt: skip
                print(json.dumps(row), flush=True)
                figures["runs"].append(row)
    figures["loadavg_end"] = load()
    figures["wall_s"] = round(time.perf_counter() - wall, 1)
    figures["py_spy"] = shutil.which("py-spy") or (str(PY_SPY) if args.py_spy else None)
    save("dra_side_by_side", figures, markdown(figures), args.out)


if __name__ == "__main__":
    main()
