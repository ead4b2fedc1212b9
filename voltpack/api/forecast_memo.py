"""A bounded memo of domain power forecasts, computed once per change of the stored history.

A forecast is a pure function of the buckets it reads and the request's parameters, so the
answer only changes when a bucket of the window is added, dropped or merged into. The key is
the parameters; each answer is kept with the store's `PowerHistoryVersion` of its window (one
aggregate query over the (domain, start) index), and is current while that version is. The
least recently used answer goes first beyond `max_entries`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from voltpack.api.forecasts import PowerForecastView, forecast_view
from voltpack.api.sources import History
from voltpack.forecast.domain_power import forecast_domain_power

DEFAULT_MAX_ENTRIES = 256
"""Answers kept: a few parameter sets for each of a site's power domains."""
DEFAULT_MAX_STALE_S = 120.0
"""How old an answer may be and still be served while a newer one is computed: two of the
operator's one-minute buckets (the answer's `start_s` says which data it is from)."""


@dataclass
class _Kept:
    version: Hashable
    answer: PowerForecastView
    computed_at_s: float


class ForecastMemo:
    """Least-recently-used forecasts by their parameters, each with the history version it was
    computed from (thread-safe). An answer whose history has changed since is served while it
    is at most `max_stale_s` old, and a newer one is computed in the background (HTTP's
    stale-while-revalidate): a request waits for a forecast (~0.1-0.4 s of model fitting) only
    for parameters not asked within `max_stale_s`. Counters: `hits` (current), `stale` (served
    while refreshed), `misses` (computed in the request)."""

    def __init__(
        self,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_stale_s: float = DEFAULT_MAX_STALE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self.max_stale_s = max_stale_s
        self.hits = 0
        self.stale = 0
        self.misses = 0
        self._clock = clock
        self._answers: OrderedDict[Hashable, _Kept] = OrderedDict()
        self._refreshing: set[Hashable] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="voltpack-forecast")

    def __len__(self) -> int:
        return len(self._answers)

    def get_or_compute(
        self, key: Hashable, version: Hashable, compute: Callable[[], PowerForecastView]
    ) -> PowerForecastView:
        """The answer kept for `key` if computed from `version` (or stale within bounds, then
        refreshed in the background), else `compute()` kept (an exception keeps nothing)."""
        with self._lock:
            kept = self._answers.get(key)
            if kept is not None and kept.version == version:
                self._answers.move_to_end(key)
                self.hits += 1
                return kept.answer
            if kept is not None and self._clock() - kept.computed_at_s <= self.max_stale_s:
                self._answers.move_to_end(key)
                self.stale += 1
                if key not in self._refreshing:
                    self._refreshing.add(key)
                    self._pool.submit(self._refresh, key, version, compute)
                return kept.answer
            self.misses += 1
        answer = compute()  # outside the lock: other domains are not held up
        self._keep(key, version, answer)
        return answer

    def wait_idle(self, timeout_s: float = 30.0) -> bool:
        """Whether the background refreshes finished within `timeout_s` (for tests)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._refreshing:
                    return True
            time.sleep(0.01)
        return False

    def _refresh(
        self, key: Hashable, version: Hashable, compute: Callable[[], PowerForecastView]
    ) -> None:
        try:
            self._keep(key, version, compute())
        except Exception:  # e.g. the history became unforecastable: the next request says so
            with self._lock:
                self._answers.pop(key, None)
        finally:
            with self._lock:
                self._refreshing.discard(key)

    def _keep(self, key: Hashable, version: Hashable, answer: PowerForecastView) -> None:
        with self._lock:
            self._answers[key] = _Kept(version, answer, self._clock())
            self._answers.move_to_end(key)
            while len(self._answers) > self.max_entries:
                self._answers.popitem(last=False)


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
    key = (domain, horizon_s, level, history_days, model, budget_w)

    def compute() -> PowerForecastView:
        rollups = history.power_rollups(domain, since_s)
        result = forecast_domain_power(
            domain, rollups, horizon_s=horizon_s, level=level, budget_w=budget_w, model=model
        )
        return forecast_view(domain, level, result)

    return memo.get_or_compute(key, version, compute)
