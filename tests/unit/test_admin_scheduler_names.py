"""The admin API counts the pods of every `schedulerName` the operator serves as voltpack's.

`voltpack operator --scheduler-name voltpack --scheduler-name default-scheduler` places the
pods of both names; `voltpack api` given the same names counts a `default-scheduler` pod in the
summary (pending pods, jobs) and makes a job of it in the views, incremental and recomputed
alike, and never does for a name it does not serve.
"""

from __future__ import annotations

from typing import Any

import pytest
import typer

from tests.unit.test_admin_views_properties import Caches, check, node, pod
from voltpack.cli import app
from voltpack.operator.admin import source as source_module
from voltpack.operator.admin.cluster_tally import ClusterTally
from voltpack.operator.admin.views import AdminViews, full_job_views, job_of
from voltpack.operator.kube.conventions import (
    DEFAULT_SCHEDULER,
    SCHEDULER_NAME,
    SERVED_SCHEDULERS,
)

Obj = dict[str, Any]
BOTH = frozenset({SCHEDULER_NAME, DEFAULT_SCHEDULER})


def named_pod(name: str, scheduler: str, node_name: str | None = None, gpus: int = 1) -> Obj:
    """A pod of `scheduler`, bound to `node_name` (running) or not (pending)."""
    made = pod(name, "default", node_name, True, None, gpus, None, "Running", None)
    made["spec"]["schedulerName"] = scheduler
    if node_name is None:
        made["status"]["phase"] = "Pending"
    return made


def cluster() -> list[Obj]:
    """One pending pod of each name, and a bound `default-scheduler` pod."""
    return [
        named_pod("ours", SCHEDULER_NAME),
        named_pod("kubes", DEFAULT_SCHEDULER),
        named_pod("kubes-bound", DEFAULT_SCHEDULER, "n0"),
        named_pod("elsewhere", "other-scheduler"),
    ]


def tally(names: frozenset[str] | None, pods: list[Obj]) -> ClusterTally:
    counters = ClusterTally(lambda: 0.0) if names is None else ClusterTally(lambda: 0.0, names)
    counters.nodes_listener.reset([node("n0", 0, 4, True, "A100")])
    counters.pods_listener.reset(pods)
    return counters


def test_the_default_is_the_operators() -> None:
    assert frozenset({SCHEDULER_NAME}) == SERVED_SCHEDULERS
    assert ClusterTally(lambda: 0.0).scheduler_names == SERVED_SCHEDULERS
    assert AdminViews().scheduler_names == SERVED_SCHEDULERS


@pytest.mark.parametrize(
    ("names", "pending_pods", "jobs_pending", "jobs_running"),
    [(None, 1, 1, 0), (SERVED_SCHEDULERS, 1, 1, 0), (BOTH, 2, 2, 1)],
)
def test_the_tally_counts_a_default_scheduler_pod_only_when_that_name_is_served(
    names: frozenset[str] | None, pending_pods: int, jobs_pending: int, jobs_running: int
) -> None:
    summary = tally(names, cluster()).summary()
    assert summary.pods_pending == pending_pods
    assert (summary.jobs_pending, summary.jobs_running) == (jobs_pending, jobs_running)
    # a bound pod takes its GPUs whoever placed it
    assert summary.gpus_allocated_by_model == {"A100": 1.0}


def test_the_tally_follows_a_served_pod_through_its_changes() -> None:
    counters = tally(BOTH, [])
    waiting = named_pod("kubes", DEFAULT_SCHEDULER)
    counters.pods_listener.changed(None, waiting)
    assert (counters.summary().pods_pending, counters.summary().jobs_pending) == (1, 1)
    bound = named_pod("kubes", DEFAULT_SCHEDULER, "n0")
    counters.pods_listener.changed(waiting, bound)
    summary = counters.summary()
    assert (summary.pods_pending, summary.jobs_pending, summary.jobs_running) == (0, 0, 1)
    counters.pods_listener.changed(bound, None)
    summary = counters.summary()
    assert (summary.pods_pending, summary.jobs_pending, summary.jobs_running) == (0, 0, 0)


