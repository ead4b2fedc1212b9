"""The operator as a process (restarted after SIGKILL, as a Deployment would) and the fault
injector: one fault at a time from a fixed cycle of kinds, each followed by a measurement of
the time to recover.

A fault's end is when what was broken is back (the apiserver ready again, the new operator
holding the leader Lease, the 5xx share switched off, the GPU fault cleared). Recovery is the
first moment after that when a canary pod (no GPU, scheduled by voltpack) created at the end
is bound and no gang is partially bound.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.soak.invariants import Checker, FaultLog
from tests.soak.kube import Kube, KubeError
from tests.soak.plane import RestartablePlane, rss_mib
from tests.soak.proxy import FaultProxy
from tests.soak.world import NAMESPACE, Clock, ClusterView, NodeSpec, SimAgents, gpu_indices, live

log = logging.getLogger(__name__)

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/voltpack-system/leases/voltpack-scheduler"
KINDS = (
    "binding-5xx", "watch-drop", "operator-kill", "gpu-fault", "watch-410",
    "apiserver-restart", "binding-5xx-after", "etcd-restart",
)  # fmt: skip


class OperatorProcess:
    """`python -m voltpack operator` through the proxy's kubeconfig; a new identity per start."""

    def __init__(self, kubeconfig: Path, policy: Path, workdir: Path, lease_s: int) -> None:
        self.kubeconfig = kubeconfig
        self.policy = policy
        self.workdir = workdir
        self.lease_s = lease_s
        self.process: subprocess.Popen[bytes] | None = None
        self.incarnation = 0
        self.identity = ""
        self.rss: list[tuple[float, int, float]] = []
        """(t, incarnation, RSS MiB) samples."""

    def start(self) -> None:
        self.incarnation += 1
        self.identity = f"soak-op-{self.incarnation}"
        argv = [sys.executable, "-m", "voltpack", "operator", "--policy", str(self.policy),
                "--identity", self.identity, "--lease-seconds", str(self.lease_s),
                "--metrics-port", "-1"]  # fmt: skip
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        with (self.workdir / f"operator-{self.incarnation}.log").open("wb") as out:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
            )

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=15)

    def sample(self, t: float) -> float | None:
        if self.process is None or self.process.poll() is not None:
            return None
        value = rss_mib(self.process.pid)
        if value is not None:
            self.rss.append((t, self.incarnation, value))
        return value

    def died(self) -> int | None:
        """The exit status if the operator exited on its own (not killed by the injector)."""
        return None if self.process is None else self.process.poll()

    def logs(self) -> list[Path]:
        return sorted(self.workdir.glob("operator-*.log"))


@dataclass
class Timings:
    window_s: float = 15.0
    """How long a binding-5xx window and a GPU fault last."""
    down_s: float = 1.0
    """How long the apiserver or etcd stays down."""
    operator_restart_s: float = 1.0
    recover_timeout_s: float = 90.0
    gap_s: float = 20.0
    """Quiet time between the recovery of one fault and the next fault."""
    share_before: float = 0.3
    share_after: float = 0.3


