"""Shared helpers of the benchmark scripts: where to write, and how."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from voltpack import __version__

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "voltpack": __version__,
    }


def save(name: str, figures: dict[str, Any], markdown: str, directory: Path | None = None) -> None:
    """Write `<directory>/<name>.json` and `.md` (default: `results/`), and print the Markdown."""
    folder = RESULTS_DIR if directory is None else directory
    folder.mkdir(parents=True, exist_ok=True)
    document = {"benchmark": name, "machine": machine(), **figures}
    (folder / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")
    (folder / f"{name}.md").write_text(markdown)
    print(markdown)


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_emulator_with_nodes(
    nodes_csv: Path, rows: list[str], timeout_s: float = 300.0
) -> tuple[subprocess.Popen[bytes], str]:
    """`voltpack emulator` in a subprocess serving the openb-format node `rows` (written to
    `nodes_csv`); returns the process and its URL once `/version` answers."""
    nodes_csv.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "\n".join(rows) + "\n")
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voltpack",
            "emulator",
            "--port",
            str(port),
            "--nodes",
            str(nodes_csv),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/version", timeout=2).read()
            return process, url
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"the emulator did not start on {url}")
