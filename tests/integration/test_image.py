"""The image, built by `make image` (buildah on a Debian base made by debootstrap, no Docker
daemon) and run by buildah with chroot isolation on the host's network, as the chart runs it:
uid 10001, writing nothing but /tmp (the chart's root file system is read-only).

CI builds the image before the tests (`.ci/run`), so `make image` here finds it up to date.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.services import missing_service

REPO = Path(__file__).resolve().parents[2]
BUILDAH = REPO / "scripts" / "buildah.sh"
UID = 10001
# what buildah itself mounts or creates in a container's root for `buildah run`
RUNTIME_PATHS = {"tmp", "run", "dev", "proc", "sys", "etc/hosts", "etc/resolv.conf", "etc/hostname"}
IMPORTS = "import voltpack, kubernetes, fastapi, pynvml, lightgbm"


def buildah(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BUILDAH), *args], capture_output=True, text=True, timeout=timeout_s, check=False
    )


@pytest.fixture(scope="module")
def image() -> str:
    """The image's name, after `make image` (built, or found up to date)."""
    for program in ("buildah", "debootstrap"):
        if shutil.which(program) is None:
            missing_service("buildah", f"{program} is not installed")
    if os.geteuid() != 0:
        missing_service("buildah", "make image needs root (debootstrap, chroot isolation)")
    built = subprocess.run(
        ["make", "image"], cwd=REPO, capture_output=True, text=True, timeout=1800, check=False
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    # the last lines: `buildah images` of the image, with its size
    assert "localhost/voltpack" in built.stdout and f" {version} " in built.stdout, built.stdout
    return f"localhost/voltpack:{version}"


@pytest.fixture(scope="module")
def container(image: str) -> Iterator[str]:
    """One working container of the image (with vfs, each is a full copy of it)."""
    created = buildah("from", "--pull-never", image)
    assert created.returncode == 0, created.stderr
    name = created.stdout.strip().splitlines()[-1]
    yield name
    buildah("rm", name)


def run(container: str, *command: str) -> subprocess.CompletedProcess[str]:
    """A command in the container as the image's own user (the chroot shares the host network)."""
    return buildah("run", container, "--", *command, timeout_s=120)


def written_since(root: Path, started_s: float) -> list[str]:
    """Paths under a container's root changed after `started_s`, but for buildah's own."""
    written = []
    for folder, subfolders, files in os.walk(root):
        relative = Path(folder).relative_to(root)
        subfolders[:] = [d for d in subfolders if str(relative / d) not in RUNTIME_PATHS]
        for path in [relative, *(relative / name for name in files)]:
            if str(path) not in RUNTIME_PATHS and (root / path).lstat().st_mtime >= started_s:
                written.append(str(path))
    return written


def test_the_image_runs_voltpack_as_the_charts_user(image: str, container: str) -> None:
    template = "{{.OCIv1.Config.User}} {{.OCIv1.Config.Entrypoint}}"
    config = buildah("inspect", "--format", template, image)
    assert config.stdout.split() == [f"{UID}:{UID}", "[voltpack]"], config.stdout
    assert run(container, "id", "-u").stdout.strip() == str(UID)
    usage = run(container, "voltpack", "--help")
    assert usage.returncode == 0, usage.stderr
    assert "operator" in usage.stdout and "agent" in usage.stdout
    api = run(container, "voltpack", "api", "--help")
    assert api.returncode == 0, api.stderr
    assert "--max-body-bytes" in api.stdout
    imports = run(container, "python", "-c", f"{IMPORTS}; print(voltpack.__file__)")
    assert imports.returncode == 0, imports.stderr
    # the installed package, not a copy of the sources
    assert imports.stdout.strip().startswith("/opt/voltpack/lib/python3.")


def test_the_image_writes_nothing_outside_tmp(container: str) -> None:
    mounted = buildah("mount", container)
    assert mounted.returncode == 0, mounted.stderr
    root = Path(mounted.stdout.strip())
    started_s = time.time()
    for command in (
        ["voltpack", "--help"],
        ["voltpack", "api", "--help"],
        ["python", "-c", IMPORTS],
    ):
        result = run(container, *command)
        assert result.returncode == 0, (command, result.stderr)
    assert written_since(root, started_s) == []
    buildah("umount", container)


def test_the_images_user_can_write_nowhere_but_tmp(container: str) -> None:
    """So a stray write fails here as it would on the chart's read-only root file system (but
    for /var/tmp, world-writable in every Debian image; read-only in the chart's pods)."""
    mounts = [
        arg for path in ("/tmp", "/run", "/proc", "/dev", "/sys") for arg in ("-o", "-path", path)
    ]
    find = ["find", "/", "-xdev", "(", *mounts[1:], ")", "-prune"]
    # find exits 1 for the folders uid 10001 may not read (/root): the list is what counts
    writable = run(container, *find, "-o", "!", "-type", "l", "-writable", "-print")
    assert writable.stdout.split() == ["/var/tmp"], writable.stdout + writable.stderr
