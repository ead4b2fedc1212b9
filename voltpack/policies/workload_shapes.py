"""The pod shapes a workload is made of, as observed: a sliding window of recent arrivals."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable

from voltpack.model.workload import Pod
from voltpack.policies.fragmentation import ShapeKey, TypicalPods, shape_key


class ShapeWindow:
    """Counts the shapes of the last `capacity` pods seen."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a shape window needs capacity >= 1, got {capacity}")
        self._keys: deque[ShapeKey] = deque()
        self._counts: Counter[ShapeKey] = Counter()
        self.capacity = capacity

    def add(self, pod: Pod) -> None:
        """Count one pod; forget the oldest when the window is full."""
        key = shape_key(pod)
        self._keys.append(key)
        self._counts[key] += 1
        if len(self._keys) > self.capacity:
            oldest = self._keys.popleft()
            self._counts[oldest] -= 1
            if not self._counts[oldest]:
                del self._counts[oldest]

    def extend(self, pods: Iterable[Pod]) -> None:
        """Count many pods, in order."""
        for pod in pods:
            self.add(pod)

    def __len__(self) -> int:
        return len(self._keys)

    def typical(self, coverage: float) -> TypicalPods:
        """The shapes covering `coverage` of the window, with their frequencies."""
        return TypicalPods.from_counts(self._counts, coverage)
