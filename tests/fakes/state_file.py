"""The key=value state files the fake vendor libraries read (shared by the NVML and AMD fakes)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def read_state(path: Path) -> dict[str, str]:
    """The state file as a dict (what the fake's setters wrote back)."""
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key: value for key, value in pairs}


def update_state(path: Path, changes: Mapping[str, str]) -> None:
    """Change (or add) keys of a state file, e.g. {"gpu.3.lost": "1"}."""
    state = read_state(path)
    state.update(changes)
    partial = path.with_name(path.name + ".new")
    partial.write_text("".join(f"{k}={v}\n" for k, v in state.items()), encoding="utf-8")
    partial.replace(path)  # atomic: the fake never reads half a file
