"""Forecast peaks for the power loop: each domain's recorded power -> the peak a placement must
also leave room under.

Every `refresh_s` the loop reads each domain's recorded power roll-ups (the history store the
loop itself writes) and forecasts the `level` quantile of the peak over the next `horizon_s`
(`voltpack.forecast.domain_power`). Until that horizon has passed, the scheduler's headroom for
the domain is the budget minus the larger of the measured power and this forecast peak, so work
is not placed into room the domain is likely to need soon (a diurnal rise, a recurring batch).

Refreshes run in a worker thread (`start_refresh`), so a slow database or a slow model never
delays a power tick; the tick only reads the finished peaks (`current`). A domain whose
forecast fails (too little history, a history the forecaster refuses) has no forecast peak and
keeps the measured headroom; the reason is logged once per change. An unavailable store keeps
the previous peaks (each still ends with its horizon) until a later refresh succeeds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from voltpack.forecast.domain_power import forecast_domain_power, history_age_s
from voltpack.model.errors import ForecastError
from voltpack.policies.schema import PowerForecastSpec
from voltpack.store import BufferedStore, PowerBucket, StoreUnavailableError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ForecastPeak:
    """A domain's forecast peak and when it stops counting."""

    peak_w: float
    valid_until_s: float
    explanation: str


class ForecastPeaks:
    """The latest forecast peak of each power domain, refreshed every `spec.refresh_s`."""

    def __init__(self, spec: PowerForecastSpec, store: BufferedStore) -> None:
        self.spec = spec
        self.store = store
        self.peaks: dict[str, ForecastPeak] = {}
        self._next_refresh_s = float("-inf")
        self._told: dict[str, str] = {}
        self._worker: threading.Thread | None = None

    def start_refresh(self, now_s: float, budgets_w: Iterable[tuple[str, float]]) -> bool:
        """Start `refresh` in a worker thread if one is due (every `spec.refresh_s`) and none
        is running; whether one started."""
        if now_s < self._next_refresh_s or self.running():
            return False
        self._next_refresh_s = now_s + self.spec.refresh_s
        self._worker = threading.Thread(
            target=self._refresh_logged,
            args=(now_s, list(budgets_w)),
            name="power-forecasts",
            daemon=True,
        )
        self._worker.start()
        return True

    def _refresh_logged(self, now_s: float, budgets_w: list[tuple[str, float]]) -> None:
        try:
            self.refresh(now_s, budgets_w)
        except Exception:  # a bug here must not pass silently, nor stop later refreshes
            log.exception("power forecast refresh failed; the previous peaks stay")

    def running(self) -> bool:
        """Whether a refresh is running in the worker thread."""
        return self._worker is not None and self._worker.is_alive()

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait for the worker thread's refresh, if any, to finish."""
        if self._worker is not None:
            self._worker.join(timeout_s)

    def refresh(self, now_s: float, budgets_w: Iterable[tuple[str, float]]) -> bool:
        """Forecast every domain in `budgets_w` (name, budget) now; False when the store was
        unavailable (the previous peaks stay). Never raises on a failed forecast or an
        unavailable store."""
        since_s = now_s - self.spec.history_s
        peaks: dict[str, ForecastPeak] = {}
        for domain, budget_w in budgets_w:
            try:
                rollups = self._read(domain, since_s)
            except StoreUnavailableError as exc:
                self._tell("store", f"power forecasts skipped: history store unavailable: {exc}")
                return False
            except Exception as exc:  # a record the store cannot read back: this domain only
                self._tell(
                    domain, f"domain {domain}: no power forecast: {type(exc).__name__}: {exc}"
                )
                continue
            peak = self._forecast(domain, rollups, budget_w, now_s)
            if peak is not None:
                peaks[domain] = peak
        self._told.pop("store", None)
        self.peaks = peaks
        return True

    def current(self, now_s: float) -> dict[str, float]:
        """Forecast peak per domain, for the domains whose forecast still covers `now_s`."""
        peaks = self.peaks  # replaced whole by the worker, never mutated
        return {d: p.peak_w for d, p in peaks.items() if now_s < p.valid_until_s}

    def _read(self, domain: str, since_s: float) -> list[PowerBucket]:
        rollups: list[PowerBucket] = self.store.read(
            lambda s: s.power_history(domain, since_s=since_s)
        )
        return rollups

    def _forecast(
        self, domain: str, rollups: list[PowerBucket], budget_w: float, now_s: float
    ) -> ForecastPeak | None:
        """The peak over [now, now + horizon]. The forecast starts where the recorded history
        ends, so it is stretched over the time since (the peak then also covers that
        unrecorded stretch: conservative); history that stopped more than a horizon ago is
        not forecast from."""
        spec = self.spec
        try:
            age_s = history_age_s(domain, rollups, now_s)
            if age_s > spec.horizon_s:
                raise ForecastError(
                    f"its newest recorded power is {age_s:.0f} s old, more than the "
                    f"{spec.horizon_s:g} s horizon"
                )
            result = forecast_domain_power(
                domain, rollups, horizon_s=spec.horizon_s + age_s, level=spec.level,
                budget_w=budget_w, model=spec.model,
            )  # fmt: skip
        except ForecastError as exc:
            self._tell(domain, f"domain {domain}: no power forecast: {exc}")
            return None
        except Exception as exc:  # a model's own bug must not cost the other domains theirs
            self._tell(domain, f"domain {domain}: no power forecast: {type(exc).__name__}: {exc}")
            return None
        self._told.pop(domain, None)
        headroom = result.headroom
        return ForecastPeak(headroom.predicted_peak_w, now_s + spec.horizon_s, headroom.explanation)

    def _tell(self, key: str, message: str) -> None:
        if self._told.get(key) != message:
            self._told[key] = message
            log.info("%s", message)
