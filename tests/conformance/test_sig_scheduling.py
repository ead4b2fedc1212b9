"""Kubernetes' own [sig-scheduling] conformance tests (e2e.test, `make e2e-test`) on a real
control plane with kwok nodes, with kube-scheduler (the reference) and with voltpack's operator
as the cluster's `default-scheduler`.

The focus (`FOCUS`) selects exactly the specs of sig_scheduling_specs.yaml beside this file
(`test_focus_selects_the_documented_specs` checks that with a Ginkgo dry run, so a new e2e.test
release cannot change the run unseen). That file is the one list of expected failures: every
spec must pass, except those marked `kwok_cannot` (they cannot pass on kwok with any scheduler,
each with the reason) and, for voltpack, `voltpack_fails`; a listed spec that passes fails the
test too, so the list stays honest. A `kwok_flaky` spec (a race of kwok's) that fails is run
again, alone, up to `FLAKY_RERUNS` times. While `voltpack_not_runnable` says why the operator cannot
be the scheduler at all, the voltpack run is a strict xfail. docs/k8s-conformance.md
describes the run, each spec and what voltpack's operator needs for it.

`make test` (and so CI, which builds both with `make k8s e2e-test`) runs voltpack's run, about
13 minutes; kube-scheduler's run, the reference voltpack must pass as much as, is the same
test with `VOLTPACK_E2E_REFERENCE=1` (about 23 minutes more). Outside CI the test skips
naming what is not built.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.services import missing_service
from tests.k8s_control_plane import ControlPlane
from tests.k8s_e2e import (
    OPERATOR_IDENTITY,
    OPERATOR_NAMESPACE,
    CaseResult,
    E2ERun,
    create_kwok_nodes,
    e2e_control_plane,
    missing_e2e,
    run_e2e,
    selected_specs,
    voltpack_operator,
)

NODES = 3
"""kwok nodes: PodTopologySpread needs 2, the predicates' saturation tests spread over all."""
FOCUS = (
    r"\[sig-scheduling\] SchedulerPredicates ",  # includes PodTopologySpread Filtering
    r"\[sig-scheduling\] .*\[Conformance\]",  # preemption (basic, critical, ...), LimitRange
    r"\[sig-scheduling\] SchedulerPreemption .*basic",  # also Conformance: named for clarity
    r"\[sig-node\] NoExecuteTaintManager ",  # NoExecute taints (the taint-eviction controller)
)
SKIP: tuple[str, ...] = ()
"""Nothing: the Serial and Disruptive specs are what this run is for (its cluster is its own)."""

SPECS_FILE = Path(__file__).with_name("sig_scheduling_specs.yaml")
"""The one list: every spec the focus selects and which may fail, with why."""
_LISTED = yaml.safe_load(SPECS_FILE.read_text())
SPECS: tuple[str, ...] = tuple(_LISTED["specs"])
"""Exactly the specs `FOCUS` selects (from `e2e.test --ginkgo.dry-run`)."""
KWOK_CANNOT: dict[str, str] = {
    name: entry["kwok_cannot"] for name, entry in _LISTED["specs"].items() if "kwok_cannot" in entry
}
"""Specs that fail on kwok with every scheduler, kube-scheduler included, and why."""
VOLTPACK_EXPECTED_FAILURES: dict[str, str] = {
    name: entry["voltpack_fails"]
    for name, entry in _LISTED["specs"].items()
    if "voltpack_fails" in entry
}
"""Specs (beyond `KWOK_CANNOT`) that voltpack's operator does not pass yet, and why."""
KWOK_FLAKY: dict[str, str] = {
    name: entry["kwok_flaky"] for name, entry in _LISTED["specs"].items() if "kwok_flaky" in entry
}
"""Specs that fail now and then on kwok with any scheduler (a race of kwok's, not the
scheduler's), and why: one that fails is run again, alone, up to `FLAKY_RERUNS` times."""
FLAKY_RERUNS = 2
VOLTPACK_NOT_RUNNABLE: str | None = _LISTED.get("voltpack_not_runnable")
"""Why the operator cannot be the cluster's scheduler at all (None once it can): while set, the
voltpack run is expected to fail (strict: it fails the suite if it passes)."""

OPERATOR_START_S = 60.0
REFERENCE_ENV = "VOLTPACK_E2E_REFERENCE"
"""Set to 1 to also run the focus with kube-scheduler (not a skip in CI: not collected)."""
SCHEDULERS = [
    *(
        [pytest.param("kube-scheduler", id="kube-scheduler")]
        if os.environ.get(REFERENCE_ENV)
        else []
    ),
    pytest.param(
        "voltpack",
        id="voltpack",
        marks=[pytest.mark.xfail(strict=True, reason=VOLTPACK_NOT_RUNNABLE)]
        if VOLTPACK_NOT_RUNNABLE
        else [],
    ),
]


def expected_failures(scheduler: str) -> dict[str, str]:
    """The specs expected to fail with `scheduler`, each with why."""
    if scheduler == "kube-scheduler":
        return dict(KWOK_CANNOT)
    return {**KWOK_CANNOT, **VOLTPACK_EXPECTED_FAILURES}


def _require_built(scheduler: str = "kube-scheduler") -> None:
    """Fails in CI, skips elsewhere, naming what is not built (`make k8s e2e-test` builds it)."""
    missing = missing_e2e(scheduler=scheduler)
    if missing:
        missing_service("e2e-test", f"not built: {', '.join(missing)}; run `make k8s e2e-test`")


