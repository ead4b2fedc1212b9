"""A scheduler's process tree as the side-by-side benchmarks measure it: CPU-seconds and peak
memory from /proc, pausing and resuming it, and py-spy on it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

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


def machine_cpu_s() -> tuple[float, float]:
    """The machine's busy and total CPU-seconds since boot, over all cores (/proc/stat: idle
    and iowait count as not busy): a difference over an interval says how busy it was."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest is in user)
    idle = fields[3] + fields[4]
    return (total - idle) / CLOCK_TICKS_PER_S, total / CLOCK_TICKS_PER_S


def tree_rss_peak_mib(root: int) -> float:
    """Peak resident memory (VmHWM) of `root` plus that of each live descendant, MiB."""
    total_kib = 0
    for pid in tree_pids(root):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total_kib += int(line.split()[1])
    return total_kib / 1024


def signal_tree(pids: Sequence[int], signum: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def wait_quiet(pid: int, share: float = 0.2, window_s: float = 1.0, limit_s: float = 15.0) -> float:
    """Wait until the scheduler uses less than `share` of a core over `window_s` (its work on
    the init pods done), at most `limit_s`; the share it used over the last window."""
    deadline = time.perf_counter() + limit_s
    while True:
        before = tree_cpu_s(pid)
        time.sleep(window_s)
        used = (tree_cpu_s(pid) - before) / window_s
        if used < share or time.perf_counter() > deadline:
            return round(used, 3)


def py_spy(pid: int, output: Path) -> subprocess.Popen[bytes]:
    """py-spy (from $BENCH_PY_SPY or PATH) sampling `pid` at 50 Hz without pausing it, only the
    thread holding the GIL (where its CPU goes), until sent SIGINT; raw stacks (flamegraph.pl's
    input) to `output`."""
    binary = os.environ.get("BENCH_PY_SPY") or shutil.which("py-spy")
    if binary is None:
        raise RuntimeError("--profile: no py-spy (pip install py-spy, or set BENCH_PY_SPY)")
    output.parent.mkdir(parents=True, exist_ok=True)
    argv = [binary, "record", "--pid", str(pid), "--rate", "50", "--nonblocking", "--gil",
            "--format", "raw", "--output", str(output)]  # fmt: skip
    spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2.0)  # attached before the clock starts
    return spy
