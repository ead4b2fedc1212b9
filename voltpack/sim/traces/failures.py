"""Failure catalogs: interruption counts by root cause, and the rate they imply.

Format: a CSV with the header `component,category,interruptions,scope` (extra columns are
ignored); `interruptions` is an integer >= 0, `scope` one of `gpu`, `node`, `job` (see
`voltpack.scheduler.fault_recovery.FaultScope`). The shipped catalog is Llama 3 405B's 54-day
pre-training snapshot (`data/failures/`, with its source).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voltpack.model.csv_rows import csv_rows, integer_field
from voltpack.model.errors import TraceFormatError
from voltpack.scheduler.fault_recovery import FaultScope

DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "failures"
LLAMA3_CATALOG = DATA_DIR / "llama3-405b-interruptions.csv"
LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54.0
LLAMA3_GPUS = 16_384
LLAMA3_FAILURES_PER_GPU_DAY = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * LLAMA3_GPUS)
"""419 unexpected interruptions in 54 days on 16,384 H100 GPUs: 4.74e-4 per GPU-day."""


@dataclass(frozen=True)
class FailureCause:
    """One root cause of a catalog, with how often it interrupted training."""

    component: str
    category: str
    interruptions: int
    scope: FaultScope


@dataclass(frozen=True)
class FailureCatalog:
    """Root causes and their counts; `sample` draws causes in proportion to the counts."""

    causes: tuple[FailureCause, ...]
    source: str

    def __post_init__(self) -> None:
        if not self.causes or sum(c.interruptions for c in self.causes) <= 0:
            raise TraceFormatError(f"{self.source}: no interruptions counted")

    @property
    def total(self) -> int:
        return sum(c.interruptions for c in self.causes)

    def share(self, scope: FaultScope) -> float:
        """Fraction of interruptions whose cause has `scope`."""
        return sum(c.interruptions for c in self.causes if c.scope is scope) / self.total

    def sample(self, rng: np.random.Generator, count: int) -> list[FailureCause]:
        """`count` causes drawn with probability proportional to their interruptions."""
        weights = np.array([c.interruptions for c in self.causes], dtype=float)
        picks = rng.choice(len(self.causes), size=count, p=weights / weights.sum())
        return [self.causes[int(i)] for i in picks]


def load_failure_catalog(path: Path = LLAMA3_CATALOG) -> FailureCatalog:
    """Read a failure catalog; a malformed row raises `TraceFormatError` naming it."""
    scopes = {s.value: s for s in FaultScope}
    causes = []
    for line, row in csv_rows(path, ("component", "category", "interruptions", "scope")):
        count = integer_field(f"{path}:{line}", row, "interruptions", 0)
        scope = scopes.get(row["scope"].strip())
        if scope is None:
            raise TraceFormatError(
                f"{path}:{line}: scope {row['scope']!r} is not one of {', '.join(scopes)}"
            )
        causes.append(FailureCause(row["component"].strip(), row["category"].strip(), count, scope))
    return FailureCatalog(tuple(causes), str(path))
