"""The first session of examples/README.md, command by command, as a newcomer types it.

The commands are read from the README (its `sh` blocks under "A first session on the
emulator"), so the test and the documentation cannot drift apart. The only change: the ports
8001 (emulator) and 9411 (operator metrics) become free ones, so the test never collides with
an emulator a developer runs. `voltpack emulator` and `voltpack operator` run in the
background, as in their own terminals; `kubectl get pods --watch` runs until every pod it lists
is Running (the reader's Ctrl-C); every other command must succeed.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "examples" / "README.md"
SECTION = "## A first session on the emulator"
BACKGROUND = ("voltpack emulator", "voltpack operator")
WATCH_TIMEOUT_S = 120.0


def session_commands() -> list[str]:
    """The section's commands, in order (comments and blank lines left out)."""
    text = README.read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        for raw in block.replace("\\\n", " ").splitlines():
            line = raw.strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Session:
    """Runs the commands with the venv's `voltpack` first on PATH and an empty kubeconfig."""

    def __init__(self, home: Path) -> None:
        self.home = home
        kubeconfig = home / "kubeconfig"
        kubeconfig.touch()
        bin_dir = str(Path(sys.executable).parent)
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "KUBECONFIG": str(kubeconfig),
            "HOME": str(home),
            "COLUMNS": "250",
            "NO_COLOR": "1",
        }
        self.outputs: list[tuple[str, str]] = []

    def run(self, command: str) -> str:
        result = subprocess.run(
            shlex.split(command), capture_output=True, text=True, cwd=REPO, env=self.env,
            timeout=120, check=False,
        )  # fmt: skip
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        self.outputs.append((command, result.stdout))
        return result.stdout

    @contextmanager
    def background(self, command: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
        with log.open("wb") as out:
            process = subprocess.Popen(
                shlex.split(command), stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=self.env
            )
            try:
                yield process
            finally:
                process.terminate()
                process.wait(timeout=30)

    def watch_until_running(self, command: str) -> dict[str, str]:
        """Run a `--watch` until every pod it has listed is Running and a second passes with
        no new line; its last status per pod."""
        process = subprocess.Popen(
            shlex.split(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            cwd=REPO, env=self.env,
        )  # fmt: skip
        status: dict[str, str] = {}
        last_line = [time.monotonic()]

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                fields = line.split()
                if len(fields) >= 3 and fields[0] != "NAME":
                    status[fields[0]] = fields[2]
                last_line[0] = time.monotonic()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + WATCH_TIMEOUT_S
        finished = False
        while not finished and time.monotonic() < deadline:
            time.sleep(0.2)
            settled = time.monotonic() - last_line[0] > 1.0
            finished = settled and bool(status) and set(status.values()) == {"Running"}
        process.terminate()
        process.wait(timeout=30)
        assert finished, f"{command}: not every pod Running after {WATCH_TIMEOUT_S} s: {status}"
        self.outputs.append((command, repr(status)))
        return dict(status)


def wait_for_line(log: Path, pattern: str, timeout_s: float = 120.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text(errors="replace"))
        if found:
            return found.group(0)
        time.sleep(0.2)
    raise AssertionError(f"{log.name}: no {pattern!r} within {timeout_s} s:\n{log.read_text()}")


def test_the_first_session_of_examples_readme_runs_as_written(tmp_path: Path) -> None:
    assert shutil.which("kubectl"), "the first session needs kubectl (as the integration suite)"
    commands = session_commands()
    assert commands[0].startswith("voltpack emulator")
    assert any(c.startswith("voltpack operator") for c in commands)
    api_port, metrics_port = free_port(), free_port()
    session = Session(tmp_path)
    watches: list[dict[str, str]] = []
    with ExitStack() as background:
        for written in commands:
            command = written.replace("8001", str(api_port)).replace("9411", str(metrics_port))
            name = next((b for b in BACKGROUND if command.startswith(b)), None)
            if name is not None:
                log = tmp_path / f"{name.split()[1]}.log"
                background.enter_context(session.background(command, log))
                if name == "voltpack emulator":
                    wait_for_line(log, r"emulator with 1213 nodes at http://127\.0\.0\.1:\d+")
                else:
                    wait_for_line(log, r"voltpack operator .*: policy fgd")
            elif "--watch" in command:
                watches.append(session.watch_until_running(command))
            else:
                session.run(command)
        operator_log = (tmp_path / "operator.log").read_text()
    # what the README says the reader sees
    assert set(watches[0]) == {"pretrain-worker-0", "pretrain-worker-1"}
    assert set(watches[1]) == {f"gpt-13b-worker-{i}" for i in range(4)}
    gpujobs = next(out for cmd, out in session.outputs if "get gpujobs,queues" in cmd)
    assert re.search(r"pretrain\s+2\s+research\s+Running", gpujobs), gpujobs
    pod = next(out for cmd, out in session.outputs if "get pod pretrain-worker-0" in cmd)
    assert "Running" in pod and "openb-node-" in pod
    events = next(out for cmd, out in session.outputs if "reason=Scheduled" in cmd)
    placed = r"gang default/gpt-13b: 4 pods in leaf b\d \(4 nodes\), predicted step"
    assert re.search(placed, events), events
    power = next(out for cmd, out in session.outputs if "get powerbudgets" in cmd)
    assert "row-1" in power and "gpu-node-1" in power and "fabric" in power
    assert "Traceback" not in operator_log and " WARNING " not in operator_log, operator_log
