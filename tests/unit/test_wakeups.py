"""When the operator's next cycle is due (`CycleWakeups`)."""

from __future__ import annotations

import threading
import time
from typing import Any

from voltpack.operator.scheduling.wakeups import CycleWakeups

SERVED = frozenset({"voltpack"})


def pod(name: str, node: str = "", scheduler: str = "voltpack", **status: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": scheduler}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec, "status": status}


def test_new_pending_pod_is_due_at_once() -> None:
    wakeups = CycleWakeups(SERVED)
    wakeups.waiting = False
    wakeups.changed(None, pod("a"))
    assert wakeups.due.is_set()


def test_pods_of_other_schedulers_bound_or_finished_are_not_new_work() -> None:
    wakeups = CycleWakeups(SERVED)
    wakeups.waiting = False
    wakeups.changed(None, pod("other", scheduler="default-scheduler"))
    wakeups.changed(pod("b"), pod("b", node="n1"))  # its binding
    wakeups.changed(pod("b", node="n1"), pod("b", node="n1", phase="Running"))
    wakeups.changed(None, pod("done", phase="Succeeded"))
    deleting = pod("c")
    deleting["metadata"]["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    wakeups.changed(None, deleting)
    assert not wakeups.due.is_set()


def test_freed_capacity_and_node_changes_are_due_only_while_pods_wait() -> None:
    wakeups = CycleWakeups(SERVED)
    wakeups.waiting = False
    running = pod("r", node="n1", phase="Running")
    wakeups.changed(running, None)
    wakeups.changed(running, pod("r", node="n1", phase="Succeeded"))
    wakeups.nodes.changed(None, {"metadata": {"name": "n2"}})
    assert not wakeups.due.is_set()
    wakeups.waiting = True
    wakeups.changed(running, None)
    assert wakeups.due.is_set()
    wakeups.cycle_started()
    wakeups.changed(running, pod("r", node="n1", phase="Failed"))
    assert wakeups.due.is_set()
    wakeups.cycle_started()
    wakeups.nodes.changed({"metadata": {"name": "n2"}}, {"metadata": {"name": "n2"}})
    assert wakeups.due.is_set()


def test_a_relist_is_due() -> None:
    wakeups = CycleWakeups(SERVED)
    wakeups.waiting = False
    wakeups.reset([])
    assert wakeups.due.is_set()
    wakeups.cycle_started()
    wakeups.nodes.reset([])
    assert wakeups.due.is_set()


def test_settle_waits_out_a_burst_and_no_longer() -> None:
    wakeups = CycleWakeups(SERVED)
    stop = threading.Event()

    def arrive() -> None:
        for serial in range(10):
            wakeups.changed(None, pod(f"p{serial}"))
            time.sleep(0.005)
        stop.set()

    started = time.monotonic()
    threading.Thread(target=arrive).start()
    wakeups.settle(quiet_s=0.05, max_s=2.0)
    assert stop.is_set()  # returned only after the last arrival...
    assert time.monotonic() - started < 1.0  # ...and well before its bound
    quiet = time.monotonic()
    wakeups.settle(quiet_s=0.05, max_s=2.0)
    assert time.monotonic() - quiet < 0.5  # nothing arriving: one quiet period
    bounded = time.monotonic()
    endless = threading.Thread(
        target=lambda: [wakeups.changed(None, pod("x")) or time.sleep(0.01) for _ in range(100)]
    )
    endless.start()
    wakeups.settle(quiet_s=0.05, max_s=0.2)
    assert time.monotonic() - bounded < 0.6  # arrivals that never stop: the bound
    endless.join()
