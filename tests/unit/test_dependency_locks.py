"""The lock files pin every dependency of pyproject.toml, with hashes, at versions it allows.

CI's `make lock-check` re-resolves against the index; this test holds the offline part: a
dependency added to pyproject.toml without `make lock`, or a floor raised past its pin, fails here.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^ ;\\]+)(?P<rest>.*)$")


def locked(path: Path) -> dict[str, tuple[str, int]]:
    """Each pinned name of a lock file: its version and how many hashes follow it."""
    pins: dict[str, tuple[str, int]] = {}
    current = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        match = PIN.match(line)
        if match:
            current = canonicalize_name(match["name"])
            pins[current] = (match["version"], 0)
        elif line.strip().startswith("--hash=sha256:") and current:
            version, hashes = pins[current]
            pins[current] = (version, hashes + 1)
    return pins


def declared(extra: str | None = None) -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    listed = project["optional-dependencies"][extra] if extra else project["dependencies"]
    return [Requirement(text) for text in listed]


def applies(requirement: Requirement) -> bool:
    return requirement.marker is None or requirement.marker.evaluate(default_environment())


def test_every_runtime_dependency_is_pinned_with_hashes_at_an_allowed_version() -> None:
    pins = locked(REPO / "requirements" / "runtime.lock")
    for requirement in filter(applies, declared()):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} missing from requirements/runtime.lock: run make lock"
        version, hashes = pins[name]
        assert requirement.specifier.contains(version, prereleases=True), (name, version)
        assert hashes > 0, f"{name} pinned without a hash"


def test_the_dev_lock_holds_the_runtime_pins_and_every_dev_dependency() -> None:
    runtime = locked(REPO / "requirements" / "runtime.lock")
    dev = locked(REPO / "requirements" / "dev.lock")
    differing = {n: (v, dev.get(n, ("missing",))[0]) for n, (v, _) in runtime.items()}
    assert {n: pair for n, pair in differing.items() if pair[0] != pair[1]} == {}
    for requirement in filter(applies, declared("dev")):
        name = canonicalize_name(requirement.name)
        assert name in dev, f"{name} missing from requirements/dev.lock: run make lock"
        assert requirement.specifier.contains(dev[name][0], prereleases=True), (name, dev[name])
        assert dev[name][1] > 0, f"{name} pinned without a hash"


def test_the_image_and_the_venv_install_from_the_locks() -> None:
    dockerfile = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert "--require-hashes -r requirements/runtime.lock" in dockerfile
    assert "--no-deps" in dockerfile
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "--require-hashes -r $(LOCK_DEV)" in makefile
    assert "make lock-check" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


# modules of voltpack/ that are developer tools, not run by the image
DEV_TOOLS = {"voltpack/telemetry/podresources/regenerate.py": "grpc_tools (grpcio-tools)"}


def imported_modules(path: Path) -> set[str]:
    """The top-level names a file imports (absolute imports, lazy ones in functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_every_package_voltpack_imports_is_in_the_runtime_lock() -> None:
    """The image installs requirements/runtime.lock only: a module the code imports from a
    dev-only package (httpx once) crashes the operator at start in the image."""
    runtime = set(locked(REPO / "requirements" / "runtime.lock"))
    distributions = packages_distributions()
    missing = []
    for path in sorted((REPO / "voltpack").rglob("*.py")):
        relative = str(path.relative_to(REPO))
        for name in sorted(imported_modules(path)):
            if name in sys.stdlib_module_names or name == "voltpack" or relative in DEV_TOOLS:
                continue
            providers = {canonicalize_name(d) for d in distributions.get(name, [])}
            if not providers & runtime:
                missing.append(f"{relative} imports {name} (from {sorted(providers) or '?'})")
    assert not missing, (
        "not in requirements/runtime.lock (add to pyproject's dependencies, "
        "then make lock):\n" + "\n".join(missing)
    )