def test_focus_selects_the_documented_specs(tmp_path: Path) -> None:
    """The dry run of `FOCUS` lists exactly `SPECS`, and the expected-failure lists name only
    selected specs."""
    _require_built()
    selected = selected_specs(FOCUS, SKIP, report_dir=tmp_path)
    assert selected, "the focus selects no spec"
    assert selected == sorted(SPECS), (
        f"the focus selects other specs than {SPECS_FILE.name} lists (update it and "
        "docs/k8s-conformance.md):\n  now selected: "
        + "\n    ".join(selected)
        + f"\n  not selected any more: {sorted(set(SPECS) - set(selected))}"
    )
    for listed in (KWOK_CANNOT, KWOK_FLAKY, VOLTPACK_EXPECTED_FAILURES):
        assert set(listed) <= set(SPECS), f"listed but not selected: {set(listed) - set(SPECS)}"


def _wait_for_leader(plane: ControlPlane, operator: subprocess.Popen[bytes], log: Path) -> None:
    """Until the operator holds its leader Lease (it schedules only then); fails if it exits."""
    deadline = time.monotonic() + OPERATOR_START_S
    with plane.api_client() as api:
        coordination = client.CoordinationV1Api(api)
        while time.monotonic() < deadline:
            if operator.poll() is not None:
                pytest.fail(
                    f"voltpack operator exited with {operator.returncode}:\n"
                    + log.read_text(errors="replace")[-3000:]
                )
            try:
                leases = coordination.list_namespaced_lease(OPERATOR_NAMESPACE).items
            except ApiException:
                leases = []
            if any(lease.spec.holder_identity == OPERATOR_IDENTITY for lease in leases):
                return
            time.sleep(0.5)
    pytest.fail(
        f"voltpack operator holds no Lease after {OPERATOR_START_S:.0f} s:\n"
        + log.read_text(errors="replace")[-3000:]
    )


def ran(run: E2ERun) -> dict[str, CaseResult]:
    """The run's results of the listed specs and of any other spec that was not skipped (the
    JUnit report lists every spec of e2e.test, those outside the focus as skipped)."""
    return {
        name: result
        for name, result in run.results.items()
        if name in SPECS or result.status != "skipped"
    }


def summary(run: E2ERun, expected: dict[str, str]) -> list[str]:
    """One line per spec: its result, and whether that was expected."""
    results = ran(run)
    lines = [f"e2e.test ran {len(results)} specs in {run.duration_s:.0f} s (exit {run.returncode})"]
    for name in sorted(set(SPECS) | set(results)):
        result = results.get(name)
        status = result.status if result else "not run"
        note = " (expected: " + expected[name] + ")" if name in expected else ""
        lines.append(f"  {status:>9}  {name}{note}")
    return lines


def problems(run: E2ERun, expected: dict[str, str]) -> list[str]:
    """What differs from `SPECS` all passing but `expected`: a failure not listed (with its
    message), a listed spec that passed, a spec not run or not documented."""
    found = []
    results = ran(run)
    for name in SPECS:
        result = results.get(name)
        if result is None:
            found.append(f"not run: {name}")
        elif name in expected and result.status == "passed":
            found.append(f"passed but listed as failing ({expected[name]}): {name}: remove it "
                         f"from {SPECS_FILE.name} and docs/k8s-conformance.md")  # fmt: skip
        elif name not in expected and result.status != "passed":
            message = "\n      ".join(result.message.splitlines()[:12])
            found.append(f"{result.status}: {name}\n      {message}")
    found += [f"ran but not listed in {SPECS_FILE.name}: {name}"
              for name in sorted(set(results) - set(SPECS))]  # fmt: skip
    return found


def exactly(name: str) -> str:
    """A Go regular expression (Ginkgo's focus) matching the spec text `name` only (Ginkgo
    matches the suite's description, a space and the spec's text)."""
    return " " + re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", name) + "$"


def rerun_flaky(plane: ControlPlane, run: E2ERun, tmp_path: Path) -> None:
    """Runs each failed spec of `KWOK_FLAKY` again, alone, up to `FLAKY_RERUNS` times; its
    result becomes the first pass (noting the failures before it), else stays the failure."""
    for name in sorted(KWOK_FLAKY):
        first = run.results.get(name)
        if first is None or first.status == "passed":
            continue
        for attempt in range(1, FLAKY_RERUNS + 1):
            rerun = run_e2e(plane, [exactly(name)], report_dir=tmp_path / f"rerun-{attempt}")
            again = rerun.results.get(name)
            if again is not None and again.status == "passed":
                note = f"passed on rerun {attempt} ({KWOK_FLAKY[name]}); first: {first.message}"
                run.results[name] = replace(again, message=note[:2000])
                print(f"flaky, {note[:300]}: {name}")
                break


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_sig_scheduling(scheduler: str, tmp_path: Path) -> None:
    """The focus on a fresh control plane with `NODES` kwok nodes and `scheduler` placing
    pods: every spec passes but the expected failures, which fail."""
    _require_built(scheduler)
    with e2e_control_plane(scheduler=scheduler) as plane, ExitStack() as stack:
        create_kwok_nodes(plane, NODES)
        if scheduler == "voltpack":
            log = tmp_path / "operator.log"
            operator = stack.enter_context(voltpack_operator(plane, log))
            _wait_for_leader(plane, operator, log)
        run = run_e2e(plane, FOCUS, SKIP, report_dir=tmp_path / "e2e")
        rerun_flaky(plane, run, tmp_path)
    expected = expected_failures(scheduler)
    print("\n".join(summary(run, expected)))
    assert run.results, f"e2e.test wrote no results (exit {run.returncode}):\n{run.log_tail()}"
    found = problems(run, expected)
    assert not found, f"{scheduler}: " + "\n".join(found) + "\n" + "\n".join(summary(run, expected))
