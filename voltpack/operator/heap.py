"""The operator's heap and Python's cyclic garbage collector.

The operator's caches hold every node and pod as decoded JSON: at 5,000 nodes and 2,000 pods,
hundreds of thousands of objects, none in a reference cycle, and each full collection walked them
all. py-spy on the operator over scheduler_perf's basic shape at 5,000 nodes found a third of
its samples in a 5 ms loop over the nodes, where full collections landed. `HeapKeeper` moves what
outlives a cycle out of the collector's reach (`gc.freeze`, after a collection of the young
generations), so a collection walks only what is new since the last cycle: the same run went
from 307 to 176 samples and from 84 to 112 pods/s (with the Scheduled Events posted raw; one
run each, load average 8). Frozen objects are still freed when their last reference goes; only
a reference cycle among them would stay, so every `thaw_interval_s` the heap is unfrozen and
collected in full once. `GcPauses` counts the collector's pauses.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

THAW_INTERVAL_S = 600.0
"""How often the frozen heap is unfrozen and collected in full (reference cycles among objects
frozen since: exceptions with their frames, for instance)."""


@dataclass
class GcPauses:
    """Seconds and count of the cyclic collector's pauses per generation, from `gc.callbacks`."""

    seconds: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    collections: list[int] = field(default_factory=lambda: [0, 0, 0])
    _started: dict[int, float] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def remove(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        # the collector runs with the GIL held, in whichever thread allocated: key by thread
        thread = threading.get_ident()
        if phase == "start":
            self._started[thread] = time.perf_counter()
            return
        started = self._started.pop(thread, None)
        if started is None:
            return
        generation = min(int(info.get("generation", 2)), 2)
        with self._lock:
            self.seconds[generation] += time.perf_counter() - started
            self.collections[generation] += 1


class HeapKeeper:
    """Freezes what outlives each scheduling cycle; thaws and collects in full now and then."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        thaw_interval_s: float = THAW_INTERVAL_S,
    ) -> None:
        self.clock = clock
        self.thaw_interval_s = thaw_interval_s
        self._thawed_at = clock()
        self.freezes = 0
        self.thaws = 0

    def after_cycle(self) -> None:
        """Called by the cycle's thread once a cycle is done (its garbage mostly freed by
        reference counting already)."""
        now = self.clock()
        if now - self._thawed_at >= self.thaw_interval_s:
            gc.unfreeze()
            gc.collect()
            self._thawed_at = now
            self.thaws += 1
        else:
            gc.collect(1)  # the young generations only: what this cycle left in cycles
        gc.freeze()
        self.freezes += 1
