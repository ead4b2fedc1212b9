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


def save(name: str, figures: dict[str, Any], markdown: str) -> None:
    """Write `results/<name>.json` and `results/<name>.md`, and print the Markdown."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    document = {"benchmark": name, "machine": machine(), **figures}
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")
    (RESULTS_DIR / f"{name}.md").write_text(markdown)
    print(markdown)
