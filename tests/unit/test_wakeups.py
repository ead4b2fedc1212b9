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
    assert not wakeups.due.is_set()  # nothing waits: not even a new node is due
    wakeups.waiting = True
    wakeups.changed(running, None)
    assert wakeups.due.is_set()
    wakeups.cycle_started()
    wakeups.changed(running, pod("r", node="n1", phase="Failed"))
    assert wakeups.due.is_set()
    wakeups.cycle_started()
    wakeups.nodes.changed(None, {"metadata": {"name": "n2"}})  # a node added
    assert wakeups.due.is_set()


def node(
    labels: dict[str, str] | None = None, ready: str = "True", beat: str = "t0", **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "labels": labels or {}},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": "64", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": ready, "lastHeartbeatTime": beat}],
        },
    }


def test_only_node_changes_scheduling_reads_are_due_while_pods_wait() -> None:
    wakeups = CycleWakeups(SERVED)
    wakeups.waiting = True
    wakeups.nodes.changed(node(beat="t0"), node(beat="t1"))  # a heartbeat
    assert not wakeups.due.is_set()
    changes = [
        node(labels={"zone": "b"}),
        node(unschedulable=True),
        node(taints=[{"key": "gpu", "effect": "NoSchedule"}]),
        node(ready="False"),
    ]
    for changed in changes:
        wakeups.cycle_started()
        wakeups.nodes.changed(node(), changed)
        assert wakeups.due.is_set(), changed
    wakeups.cycle_started()
    wakeups.nodes.changed(node(), None)  # deleted
    assert wakeups.due.is_set()


def test_a_waiting_pods_status_written_by_a_scheduler_is_not_new_work() -> None:
    wakeups = CycleWakeups(SERVED)
    wakeups.waiting = True
    waiting = pod("w")
    marked = pod("w", conditions=[{"type": "PodScheduled", "status": "False"}])
    wakeups.changed(waiting, marked)
    assert not wakeups.due.is_set()
    gated = pod("g")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    wakeups.changed(gated, pod("g"))  # the gate lifted: its spec changed
    assert wakeups.due.is_set()
    wakeups.cycle_started()
    relabelled = pod("w")
    relabelled["metadata"]["annotations"] = {"voltpack.io/pod-group": "train"}
    wakeups.changed(waiting, relabelled)
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
