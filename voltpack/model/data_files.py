"""Where voltpack's shipped data files are: `$VOLTPACK_DATA_DIR`, else `data/` beside the source."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "VOLTPACK_DATA_DIR"


def data_dir_candidates() -> list[Path]:
    """The folders searched for data, in order: the environment's, then the source tree's."""
    configured = os.environ.get(DATA_DIR_ENV)
    candidates = [Path(configured)] if configured else []
    candidates.append(Path(__file__).resolve().parents[2] / "data")
    return candidates


def find_data_dir(marker: Path) -> Path | None:
    """The first candidate folder that holds the file `marker` (relative), or None."""
    for candidate in data_dir_candidates():
        if (candidate / marker).is_file():
            return candidate
    return None
