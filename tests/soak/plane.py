"""A real control plane whose parts can be restarted: etcd, kube-apiserver and kwok on loopback.

The same set-up as `tests/k8s_control_plane.py` (whose helpers it reuses: ports, tokens, the
ServiceAccount key, the readiness probes), but each process is kept with its command line so
that `restart_apiserver()` and `restart_etcd()` can stop one and start it again on the same
port (etcd with the same data directory). Logs are appended across restarts.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tests.k8s_control_plane import (
    ADMIN_USER,
    BUILD_HINT,
    KWOK_NODE_ANNOTATION,
    KWOK_STAGES,
    START_TIMEOUT_S,
    ControlPlane,
    ControlPlaneError,
    _etcd_health,
    _get,
    _kubeconfig,
    _ok,
    _readyz,
    _service_account_key,
    apiserver_command,
    bin_dir,
    etcd_command,
    free_port,
    missing_binaries,
)

__all__ = ["KWOK_NODE_ANNOTATION", "RestartablePlane", "restartable_plane"]

NO_NODE_TAINTS = "TaintNodesByCondition"
"""No controller-manager lifts the not-ready taint this admission plugin puts on new nodes."""


@dataclass
class _Process:
    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None

    def start(self, cwd: Path) -> None:
        self.log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, cwd=cwd
        )

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        if self.log is not None:
            self.log.close()
            self.log = None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class RestartablePlane:
    """etcd + kube-apiserver (+ kwok) whose apiserver and etcd can be restarted."""

    def __init__(self, workdir: Path, *, kwok: bool = True, extra: tuple[str, ...] = ()) -> None:
        missing = missing_binaries(kwok=kwok)
        if missing:
            raise ControlPlaneError(f"not built in {bin_dir()}: {', '.join(missing)}; {BUILD_HINT}")
        self.workdir = workdir
        binaries = bin_dir()
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        self.etcd = _Process(
            "etcd",
            etcd_command(binaries, workdir, self.etcd_url, peer_url, "voltpack-soak"),
            workdir / "etcd.log",
        )
        self.token = secrets.token_hex(16)
        tokens = workdir / "tokens.csv"
        tokens.write_text(f'{self.token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
        sa_key = workdir / "service-account.key"
        _service_account_key(sa_key)
        cert_dir = workdir / "certs"
        self.url = f"https://127.0.0.1:{api_port}"
        self.ca_file = cert_dir / "apiserver.crt"
        self.apiserver = _Process(
            "kube-apiserver",
            apiserver_command(
                binaries, self.etcd_url, api_port, cert_dir, tokens, sa_key,
                ("--disable-admission-plugins", f"ServiceAccount,{NO_NODE_TAINTS}", *extra),
            ),
            workdir / "kube-apiserver.log",
        )  # fmt: skip
        self.kubeconfig = workdir / "kubeconfig"
        self.kwok_port = free_port()
        self.kwok = (
            _Process(
                "kwok",
                [
                    str(binaries / "kwok"),
                    "--config",
                    str(KWOK_STAGES),
                    "--kubeconfig",
                    str(self.kubeconfig),
                    "--manage-all-nodes=false",
                    "--manage-nodes-with-annotation-selector",
                    f"{KWOK_NODE_ANNOTATION}=fake",
                    "--server-address",
                    f"127.0.0.1:{self.kwok_port}",
                ],
                workdir / "kwok.log",
            )
            if kwok
            else None
        )

    @property
    def processes(self) -> list[_Process]:
        return [p for p in (self.etcd, self.apiserver, self.kwok) if p is not None]

    def control_plane(self) -> ControlPlane:
        """The `ControlPlane` view of it (URL, token, CA, kubeconfig) the test helpers take."""
        return ControlPlane(
            url=self.url, token=self.token, ca_file=self.ca_file, kubeconfig=self.kubeconfig,
            etcd_url=self.etcd_url, workdir=self.workdir,
            logs={p.name: p.log_path for p in self.processes},
        )  # fmt: skip

    def start(self) -> None:
        self._start_etcd()
        self._start_apiserver()
        self.kubeconfig.write_text(_kubeconfig(self.url, self.ca_file, self.token))
        if self.kwok is not None:
            self.kwok.start(self.workdir)
            port = self.kwok_port
            self._wait("kwok /healthz", lambda: _ok(_get(f"http://127.0.0.1:{port}/healthz")))

    def _start_etcd(self) -> None:
        self.etcd.start(self.workdir)
        self._wait("etcd", lambda: _etcd_health(self.etcd_url))

    def _start_apiserver(self) -> None:
        self.apiserver.start(self.workdir)
        self.wait_ready()

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the apiserver's /readyz says ok (etcd reachable included)."""
        self._wait(
            "kube-apiserver /readyz", lambda: _readyz(self.url, self.token, self.ca_file), timeout_s
        )

    def restart_apiserver(self, down_s: float = 1.0) -> None:
        """Stop kube-apiserver (SIGTERM: a rolling restart), wait `down_s`, start it again on the
        same port and wait until it is ready."""
        self.apiserver.stop(signal.SIGTERM)
        time.sleep(down_s)
        self._start_apiserver()

    def restart_etcd(self, down_s: float = 1.0) -> None:
        """Kill etcd (SIGKILL: a crash), wait `down_s`, start it again on its data directory and
        wait until the apiserver is ready again."""
        self.etcd.stop(signal.SIGKILL)
        time.sleep(down_s)
        self._start_etcd()
        self.wait_ready()

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()

    def _wait(
        self, what: str, probe: Callable[[], str | None], timeout_s: float = START_TIMEOUT_S
    ) -> None:
        deadline = time.monotonic() + timeout_s
        why = "not probed"
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.process is not None and not process.alive():
                    raise ControlPlaneError(
                        f"{process.name} exited with {process.process.returncode}:\n"
                        f"{process.tail()}"
                    )
            reason = probe()
            if reason is None:
                return
            why = reason
            time.sleep(0.2)
        tails = "\n".join(f"--- {p.name}:\n{p.tail()}" for p in self.processes)
        raise ControlPlaneError(f"{what} not ready after {timeout_s:.0f} s ({why}):\n{tails}")


@contextlib.contextmanager
def restartable_plane(
    *, kwok: bool = True, extra: tuple[str, ...] = (), keep_dir: Path | None = None
) -> Iterator[RestartablePlane]:
    """A started `RestartablePlane` in a temporary folder (or `keep_dir`), stopped on exit."""
    with contextlib.ExitStack() as stack:
        if keep_dir is None:
            workdir = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="voltpack-soak-"))
            )
        else:
            workdir = keep_dir
            workdir.mkdir(parents=True, exist_ok=True)
        plane = RestartablePlane(workdir, kwok=kwok, extra=extra)
        try:
            plane.start()
            yield plane
        finally:
            plane.stop()


def rss_mib(pid: int) -> float | None:
    """Resident set size of process `pid` (MiB) from /proc; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()
