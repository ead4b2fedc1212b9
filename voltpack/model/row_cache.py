"""Per-node values derived from a snapshot, recomputed only for the nodes that changed.

A scheduling decision reads per-node figures (free milli-GPU, GPUs that fit a share) for every
node, but placing one pod changes one node. Computed from the (nodes x GPUs) arrays each time,
these figures cost about 1 ms per decision on 5,000 16-GPU nodes; kept on the snapshot and
recomputed for the rows whose `row_version` moved, they cost a comparison of one vector.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from voltpack.model.snapshot import ClusterSnapshot, IntArray

RowFunction = Callable[[ClusterSnapshot, IntArray], np.ndarray]
"""Computes a per-row value for the given rows of a snapshot (one value per row)."""


@dataclass
class _HeldRows:
    version: IntArray
    values: np.ndarray


def derived_rows(
    snapshot: ClusterSnapshot, key: Hashable, compute: RowFunction, rows: IntArray | None = None
) -> np.ndarray:
    """`compute(snapshot, rows)` (every row when `rows` is None), from values kept on the
    snapshot under `key` and recomputed only for the rows changed since. `key` names the
    function and its parameters; the result is read only (it may be the kept array)."""
    held = snapshot.derived.get(key)
    if not isinstance(held, _HeldRows) or held.version.shape != snapshot.row_version.shape:
        every = np.arange(snapshot.node_count, dtype=np.int64)
        held = _HeldRows(snapshot.row_version.copy(), np.asarray(compute(snapshot, every)))
        snapshot.derived[key] = held
    else:
        changed = np.flatnonzero(held.version != snapshot.row_version)
        if changed.size:
            held.values[changed] = compute(snapshot, changed)
            held.version[changed] = snapshot.row_version[changed]
    return held.values if rows is None else held.values[rows]
