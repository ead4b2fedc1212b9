"""Fixtures shared by every test suite (where the repository's data files are), and the run's
last line naming the services whose tests were skipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from tests.integration.services import report_missing_services

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The repository checkout this test file belongs to."""

# In CI every property test tries the same examples each run (a property that fails there fails
# every time, never by chance); elsewhere hypothesis searches anew each run, and a failure it
# finds is pinned with @example once fixed. HYPOTHESIS_PROFILE=explore searches in CI too.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore")
if os.environ.get("CI") == "true" or os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "ci")


@pytest.fixture(scope="session")
def openb_dir() -> Path:
    """The folder of the openb trace files shipped in the repository (`data/openb`)."""
    path = REPO_ROOT / "data" / "openb"
    assert (path / "openb_node_list_gpu_node.csv").is_file(), f"openb data missing in {path}"
    return path


def pytest_unconfigure(config: pytest.Config) -> None:
    """End the run with one line naming the missing services and how to install them."""
    report_missing_services(config)
