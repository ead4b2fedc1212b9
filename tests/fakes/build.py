"""Compiling the fake vendor libraries with gcc, once per source version."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

SHARED_HEADER = Path(__file__).resolve().parent / "fake_state.h"


def source_digest(*texts: str) -> str:
    """A short hash of the sources (and the shared header), naming the build directory."""
    combined = "".join(texts) + SHARED_HEADER.read_text(encoding="utf-8")
    return hashlib.sha256(combined.encode()).hexdigest()[:16]


def compile_shared_library(sources: list[Path], soname: str, output: Path) -> None:
    """gcc -shared, warnings as errors; the library appears atomically at `output`."""
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f"{output.name}.{os.getpid()}.tmp")
    subprocess.run(
        [
            "gcc", "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror",
            f"-Wl,-soname,{soname}", "-o", str(partial), *map(str, sources), "-lpthread",
        ],
        check=True,
        capture_output=True,
        text=True,
    )  # fmt: skip
    partial.replace(output)  # parallel test workers never see half a library
