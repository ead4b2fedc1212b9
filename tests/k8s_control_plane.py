"""A real Kubernetes control plane for the tests: etcd + kube-apiserver (+ kwok) on loopback.

The binaries are the ones `make k8s` builds from the Go module proxy into `.tools/k8s/bin`
(or the folder named by VOLTPACK_K8S_BIN). `running_control_plane()` starts them on free
127.0.0.1 ports with everything in a temporary folder, waits until the apiserver's `/readyz`
answers ok, yields a `ControlPlane` (URL, admin token, CA file, kubeconfig) and stops them all.

    with running_control_plane() as plane:
        core = kubernetes.client.CoreV1Api(plane.api_client())

The apiserver authenticates with a static token file (one admin in `system:masters`) and
authorizes with RBAC, so a test can also prove what a ServiceAccount may do. No
controller-manager runs unless asked for: nothing creates default ServiceAccounts (the
ServiceAccount admission plugin is off), finishes a namespace's deletion or garbage-collects.
kwok, when asked for, turns Nodes the test creates with the annotation `KWOK_NODE_ANNOTATION`
Ready and runs their pods; those Nodes then get no `node.kubernetes.io/not-ready` taint (the
node-lifecycle controller that lifts it from Ready nodes does not run), so kube-scheduler's
filters, voltpack's too, see them as a real cluster's Ready nodes. `controllers=True` adds
kube-controller-manager (the Deployment, ReplicaSet and DaemonSet controllers unless
`controller_names` names others) and kube-scheduler (unless `scheduler=False`), so a chart's
workloads reach their replicas on kwok's nodes.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from kubernetes import client

REPO = Path(__file__).resolve().parents[1]
BIN_DIR_ENV = "VOLTPACK_K8S_BIN"
DEFAULT_BIN_DIR = REPO / ".tools" / "k8s" / "bin"
KWOK_STAGES = Path(__file__).with_name("kwok_stages.yaml")
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
"""kwok manages the Nodes annotated `kwok.x-k8s.io/node: fake`."""
ADMIN_USER = "voltpack-admin"
START_TIMEOUT_S = 90.0
BUILD_HINT = "run `make k8s` (builds them from the Go module proxy, ~minutes)"


class ControlPlaneError(RuntimeError):
    """The control plane could not start; the message carries the failing log's tail."""


def bin_dir() -> Path:
    return Path(os.environ.get(BIN_DIR_ENV) or DEFAULT_BIN_DIR)


CONTROLLERS = ("deployment", "replicaset", "daemonset")
"""kube-controller-manager's controllers `controllers=True` runs: what a Deployment and a
DaemonSet need to get their pods."""
CONTROLLERS_APISERVER_ARGS = ("--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition")
"""With `controllers=True`: no `node.kubernetes.io/not-ready` taint on a new Node, which only
the node-lifecycle controller (not run: it would evict kwok's pods on a missed heartbeat)
lifts; kube-scheduler would place nothing."""


def missing_binaries(
    *, kwok: bool = False, controllers: bool = False, scheduler: bool = True
) -> list[str]:
    """The binaries `running_control_plane` needs that are not built (empty when all are)."""
    names = ["etcd", "kube-apiserver"] + (["kwok"] if kwok else [])
    names += ["kube-controller-manager"] if controllers else []
    names += ["kube-scheduler"] if controllers and scheduler else []
    return [name for name in names if not os.access(bin_dir() / name, os.X_OK)]


