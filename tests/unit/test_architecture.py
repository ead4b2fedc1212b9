"""The package boundaries of DESIGN.md: arrows point inward only."""

from __future__ import annotations

import ast
import graphlib
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


CORE = ("model", "perf", "forecast", "policies", "scheduler", "power")
"""The pure decision core (DESIGN.md): no cluster, database or web framework in it."""
DRIVER_LIBRARIES = {"kubernetes", "sqlalchemy", "alembic", "fastapi", "starlette", "aiohttp",
                    "uvicorn", "httpx"}  # fmt: skip


def third_party_imports(path: Path) -> set[str]:
    """Top-level names of the non-voltpack modules one module imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found - {"voltpack"}


@pytest.mark.parametrize("package", CORE)
def test_the_core_imports_no_cluster_database_or_web_library(package: str) -> None:
    violations = [
        f"{module.relative_to(PACKAGE)} imports {sorted(used)}"
        for module in sorted((PACKAGE / package).rglob("*.py"))
        if (used := third_party_imports(module) & DRIVER_LIBRARIES)
    ]
    assert not violations, "; ".join(violations)


def test_the_emulator_imports_only_model_and_telemetry() -> None:
    violations = [
        f"{module.relative_to(PACKAGE)} imports {sorted(extra)}"
        for module in sorted((PACKAGE / "emulator").rglob("*.py"))
        if (extra := voltpack_imports(module) - {"model", "telemetry", "emulator", "__init__"})
    ]
    assert not violations, "; ".join(violations)


def test_the_check_sees_imports() -> None:
    assert voltpack_imports(PACKAGE / "scheduler" / "placement.py") >= {"model", "policies"}
    assert "kubernetes" in third_party_imports(PACKAGE / "operator" / "kube" / "binder.py")
    assert "aiohttp" in third_party_imports(PACKAGE / "emulator" / "http" / "routes.py")
    runner = module_level_imports(PACKAGE / "operator" / "runner.py")
    assert "voltpack.operator.kube.cache" in runner


MAX_ROOM_FILES = 25
"""A package (or sub-package) holds at most this many modules at its top level (issue 31)."""


def test_no_room_holds_more_than_25_modules() -> None:
    crowded = {
        str(folder.relative_to(PACKAGE.parent)): count
        for folder in [PACKAGE, *(p.parent for p in PACKAGE.rglob("__init__.py"))]
        if (count := len(list(folder.glob("*.py")))) > MAX_ROOM_FILES
    }
    assert not crowded, f"split these into sub-packages by concern: {crowded}"


def module_level_imports(path: Path) -> set[str]:
    """voltpack modules imported when `path` is imported (not inside functions or
    `if TYPE_CHECKING:` blocks), as dotted names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("voltpack.")}
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").startswith("voltpack")
        ):
            assert node.module is not None
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def test_no_import_cycles_between_modules() -> None:
    modules = {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(
            ".__init__"
        ): path
        for path in PACKAGE.rglob("*.py")
    }
    graph = {
        name: {
            target
            for target in module_level_imports(path) & modules.keys()
            if target != name and not name.startswith(target + ".")
        }
        for name, path in modules.items()
    }
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


# operator sub-package -> operator sub-packages it may import: kube/ is the plumbing under all
OPERATOR_ROOMS = {
    "kube": set(),
    "dra": {"kube"},
    "inference": {"kube"},
    "power": {"kube", "scheduling"},
    "scheduling": {"kube", "dra", "power", "inference"},
    "admin": {"kube", "scheduling", "dra", "power", "inference"},
}


@pytest.mark.parametrize("room", sorted(OPERATOR_ROOMS))
def test_operator_rooms_import_inward(room: str) -> None:
    violations = []
    for module in sorted((PACKAGE / "operator" / room).rglob("*.py")):
        for name in module_level_imports(module):
            parts = name.split(".")
            if parts[:2] != ["voltpack", "operator"] or len(parts) < 3:
                continue
            target = parts[2]
            if target != room and target not in OPERATOR_ROOMS[room]:
                violations.append(f"{module.relative_to(PACKAGE)} imports {name}")
    assert not violations, "; ".join(violations)


def test_the_operator_rooms_are_all_listed() -> None:
    rooms = {p.parent.name for p in (PACKAGE / "operator").glob("*/__init__.py")}
    assert rooms == set(OPERATOR_ROOMS)
