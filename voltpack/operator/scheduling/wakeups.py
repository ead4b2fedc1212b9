"""When the operator's next scheduling cycle is due: at once for new work, else on its interval.

A cycle reads every node and pod into a snapshot (about 0.2-0.3 s at 5,000 nodes), so a cycle
for every pod change is mostly waste: a bound pod's status updates (kubelet, kwok) change
nothing a decision reads. Measured on the basic scheduler_perf shape at 5,000 nodes, 5 of the
11 cycles while 1,000 pods were bound had nothing to place and took the CPU the bindings' Events
waited for. kube-scheduler likewise moves a pod from its unschedulable queue back only on an
event that can make it fit.

`CycleWakeups` hears the pod and node caches and sets `due` for:
- a pod that waits for this operator (unbound, one of its scheduler names, not finished or
  deleting), added or changed: new work;
- while the last cycle left pods waiting (`waiting`): a bound pod deleted or finished, and a
  node added, deleted or changed in what scheduling reads (labels, taints, cordon, capacity,
  readiness; not a heartbeat), which may let them fit.
A waiting pod's own status change (the scheduler's condition on it) is not new work either.
Everything else waits for the interval. `settle` then lets a burst of arrivals finish first, so
one cycle takes them all (1,000 pods created at once reached the cache over about 0.2 s).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

SETTLE_QUIET_S = 0.02
"""A burst is over when no new work came for this long..."""
SETTLE_MAX_S = 0.2
"""...or this long after the wake-up, whichever is first."""

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


class CycleWakeups:
    """Listens to the pod cache (itself) and the node cache (`nodes`); `due` is set when a
    cycle should run now."""

    def __init__(self, scheduler_names: frozenset[str]) -> None:
        self.scheduler_names = scheduler_names
        self.due = threading.Event()
        self.waiting = True
        """Whether the last cycle left pods waiting (True until a cycle said otherwise)."""
        self._arrived = threading.Event()
        self.nodes = _NodeChanges(self)

    def reset(self, objects: Iterable[dict[str, Any]]) -> None:
        """The pod cache listed again: anything may have changed."""
        self.due.set()

    def changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """A pod was added, replaced or deleted."""
        if new is not None and self._waits_here(new):
            # a waiting pod's status is what schedulers write (its PodScheduled condition,
            # nominatedNodeName): only a change to what it asks for is new work
            if old is None or not self._waits_here(old) or _asks_differently(old, new):
                self.due.set()
                self._arrived.set()
        elif self.waiting and _holds_node(old) and not _holds_node(new):
            self.due.set()

    def _waits_here(self, pod: dict[str, Any]) -> bool:
        spec = pod.get("spec") or {}
        return (
            not spec.get("nodeName")
            and spec.get("schedulerName") in self.scheduler_names
            and not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") not in FINISHED_PHASES
        )

    def wait(self, timeout_s: float) -> bool:
        """Wait until a cycle is due (True) or `timeout_s` passed (False)."""
        return self.due.wait(timeout_s)

    def settle(self, quiet_s: float = SETTLE_QUIET_S, max_s: float = SETTLE_MAX_S) -> None:
        """Wait while new work keeps arriving: until none came for `quiet_s`, or `max_s`."""
        deadline = time.monotonic() + max_s
        self._arrived.clear()
        while (left := deadline - time.monotonic()) > 0:
            if not self._arrived.wait(min(quiet_s, left)):
                return
            self._arrived.clear()

    def cycle_started(self) -> None:
        """A cycle reads the caches now: what is due so far is in it."""
        self.due.clear()


class _NodeChanges:
    """The node cache's listener: any node change is due while pods wait."""

    def __init__(self, wakeups: CycleWakeups) -> None:
        self.wakeups = wakeups

    def reset(self, objects: Iterable[dict[str, Any]]) -> None:
        self.wakeups.due.set()

    def changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if self.wakeups.waiting and _schedulable_differently(old, new):
            self.wakeups.due.set()


def _asks_differently(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a pod's spec, labels or annotations (what voltpack decides from) changed."""
    return any(
        _at(old, path) != _at(new, path)
        for path in (("spec",), ("metadata", "labels"), ("metadata", "annotations"))
    )


NODE_FIELDS = (
    ("spec", "unschedulable"),
    ("spec", "taints"),
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("status", "allocatable"),
    ("status", "capacity"),
)
"""What a node change must touch to let a waiting pod fit: a heartbeat (conditions' times, a
kubelet's or kwok's periodic status) does not."""


def _schedulable_differently(old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """Whether a node was added, deleted or changed in what scheduling reads (its Ready
    condition's status included)."""
    if old is None or new is None:
        return True
    return any(_at(old, path) != _at(new, path) for path in NODE_FIELDS) or _ready(old) != _ready(
        new
    )


def _ready(node: dict[str, Any]) -> str | None:
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c.get("status") for c in conditions if c.get("type") == "Ready"), None)


def _at(obj: dict[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        obj = obj.get(part) or {}
    return obj


def _holds_node(pod: dict[str, Any] | None) -> bool:
    """Whether `pod` holds a node's resources: bound, not finished, not gone."""
    if pod is None:
        return False
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    return bound and (pod.get("status") or {}).get("phase") not in FINISHED_PHASES