@dataclass
class ControlPlane:
    """A running control plane: where it listens and how to authenticate as its admin."""

    url: str
    """https://127.0.0.1:PORT of kube-apiserver."""
    token: str
    """Bearer token of `ADMIN_USER` (group system:masters)."""
    ca_file: Path
    """The apiserver's self-signed serving certificate (with its CA), to verify TLS."""
    kubeconfig: Path
    etcd_url: str
    workdir: Path
    logs: dict[str, Path] = field(default_factory=dict)

    def configuration(self) -> client.Configuration:
        configuration = client.Configuration(host=self.url)
        configuration.api_key = {"authorization": self.token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        configuration.ssl_ca_cert = str(self.ca_file)
        return configuration

    def api_client(self) -> client.ApiClient:
        return client.ApiClient(self.configuration())

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.logs.get(name)
        if path is None or not path.exists():
            return f"(no {name} log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def free_port() -> int:
    """A port free on 127.0.0.1 now (the OS picks it; a race with other binders is unlikely)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _service_account_key(path: Path) -> None:
    """An RSA key that signs (and, as its own public half, verifies) ServiceAccount tokens."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ControlPlaneError("openssl is needed to make the ServiceAccount signing key")
    subprocess.run(
        [openssl, "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
         "-out", str(path)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip


def _kubeconfig(url: str, ca_file: Path, token: str) -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "real", "cluster": {"server": url, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": ADMIN_USER, "user": {"token": token}}],
        "contexts": [{"name": "real", "context": {"cluster": "real", "user": ADMIN_USER}}],
        "current-context": "real",
    }
    return json.dumps(config, indent=2)  # JSON is YAML: kubectl and kwok read it


class _Processes:
    """The started processes, each with its log file; stopped in reverse order."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.running: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]] = []
        self.logs: dict[str, Path] = {}

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log_path = self.workdir / f"{name}.log"
        log = log_path.open("wb")
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir
        )
        self.running.append((name, process, log))
        self.logs[name] = log_path
        return process

    def check_alive(self) -> None:
        for name, process, _ in self.running:
            if process.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with status {process.returncode}:\n{self.tail(name)}"
                )

    def tail(self, name: str, lines: int = 40) -> str:
        text = self.logs[name].read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        for _, process, log in reversed(self.running):
            if process.poll() is None:
                stop_process(process, 15)
            log.close()
        self.running.clear()


def stop_process(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM, then SIGKILL when it has not exited within `timeout_s`."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout_s)


def _wait(
    what: str, processes: _Processes, probe: Callable[[], str | None], timeout_s: float
) -> None:
    """Polls `probe` (None when ready, else why not) until ready, a process dies, or time is up."""
    deadline = time.monotonic() + timeout_s
    why = "not probed"
    while time.monotonic() < deadline:
        processes.check_alive()
        reason = probe()
        if reason is None:
            return
        why = reason
        time.sleep(0.2)
    names = ", ".join(name for name, _, _ in processes.running)
    tails = "\n".join(f"--- {name}:\n{processes.tail(name)}" for name, _, _ in processes.running)
    raise ControlPlaneError(
        f"{what} not ready after {timeout_s:.0f} s ({why}); logs of {names}:\n{tails}"
    )


def _get(
    url: str, *, token: str | None = None, context: ssl.SSLContext | None = None
) -> str | None:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            body: bytes = response.read()
    except urllib.error.HTTPError as error:
        return f"HTTP {error.code}: {error.read().decode(errors='replace')[:300]}"
    except (OSError, ssl.SSLError) as error:
        return str(error)
    return body.decode(errors="replace")


@contextlib.contextmanager
def running_control_plane(
    *,
    kwok: bool = False,
    controllers: bool = False,
    extra_apiserver_args: tuple[str, ...] = (),
    controller_names: Sequence[str] = CONTROLLERS,
    scheduler: bool = True,
    kwok_stages: Sequence[Path] = (KWOK_STAGES,),
) -> Iterator[ControlPlane]:
    """etcd and kube-apiserver (and kwok, kube-controller-manager and kube-scheduler when asked)
    on free loopback ports, stopped on exit. With `controllers=True`, kube-controller-manager
    runs `controller_names` (its `--controllers` names) and kube-scheduler runs unless
    `scheduler=False` (another scheduler, e.g. voltpack's operator, places the pods). kwok
    reads its Stages from `kwok_stages` (kwok_stages.yaml's unless other files are named)."""
    missing = missing_binaries(kwok=kwok, controllers=controllers, scheduler=scheduler)
    if missing:
        raise ControlPlaneError(f"not built in {bin_dir()}: {', '.join(missing)}; {BUILD_HINT}")
    binaries = bin_dir()
    with tempfile.TemporaryDirectory(prefix="voltpack-k8s-") as tmp:
        # kwok's nodes are Ready at once: the not-ready taint the node-lifecycle controller would
        # lift from them (it does not run) is not put on them in the first place
        lifecycle = CONTROLLERS_APISERVER_ARGS if controllers or kwok else ()
        extra = (*lifecycle, *extra_apiserver_args)
        plane, processes = _start_retrying_ports(
            binaries, Path(tmp), kwok=kwok, extra=extra, kwok_stages=tuple(kwok_stages)
        )
        try:
            if controllers:
                _start_controllers(binaries, plane, processes, controller_names, scheduler)
            yield plane
        finally:
            processes.stop()


PORT_ATTEMPTS = 5
"""Starts tried before giving up when a picked port was taken before its server bound it."""
BIND_FAILURES = ("address already in use", "bind: address")


def _start_retrying_ports(
    binaries: Path,
    tmp: Path,
    *,
    kwok: bool,
    extra: tuple[str, ...],
    kwok_stages: tuple[Path, ...] = (KWOK_STAGES,),
) -> tuple[ControlPlane, _Processes]:
    """`_start` in a fresh folder of `tmp`, again on new ports while a server failed to bind
    the port `free_port` gave it (another process, e.g. a second pytest worker, took it in
    between); any other failure is raised at once."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        workdir = tmp / f"attempt-{attempt}"
        workdir.mkdir()
        processes = _Processes(workdir)
        try:
            plane = _start(
                binaries, workdir, processes, kwok=kwok, extra=extra, kwok_stages=kwok_stages
            )
            return plane, processes
        except ControlPlaneError as error:
            processes.stop()
            if attempt == PORT_ATTEMPTS or not any(text in str(error) for text in BIND_FAILURES):
                raise
        except BaseException:
            processes.stop()
            raise
    raise AssertionError("unreachable")


def etcd_command(
    binaries: Path, workdir: Path, etcd_url: str, peer_url: str, name: str
) -> list[str]:
    """etcd serving `etcd_url` from `workdir/etcd`, one member, no fsync (tests only)."""
    return [
        str(binaries / "etcd"), "--name", name, "--data-dir", str(workdir / "etcd"),
        "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
        "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
        "--initial-cluster", f"{name}={peer_url}", "--listen-metrics-urls", "",
        "--unsafe-no-fsync", "--log-level", "warn",
    ]  # fmt: skip


def apiserver_command(
    binaries: Path,
    etcd_url: str,
    api_port: int,
    cert_dir: Path,
    tokens: Path,
    sa_key: Path,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """kube-apiserver on loopback `api_port` over `etcd_url`: static tokens, RBAC, service
    account tokens signed with `sa_key`; `extra` flags last (they win)."""
    return [
        str(binaries / "kube-apiserver"),
        "--etcd-servers", etcd_url,
        "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
        "--secure-port", str(api_port), "--cert-dir", str(cert_dir),
        "--token-auth-file", str(tokens), "--authorization-mode", "RBAC",
        "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
        "--service-account-key-file", str(sa_key),
        "--service-account-signing-key-file", str(sa_key),
        "--service-cluster-ip-range", "10.0.0.0/24",
        # no controller-manager creates the `default` ServiceAccount that this plugin demands
        "--disable-admission-plugins", "ServiceAccount",
        "--profiling=false",
        # open watches (e.g. of an operator being stopped) would hold shutdown for a minute
        "--shutdown-watch-termination-grace-period=2s",
        *extra,
    ]  # fmt: skip


def _start(
    binaries: Path,
    workdir: Path,
    processes: _Processes,
    *,
    kwok: bool,
    extra: tuple[str, ...],
    kwok_stages: tuple[Path, ...] = (KWOK_STAGES,),
) -> ControlPlane:
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    peer_url = f"http://127.0.0.1:{peer_port}"
    processes.start("etcd", etcd_command(binaries, workdir, etcd_url, peer_url, "voltpack-test"))
    _wait("etcd", processes, lambda: _etcd_health(etcd_url), START_TIMEOUT_S)

    token = secrets.token_hex(16)
    tokens = workdir / "tokens.csv"
    tokens.write_text(f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
    sa_key = workdir / "service-account.key"
    _service_account_key(sa_key)
    cert_dir = workdir / "certs"
    url = f"https://127.0.0.1:{api_port}"
    processes.start(
        "kube-apiserver",
        apiserver_command(binaries, etcd_url, api_port, cert_dir, tokens, sa_key, extra),
    )
    ca_file = cert_dir / "apiserver.crt"
    _wait(
        "kube-apiserver /readyz", processes, lambda: _readyz(url, token, ca_file), START_TIMEOUT_S
    )

    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(_kubeconfig(url, ca_file, token))
    plane = ControlPlane(
        url=url, token=token, ca_file=ca_file, kubeconfig=kubeconfig, etcd_url=etcd_url,
        workdir=workdir, logs=processes.logs,
    )  # fmt: skip
    if kwok:
        kwok_port = free_port()
        processes.start("kwok", [
            str(binaries / "kwok"), "--config", ",".join(map(str, kwok_stages)),
            "--kubeconfig", str(kubeconfig),
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector", f"{KWOK_NODE_ANNOTATION}=fake",
            "--server-address", f"127.0.0.1:{kwok_port}",
        ])  # fmt: skip
        _wait("kwok /healthz", processes, lambda: _ok(_get(f"http://127.0.0.1:{kwok_port}/healthz")),
              START_TIMEOUT_S)  # fmt: skip
    return plane


def _start_controllers(
    binaries: Path,
    plane: ControlPlane,
    processes: _Processes,
    controller_names: Sequence[str],
    scheduler: bool,
) -> None:
    """kube-controller-manager (`controller_names`) and, when `scheduler`, kube-scheduler as
    the admin, no leader election, no serving port; waits until each has logged its start."""
    common = ["--kubeconfig", str(plane.kubeconfig), "--leader-elect=false", "--secure-port=0"]
    processes.start("kube-controller-manager", [
        str(binaries / "kube-controller-manager"), *common,
        "--controllers", ",".join(controller_names), "--v=1",
    ])  # fmt: skip
    started = {"kube-controller-manager": "Started controller"}
    if scheduler:
        processes.start("kube-scheduler", [str(binaries / "kube-scheduler"), *common, "--v=1"])
        started["kube-scheduler"] = "Starting Kubernetes Scheduler"
    # each starts in about a second; a flag one refuses makes it exit at once
    _wait(" and ".join(started), processes, lambda: _logged(processes, started),
          START_TIMEOUT_S)  # fmt: skip


def _logged(processes: _Processes, wanted: dict[str, str]) -> str | None:
    for name, text in wanted.items():
        if text not in processes.logs[name].read_text(errors="replace"):
            return f"{name} has not logged {text!r} yet"
    return None


def _ok(body: str | None) -> str | None:
    return None if body is not None and body.strip() == "ok" else (body or "no answer")


def _etcd_health(etcd_url: str) -> str | None:
    body = _get(f"{etcd_url}/health")
    try:
        healthy = body is not None and json.loads(body).get("health") == "true"
    except ValueError:
        healthy = False
    return None if healthy else (body or "no answer")


def _readyz(url: str, token: str, ca_file: Path) -> str | None:
    if not ca_file.exists():
        return f"{ca_file} not written yet"
    context = ssl.create_default_context(cafile=str(ca_file))
    return _ok(_get(f"{url}/readyz", token=token, context=context))
