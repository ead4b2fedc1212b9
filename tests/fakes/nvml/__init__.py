"""A fake NVML (`fake_nvml.c`) for testing the NVML backend through the real `pynvml`.

How pynvml finds it: on Linux pynvml's `_LoadNvmlLibrary` calls `ctypes.CDLL("libnvidia-ml.so.1")`,
i.e. `dlopen` of a bare soname. The fake is linked with `-Wl,-soname,libnvidia-ml.so.1`, so

* in another process, `LD_LIBRARY_PATH=<dir of the fake>` makes the loader find it
  (`subprocess_env`), exactly as it would find the driver's copy;
* in this process (LD_LIBRARY_PATH is read only at process start), `load_in_process` dlopens
  the fake by its full path first; glibc's `dlopen` then answers pynvml's bare
  "libnvidia-ml.so.1" with the already-loaded object whose DT_SONAME matches. No pynvml or
  voltpack code is patched.

The fake's state is a `key=value` file named by `$FAKE_NVML_STATE` (format at the top of
`fake_nvml.c`), re-read on every NVML call; setters write it back.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.fakes.build import compile_shared_library, source_digest
from tests.fakes.state_file import read_state, update_state

SOURCE = Path(__file__).with_name("fake_nvml.c")
SONAME = "libnvidia-ml.so.1"
STATE_ENV = "FAKE_NVML_STATE"

_loaded: list[ctypes.CDLL] = []  # keeps the in-process fake loaded for the session


def build_fake_nvml() -> Path:
    """Compile the fake once per source version; the directory holding libnvidia-ml.so.1."""
    digest = source_digest(SOURCE.read_text(encoding="utf-8"))
    lib_dir = Path(tempfile.gettempdir()) / f"voltpack-fake-nvml-{digest}"
    lib = lib_dir / SONAME
    if not lib.is_file():
        compile_shared_library([SOURCE], SONAME, lib)
    return lib_dir


def load_in_process(lib_dir: Path) -> None:
    """Make this process's `dlopen("libnvidia-ml.so.1")` (pynvml's) return the fake."""
    _loaded.append(ctypes.CDLL(str(lib_dir / SONAME)))
    resolved = ctypes.CDLL(SONAME)
    if not hasattr(resolved, "fakeNvmlIsFake"):
        raise RuntimeError(
            "libnvidia-ml.so.1 in this process is not the fake (a real NVML was loaded first)"
        )


def subprocess_env(lib_dir: Path, state: Path) -> dict[str, str]:
    """The environment of a separate process (an agent) that loads the fake by soname."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = str(lib_dir)
    env[STATE_ENV] = str(state)
    return env


@dataclass
class FakeGpu:
    """One fake GPU: an H100 SXM by default. Units are NVML's (mW, mJ, bytes, MHz)."""

    name: str = "NVIDIA H100 80GB HBM3"
    memory_total: int = 80 * 1024**3
    memory_used: int = 20 * 1024**3
    util_gpu: int = 75
    util_memory: int = 40
    power_mw: int = 412_345
    energy_mj: int = 123_456_789
    power_limit_mw: int = 700_000
    power_min_mw: int = 200_000
    power_max_mw: int = 700_000
    power_default_mw: int = 700_000
    sm_clock_mhz: int = 1980
    mem_clock_mhz: int = 2619
    clock_min_mhz: int = 210
    clock_max_mhz: int = 1980
    temperature_c: int = 61
    throttle_reasons: int = 0
    mig_current: int = 0
    numa_node: int = 0
    ecc_uncorrected_volatile: int = 0
    nvlinks: int = 18
    extra: dict[str, str] = field(default_factory=dict)
    """More `field=value` pairs, e.g. {"err.nvmlDeviceGetTemperature": "3", "lost": "1"}."""


def bus_id(index: int) -> str:
    """NVML's PCI bus id of fake GPU `index` (domain 0, bus 0x18 + 0x10 * index)."""
    return f"00000000:{0x18 + 0x10 * index:02X}:00.0"


def write_state(
    path: Path,
    gpus: list[FakeGpu],
    *,
    nvlink_peers: Mapping[int, list[str]] | None = None,
    topology: Mapping[tuple[int, int], int] | None = None,
    extra: Mapping[str, str] | None = None,
) -> Path:
    """Write a state file: GPUs, each GPU's NVLink remotes (bus ids), common ancestors."""
    lines = ["count=" + str(len(gpus)), "driver_version=550.54.15"]
    for i, gpu in enumerate(gpus):
        values = {k: v for k, v in vars(gpu).items() if k != "extra"}
        values.update(uuid=f"GPU-fa4e0000-0000-4000-8000-{i:012d}", bus_id=bus_id(i))
        values.update(gpu.extra)
        lines += [f"gpu.{i}.{key}={value}" for key, value in values.items()]
        for link, remote in enumerate((nvlink_peers or {}).get(i, [])):
            lines.append(f"gpu.{i}.nvlink.{link}={remote}")
    for (a, b), level in (topology or {}).items():
        lines.append(f"topology.{min(a, b)}.{max(a, b)}={level}")
    lines += [f"{key}={value}" for key, value in (extra or {}).items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def raise_xid(state: Path, index: int, *xids: int) -> None:
    """Queue XIDs on fake GPU `index`: the next event-set waits deliver them, in order."""
    key = f"gpu.{index}.xid_queue"
    queued = [x for x in read_state(state).get(key, "").split(",") if x]
    update_state(state, {key: ",".join([*queued, *map(str, xids)])})