def test_job_of_knows_only_the_served_names() -> None:
    kubes = named_pod("kubes", DEFAULT_SCHEDULER)
    assert job_of(kubes) is None
    assert job_of(kubes, SERVED_SCHEDULERS) is None
    assert job_of(kubes, BOTH) == "default/kubes"
    assert job_of(named_pod("ours", SCHEDULER_NAME)) == "default/ours"
    assert job_of(named_pod("elsewhere", "other-scheduler"), BOTH) is None


@pytest.mark.parametrize(
    ("names", "jobs"),
    [
        (SERVED_SCHEDULERS, ["default/ours"]),
        (BOTH, ["default/kubes", "default/kubes-bound", "default/ours"]),
    ],
)
def test_the_views_make_jobs_of_the_served_names_alone(
    names: frozenset[str], jobs: list[str]
) -> None:
    views = AdminViews(names)
    caches = Caches(views)
    caches.put("nodes", node("n0", 0, 4, True, "A100"))
    for made in cluster():
        caches.put("pods", made)
    full = full_job_views(caches.values("pods"), [], [], {}, {}, names)
    assert [f"{j.namespace}/{j.name}" for j in full] == jobs
    check(views, caches)  # the incremental views equal the recomputation with the same names
    assert (views.job("default", "kubes") is not None) == (DEFAULT_SCHEDULER in names)
    pending = views.job_page(None, 10, pending=True).items
    assert {j.name for j in pending} == {"ours"} | (
        {"kubes"} if DEFAULT_SCHEDULER in names else set()
    )


@pytest.mark.parametrize("names", [SERVED_SCHEDULERS, BOTH])
def test_the_summary_and_the_views_count_the_same_pods(names: frozenset[str]) -> None:
    """What `tests/integration/test_admin_cluster_tally.py` checks on a live cluster, with the
    names given: the summary's counters equal the counts from the job views."""
    views = AdminViews(names)
    caches = Caches(views)
    counters = ClusterTally(lambda: 0.0, names)
    caches.put("nodes", node("n0", 0, 4, True, "A100"))
    counters.nodes_listener.reset(caches.values("nodes"))
    for made in cluster():
        caches.put("pods", made)
        counters.pods_listener.changed(None, made)
    summary, jobs = counters.summary(), views.jobs()
    assert summary.jobs_pending == sum(1 for j in jobs if j.pending_reason is not None)
    assert summary.jobs_running == sum(1 for j in jobs if j.pending_reason is None)
    assert summary.pods_pending == sum(1 for j in jobs for w in j.workers if w.node is None)


def parse(args: list[str]) -> dict[str, Any]:
    """`voltpack ARGS` parsed by the real command line, not run."""
    command = typer.main.get_command(app).commands[args[0]]  # type: ignore[attr-defined]
    return dict(command.make_context(args[0], list(args[1:])).params)


def test_voltpack_api_takes_the_operators_scheduler_names(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not parse(["operator"])["scheduler_name"] and not parse(["api"])["scheduler_name"]
    twice = ["--scheduler-name", "voltpack", "--scheduler-name", "default-scheduler"]
    assert parse(["api", *twice])["scheduler_name"] == parse(["operator", *twice])["scheduler_name"]
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    helps = {
        name: next(p.help for p in commands[name].params if p.name == "scheduler_name")
        for name in ("operator", "api")
    }
    assert helps["operator"] == helps["api"] and "default: voltpack" in helps["api"]

    given: list[frozenset[str]] = []

    class StopError(Exception):
        pass

    def fake_source(*args: Any, scheduler_names: frozenset[str], **kwargs: Any) -> Any:
        given.append(scheduler_names)
        raise StopError

    monkeypatch.setattr(source_module, "KubeAdminSource", fake_source)
    for args, served in (
        ([], SERVED_SCHEDULERS),
        (twice, BOTH),
    ):
        with pytest.raises(StopError):
            app(["api", "--server", "http://127.0.0.1:1", *args], standalone_mode=False)
        assert given.pop() == served
