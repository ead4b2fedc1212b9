"""Freshness by the observer's own clock: when a report *arrived*, not when it says it was made.

As Kubernetes' node-lifecycle controller does with node heartbeats, the power loop never
trusts an agent's clock for freshness: a report counts from the moment the loop first saw it
change. An agent whose clock runs ahead cannot look fresh while silent; one whose clock runs
behind only looks older than it is (fail closed).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass
class ArrivalClock:
    """The arrival time of each source's latest report, on the observer's clock."""

    _seen: dict[Hashable, tuple[object, float]] = field(default_factory=dict)

    def observe(
        self,
        source: Hashable,
        token: object,
        reported_s: float,
        now_s: float,
    ) -> float:
        """When `source`'s report `token` arrived (NaN: no report yet).

        `token` identifies a report (e.g. its heartbeat text): a new token counts from `now_s`,
        when the observer saw it (at most one observation interval after it arrived; the
        stale bound of the controller includes that interval). A report seen first (a new
        leader) counts from the earlier of `now_s` and the time it claims, `reported_s` (NaN:
        unreadable -> never fresh until the next report arrives), so a restart never makes a
        silent agent look fresh.
        """
        if token is None:
            self._seen.pop(source, None)
            return math.nan
        seen = self._seen.get(source)
        if seen is not None and seen[0] == token:
            return seen[1]
        if seen is None:
            arrived = min(now_s, reported_s) if not math.isnan(reported_s) else math.nan
        else:
            arrived = now_s
        self._seen[source] = (token, arrived)
        return arrived

    def forget_except(self, sources: set[Hashable]) -> None:
        """Drop what is known of every source not in `sources` (gone from the cluster)."""
        for source in set(self._seen) - sources:
            del self._seen[source]
