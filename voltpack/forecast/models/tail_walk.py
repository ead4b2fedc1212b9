"""Walking models through the end of their histories: the validation both `ensemble` and
`auto` use to score forecasts on data the models were not fitted on.

A series' `TailPlan` holds back its last `tail` samples; a model is fitted on the rest (the
head), then at each of `origins` forecast origins, `stride` samples apart, it forecasts
`horizon` steps, is scored against the actual samples, and takes the samples up to the next
origin with `update` (the last origin's update takes the rest of the history, so after the walk
the model has seen all of it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from voltpack.forecast.history import CleanHistory
from voltpack.forecast.models.seasonal_naive import seasonal_fit_samples
from voltpack.forecast.series import FloatArray, TimeSeries


@dataclass(frozen=True)
class TailPlan:
    """One series' walk: steps forecast per origin, samples between origins, origins."""

    horizon: int
    stride: int
    origins: int

    @property
    def tail(self) -> int:
        """Samples held out of the head (0 when there is no origin)."""
        return (self.origins - 1) * self.stride + self.horizon if self.origins else 0


MIN_ORIGINS = 4
"""A walk with fewer origins than this is not a validation: the series is not walked."""


def plan_tail(
    length: int,
    max_horizon: int,
    origins: int,
    min_fit_samples: int,
    stride: int | None = None,
    min_head: int = 0,
) -> TailPlan:
    """The walk through a history of `length` samples: each origin forecasts `max_horizon`
    steps, or an eighth of a shorter history; origins are `stride` samples apart (default half
    that horizon); the head keeps `min_fit_samples`, or half of a shorter history, and never
    less than `min_head` (callers pass what ETS needs to fit the season, `two_seasons`);
    at most `origins` fit in what is left, and none when fewer than `MIN_ORIGINS` would."""
    horizon = max(1, min(max_horizon, length // 8))
    step = stride if stride is not None else max(1, horizon // 2)
    room = length - max(min(min_fit_samples, length // 2), min_head) - horizon
    count = min(origins, room // step + 1) if room >= 0 else 0
    return TailPlan(horizon, step, count if count >= MIN_ORIGINS else 0)


@dataclass(frozen=True)
class TailStep:
    """One origin of the walk: the actual samples ahead of each series still walking (by
    series index) and the samples every series takes next (empty for series done walking)."""

    ahead: dict[int, FloatArray]
    updates: list[FloatArray]


def two_seasons(history: CleanHistory) -> int:
    """The samples ETS needs to fit the history's shortest season (0 without a season)."""
    season = min(history.series.seasons, default=0)
    return seasonal_fit_samples(season) if season else 0


def heads(cleaned: Sequence[CleanHistory], plans: Sequence[TailPlan]) -> list[TimeSeries]:
    """Each history without its tail: what the models are fitted on before the walk."""
    return [c.series.head(len(c.values) - p.tail) for c, p in zip(cleaned, plans, strict=True)]


def tail_steps(cleaned: Sequence[CleanHistory], plans: Sequence[TailPlan]) -> Iterator[TailStep]:
    """The walk's origins in order; the caller forecasts, scores `ahead`, then applies
    `updates` before asking for the next step."""
    position = [len(c.values) - p.tail for c, p in zip(cleaned, plans, strict=True)]
    for step in range(max((p.origins for p in plans), default=0)):
        ahead: dict[int, FloatArray] = {}
        updates: list[FloatArray] = []
        for i, (clean, plan) in enumerate(zip(cleaned, plans, strict=True)):
            values, start = clean.values, position[i]
            if step >= plan.origins:
                updates.append(values[:0])
                continue
            ahead[i] = values[start : start + plan.horizon]
            end = len(values) if step + 1 == plan.origins else start + plan.stride
            updates.append(values[start:end])
            position[i] = end
        yield TailStep(ahead, updates)
