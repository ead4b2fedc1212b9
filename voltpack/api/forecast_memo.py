"""A bounded memo of domain power forecasts, computed once per change of the stored history.

A forecast is a pure function of the buckets it reads and the request's parameters, so the
answer only changes when a bucket of the window is added, dropped or merged into. The key is
the parameters plus the store's `PowerHistoryVersion` of the window (one aggregate query over
the (domain, start) index); the least recently used answer goes first beyond `max_entries`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from voltpack.api.forecasts import PowerForecastView, forecast_view
from voltpack.api.sources import History
from voltpack.forecast.domain_power import forecast_domain_power

DEFAULT_MAX_ENTRIES = 256
"""Answers kept: a few parameter sets for each of a site's power domains."""


class ForecastMemo:
    """Least-recently-used forecasts by key, with hit and miss counters (thread-safe)."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._answers: OrderedDict[Hashable, PowerForecastView] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._answers)

    def get_or_compute(
        self, key: Hashable, compute: Callable[[], PowerForecastView]
    ) -> PowerForecastView:
        """The answer kept for `key`, else `compute()` kept (an exception keeps nothing)."""
        with self._lock:
            answer = self._answers.get(key)
            if answer is not None:
                self._answers.move_to_end(key)
                self.hits += 1
                return answer
            self.misses += 1
        answer = compute()  # outside the lock: other domains are not held up
        with self._lock:
            self._answers[key] = answer
            self._answers.move_to_end(key)
            while len(self._answers) > self.max_entries:
                self._answers.popitem(last=False)
        return answer


def domain_forecast(
    history: History,
    memo: ForecastMemo,
    domain: str,
    *,
    since_s: float,
    history_days: float,
    horizon_s: float,
    level: float,
    budget_w: float | None,
    model: str,
) -> PowerForecastView:
    """`domain`'s power forecast from its roll-ups since `since_s`: kept in `memo` until they
    change (ForecastError when it cannot be made, SourceUnavailableError without a store)."""
    version = history.power_history_version(domain, since_s)
    key = (domain, horizon_s, level, history_days, model, budget_w, version)

    def compute() -> PowerForecastView:
        rollups = history.power_rollups(domain, since_s)
        result = forecast_domain_power(
            domain, rollups, horizon_s=horizon_s, level=level, budget_w=budget_w, model=model
        )
        return forecast_view(domain, level, result)

    return memo.get_or_compute(key, compute)