@dataclass
class Injector:
    plane: RestartablePlane
    proxy: FaultProxy
    operator: OperatorProcess
    agents: SimAgents
    view: ClusterView
    checker: Checker
    faults: FaultLog
    kube: Kube
    clock: Clock
    nodes: list[NodeSpec]
    timings: Timings = field(default_factory=Timings)
    seed: int = 0
    canaries: int = 0
    kinds: tuple[str, ...] = KINDS

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)

    def run(self, stop: threading.Event, until_s: float) -> None:
        """Faults in `kinds` order, round and round, until `until_s` (none starts later than
        `until_s` minus the time one needs)."""
        stop.wait(self.timings.gap_s)
        index = 0
        while not stop.is_set() and self.clock() < until_s - self.timings.window_s - 10:
            kind = self.kinds[index % len(self.kinds)]
            index += 1
            try:
                self.inject(kind, stop)
            except Exception as error:
                log.exception("fault %s failed", kind)
                fault = self.faults.faults[-1] if self.faults.faults else None
                if fault is not None and fault.ended_s is None:
                    fault.ended_s = self.clock()
                    fault.detail += f" (injector error: {error!r})"
            stop.wait(self.timings.gap_s)

    def inject(self, kind: str, stop: threading.Event) -> None:
        t = self.timings
        fault = self.faults.begin(kind, self.clock())
        if kind in ("binding-5xx", "binding-5xx-after"):
            before, after = (t.share_before, 0.0) if kind == "binding-5xx" else (0.0, t.share_after)
            self.proxy.fail_bindings(before, after)
            stop.wait(t.window_s)
            self.proxy.fail_bindings(0.0, 0.0)
            fault.detail = f"{before:.0%} of bindings 500 before forwarding, {after:.0%} after"
        elif kind == "watch-drop":
            fault.detail = f"{self.proxy.drop_watches()} watches closed"
        elif kind == "watch-410":
            fault.detail = f"{self.proxy.expire_watches()} watches sent 410 Expired"
        elif kind == "operator-kill":
            old = self.operator.identity
            self.operator.kill()
            time.sleep(t.operator_restart_s)
            self.operator.start()
            self._wait_leader(self.operator.identity, t.recover_timeout_s)
            fault.detail = f"SIGKILL {old}; {self.operator.identity} leads"
        elif kind == "gpu-fault":
            fault.detail = self._gpu_fault(stop)
        elif kind == "apiserver-restart":
            self.plane.restart_apiserver(t.down_s)
        elif kind == "etcd-restart":
            self.plane.restart_etcd(t.down_s)
        else:
            raise ValueError(f"unknown fault kind {kind!r}")
        fault.ended_s = self.clock()
        fault.recovered_s = self._recovered(t.recover_timeout_s)

    def _gpu_fault(self, stop: threading.Event) -> str:
        """An XID on two GPUs (one held by a pod when there is one): a reset on one, a node
        reboot on the other, cleared after `window_s`."""
        snapshot = self.view.latest
        held = [
            (p["spec"]["nodeName"], index)
            for p in (snapshot.pods if snapshot else [])
            if p["spec"].get("nodeName") and live(p)
            for index in gpu_indices(p)
        ]
        node = self.random.choice(self.nodes)
        first = self.random.choice(held) if held else (node.name, 0)
        second = (self.random.choice(self.nodes).name, self.random.randrange(node.gpus))
        picks = [first, second]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        xids = [(48, "reset", "double-bit ECC error"), (79, "reboot", "fell off the bus")]
        for (name, gpu), (code, action, message) in zip(picks, xids, strict=True):
            fault = {"signal": "xid", "code": code, "action": action, "message": message,
                     "firstSeen": now, "lastSeen": now}  # fmt: skip
            self.agents.set_fault(name, gpu, fault)
        stop.wait(self.timings.window_s)
        for name, gpu in picks:
            self.agents.set_fault(name, gpu, None)
        return ", ".join(
            f"{n}/gpu{g} XID {c} ({a})" for (n, g), (c, a, _) in zip(picks, xids, strict=True)
        )

    def _wait_leader(self, identity: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                lease = self.kube.get(LEASE_PATH)
                if (lease.get("spec") or {}).get("holderIdentity") == identity:
                    return
            except KubeError:
                pass
            time.sleep(0.2)

    def _recovered(self, timeout_s: float) -> float | None:
        """When a canary created now is bound and no gang is partial; None after the timeout."""
        self.canaries += 1
        name = f"canary-{self.canaries}"
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"schedulerName": "voltpack", "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "soak/canary:1",
                                         "resources": {"requests": {"cpu": "100m"}}}]}}  # fmt: skip
        deadline = time.monotonic() + timeout_s
        created = False
        recovered: float | None = None
        while time.monotonic() < deadline:
            try:
                if not created:
                    self.kube.create(f"/api/v1/namespaces/{NAMESPACE}/pods", body)
                    created = True
                pod = self.kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
                if pod["spec"].get("nodeName") and not self.checker.partial_since:
                    recovered = self.clock()
                    break
            except KubeError as error:
                if error.status == 409:
                    created = True
            time.sleep(0.2)
        with contextlib.suppress(KubeError):
            self.kube.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
        return recovered


def sample_rss(
    operator: OperatorProcess, checker: Checker, clock: Clock, stop: threading.Event,
    on_sample: Callable[[float], Any] | None = None, period_s: float = 1.0,
) -> None:  # fmt: skip
    while not stop.is_set():
        t = clock()
        value = operator.sample(t)
        if value is not None:
            checker.on_rss(t, operator.identity, value)
            if on_sample is not None:
                on_sample(value)
        stop.wait(period_s)
