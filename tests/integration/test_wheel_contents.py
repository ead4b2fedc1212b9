"""The wheel carries every data file the package reads: a file missing from the package data
works from a checkout and fails once installed (the inference price list was missing)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SOURCES = (".py", ".pyc")


def data_files() -> set[str]:
    """The package's files that are not Python source, as git tracks them."""
    listed = subprocess.run(
        ["git", "ls-files", "voltpack"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return {name for name in listed if not name.endswith(SOURCES)}


def test_the_wheel_holds_every_data_file_and_its_yaml_loads(tmp_path: Path) -> None:
    tree = tmp_path / "tree"  # a clean copy: no build/ left over from another build
    shutil.copytree(REPO / "voltpack", tree / "voltpack",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, tree / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist"), str(tree)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("voltpack-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        missing = sorted(data_files() - names)
        assert not missing, f"data files left out of the wheel (pyproject package-data): {missing}"
        documents = [n for n in names if n.endswith((".yaml", ".yml"))]
        assert "voltpack/policies/inference/gpu_prices.yaml" in documents
        for name in documents:
            assert yaml.safe_load(archive.read(name)) is not None, name
