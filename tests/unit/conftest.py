"""Fixtures of the unit suite: the openb trace, loaded once per test process."""

from __future__ import annotations

from pathlib import Path

import pytest

from voltpack.model import Node, Pod
from voltpack.sim.traces.openb import load_nodes, load_pods


@pytest.fixture(scope="session")
def openb_nodes(openb_dir: Path) -> list[Node]:
    """The 1213 GPU nodes of openb (Node and Pod are immutable, so sharing them is safe)."""
    return load_nodes(openb_dir / "openb_node_list_gpu_node.csv")


@pytest.fixture(scope="session")
def openb_default_pods(openb_dir: Path) -> list[Pod]:
    """The 8152 pods of openb's default pod list."""
    return load_pods(openb_dir / "openb_pod_list_default.csv")
