"""Shared helpers of the benchmark scripts: where to write, and how."""

from __future__ import annotations

import json
import os
import platform
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
