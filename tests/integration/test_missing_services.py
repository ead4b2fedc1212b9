"""A developer's `make test` without some services: the run ends with one line naming them and
the command that installs them (CI instead fails those tests: `.ci/run` installs everything)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.integration.services import install_command, missing_services_line

REPO = Path(__file__).resolve().parents[2]

TESTS_NEEDING_SERVICES = """
import pytest
from tests.integration.services import missing_service

@pytest.mark.parametrize("i", range(3))
def test_scrape(i):
    missing_service("Prometheus", "prometheus is not installed")

def test_history():
    missing_service("PostgreSQL", "initdb not found")

def test_chart():
    missing_service("helm", "not in .tools/helm")

def test_runs():
    pass

def test_skipped_for_another_reason():
    pytest.skip("not about a service")
"""


def run_pytest(folder: Path, *, ci: bool) -> subprocess.CompletedProcess[str]:
    """pytest as `make test` runs it (two xdist workers), with the suite's own conftest hooks."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(REPO)
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "tests.conftest",
         "-p", "no:cacheprovider", "-ra", str(folder)],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300, check=False,
    )  # fmt: skip


def test_the_run_ends_with_one_line_naming_missing_services(tmp_path: Path) -> None:
    (tmp_path / "test_needs_services.py").write_text(TESTS_NEEDING_SERVICES)
    result = run_pytest(tmp_path, ci=False)
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.strip().splitlines()[-1]
    sudo = "" if os.geteuid() == 0 else "sudo "
    assert last == (
        "5 tests skipped, services missing: Prometheus (3), PostgreSQL (1), helm (1); install "
        f"them: {sudo}apt-get install -y postgresql prometheus && make tools (or run .ci/run "
        "as root, which installs them and runs every test)"
    )
    assert result.stdout.count("services missing") == 1
    assert "1 passed, 6 skipped" in result.stdout


def test_in_ci_a_missing_service_fails_its_tests(tmp_path: Path) -> None:
    (tmp_path / "test_needs_services.py").write_text(TESTS_NEEDING_SERVICES)
    result = run_pytest(tmp_path, ci=True)
    assert result.returncode == 1
    assert "5 failed, 1 passed, 1 skipped" in result.stdout
    assert "services missing" not in result.stdout


def test_no_line_when_nothing_is_missing() -> None:
    assert missing_services_line(["Skipped: not about a service"], root=False) is None
    assert install_command(["helm"], root=True) == "make tools"
    assert install_command(["PostgreSQL"], root=True) == "apt-get install -y postgresql"
