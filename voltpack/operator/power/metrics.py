"""The power loop's Prometheus metrics: each domain's power, headroom, actions and fail-safes.

Read from the last power tick (no API calls on a scrape). Names share the prefix of
`voltpack_power_domain_budget_watts` (metrics.py) and use base units.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from voltpack.power.controller import DomainReport


@dataclass(frozen=True)
class PowerFigures:
    """What the last power tick saw and did, kept for scrapes (replaced whole, never mutated)."""

    domains: tuple[DomainReport, ...] = ()
    invalid_domains: tuple[str, ...] = ()
    actions_total: dict[tuple[str, str], int] = field(default_factory=dict)
    """Settings changes so far by (domain, action): lock_clocks, cap_power, release."""
    ticks: int = 0
    failed_ticks: int = 0
    forecast_peaks_w: dict[str, float] = field(default_factory=dict)
    """Each domain's current forecast peak (`power_forecasts.ForecastPeaks.current`)."""
    actuation_failures: dict[str, str] = field(default_factory=dict)
    """GPUNodes whose agent reports `SettingsApplied=False`, with its reason."""


def _per_domain(name: str, documentation: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=["domain"])


class PowerCollector(Collector):
    """Exports the `PowerFigures` of an operator's power loop (nothing while it has none)."""

    def __init__(self, source: Any) -> None:
        self.source = source  # an Operator: `.power_loop` (a PowerLoop or None)

    def collect(self) -> Iterator[Metric]:
        loop = getattr(self.source, "power_loop", None)
        if loop is None:
            return
        figures: PowerFigures = loop.figures
        yield CounterMetricFamily(
            "voltpack_power_loop_ticks", "Power-loop ticks of this replica.", value=figures.ticks
        )
        yield CounterMetricFamily(
            "voltpack_power_loop_failed_ticks",
            "Power-loop ticks that failed (retried at the next interval).",
            value=figures.failed_ticks,
        )
        power = _per_domain("voltpack_power_domain_power_watts", "Accounted power of a domain.")
        worst = _per_domain(
            "voltpack_power_domain_worst_case_watts",
            "Power of a domain if its stale GPUs draw their worst case.",
        )
        headroom = _per_domain(
            "voltpack_power_domain_headroom_watts", "Budget minus accounted power of a domain."
        )
        locked = _per_domain(
            "voltpack_power_domain_locked_gpus", "GPUs of a domain with a locked SM clock."
        )
        capped = _per_domain(
            "voltpack_power_domain_capped_gpus", "GPUs of a domain capped at their floor."
        )
        stale = _per_domain(
            "voltpack_power_domain_stale_gpus", "GPUs of a domain without fresh telemetry."
        )
        brake = _per_domain(
            "voltpack_power_domain_brake_active", "1 while a domain's emergency brake is on."
        )
        level = GaugeMetricFamily(
            "voltpack_power_domain_level_info",
            "1 for the power policy's level of each domain.",
            labels=["domain", "level"],
        )
        for report in figures.domains:
            name = [report.name]
            power.add_metric(name, report.power_w)
            worst.add_metric(name, report.worst_case_w)
            headroom.add_metric(name, report.budget_w - report.power_w)
            locked.add_metric(name, report.locked_gpus)
            capped.add_metric(name, report.capped_gpus)
            stale.add_metric(name, report.stale_gpus)
            brake.add_metric(name, 1.0 if report.braking else 0.0)
            level.add_metric([report.name, report.level], 1.0)
        yield from (power, worst, headroom, locked, capped, stale, brake, level)
        forecast = _per_domain(
            "voltpack_power_domain_forecast_peak_watts",
            "Forecast quantile of a domain's peak power over the forecast horizon (placements "
            "leave room under it).",
        )
        for domain, peak_w in sorted(figures.forecast_peaks_w.items()):
            forecast.add_metric([domain], peak_w)
        yield forecast
        invalid = _per_domain(
            "voltpack_power_domain_invalid",
            "1 for each PowerBudget the power loop cannot use (see its Events).",
        )
        for domain in figures.invalid_domains:
            invalid.add_metric([domain], 1.0)
        yield invalid
        failures = GaugeMetricFamily(
            "voltpack_power_actuation_failures",
            "1 for each GPUNode whose agent reports power settings it could not apply "
            "(SettingsApplied=False), by the agent's reason.",
            labels=["node", "reason"],
        )
        for node, reason in sorted(figures.actuation_failures.items()):
            failures.add_metric([node, reason], 1.0)
        yield failures
        actions = CounterMetricFamily(
            "voltpack_power_actions",
            "GPU setting changes by the domain that holds the GPU and the action taken.",
            labels=["domain", "action"],
        )
        for (domain, action), count in sorted(figures.actions_total.items()):
            actions.add_metric([domain, action], count)
        yield actions
