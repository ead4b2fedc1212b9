"""What a test does when a service it needs is missing: fail in CI, skip (naming it) elsewhere;
and the one line that ends the run, naming every missing service and the command that
installs them all.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import pytest

from tests.k8s_control_plane import ControlPlane, bin_dir, missing_binaries, running_control_plane


@dataclass(frozen=True)
class Service:
    """An outside program some tests need, and how it is installed."""

    name: str
    apt_packages: tuple[str, ...] = ()
    """Debian packages that provide it."""
    command: str = ""
    """Or the project's own command that installs it."""


SERVICES = {
    service.name: service
    for service in (
        Service("Prometheus", apt_packages=("prometheus",)),
        Service("PostgreSQL", apt_packages=("postgresql",)),
        Service("helm", command="make tools"),
        Service("Chromium", apt_packages=("chromium",)),
        # etcd + kube-apiserver (+ kwok), built from the Go module proxy
        Service("kube-apiserver", command="make k8s"),
        # Kubernetes' own e2e.test, for the [sig-scheduling] conformance run on the control
        # plane `make k8s` builds (skipped when built)
        Service("e2e-test", command="make k8s e2e-test"),
        # kube-scheduler's Filter plugins as an oracle (tests/scheduler_oracle.py), same pin
        Service("scheduler-oracle", command="make oracle"),
        # the image, built and run without a Docker daemon (make image; as root)
        Service("buildah", apt_packages=("buildah", "debootstrap")),
    )
}
SKIP_PREFIX = "missing service"
_REASON = re.compile(rf"{SKIP_PREFIX} ([\w-]+):")


def missing_service(service: str, detail: str) -> NoReturn:
    """CI (CI set) runs every test, so a missing service fails it; a developer's run skips it,
    naming the service (one of `SERVICES`) and what is missing; the run ends with one line
    naming every missing service and how to install them."""
    assert service in SERVICES, f"{service!r}: add it to SERVICES with how to install it"
    message = f"{SKIP_PREFIX} {service}: {detail}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI runs every test; .ci/run installs what is missing)")
    pytest.skip(message)


def started_control_plane(**options: Any) -> Iterator[ControlPlane]:
    """A real control plane (`running_control_plane(**options)`) for a fixture to yield from,
    or the missing binaries said as `missing_service` says them."""
    wanted = {k: options[k] for k in ("kwok", "controllers", "scheduler") if k in options}
    missing = missing_binaries(**wanted)
    if missing:
        missing_service("kube-apiserver", f"{', '.join(missing)} not built in {bin_dir()}")
    with running_control_plane(**options) as plane:
        yield plane


def install_command(names: list[str], *, root: bool) -> str:
    """One shell command that installs every service of `names`."""
    packages = sorted({p for name in names for p in SERVICES[name].apt_packages})
    commands = []
    if packages:
        sudo = "" if root else "sudo "
        commands.append(f"{sudo}apt-get install -y {' '.join(packages)}")
    commands += sorted({SERVICES[n].command for n in names if SERVICES[n].command})
    return " && ".join(commands)


def missing_services_line(skip_reasons: list[str], *, root: bool) -> str | None:
    """The run's last line when tests were skipped for missing services, else None."""
    counts: dict[str, int] = {}
    for reason in skip_reasons:
        found = _REASON.search(reason)
        if found and found[1] in SERVICES:
            counts[found[1]] = counts.get(found[1], 0) + 1
    if not counts:
        return None
    names = sorted(counts, key=lambda n: (-counts[n], n))
    skipped = sum(counts.values())
    listed = ", ".join(f"{n} ({counts[n]})" for n in names)
    return (
        f"{skipped} tests skipped, services missing: {listed}; install them: "
        f"{install_command(names, root=root)} (or run .ci/run as root, which installs them "
        "and runs every test)"
    )


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def report_missing_services(config: pytest.Config) -> None:
    """Print `missing_services_line` last (after pytest's own summary), on the controller."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller reports
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    reasons = [_skip_reason(r) for r in reporter.stats.get("skipped", [])]
    line = missing_services_line(reasons, root=os.geteuid() == 0)
    if line is not None:
        reporter.write_line(line, yellow=True, bold=True)
