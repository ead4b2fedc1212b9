"""The operator's side of straggler detection: one detector per gang, fed from pod reports.

`StragglerWatch.update(pods)` gathers each gang's `voltpack.io/step-times` reports
(`step_reports`), feeds the steps not seen yet to the gang's `StragglerDetector`, and returns
what to tell people: one `StragglerNotice` per rank newly flagged (the text of a Warning Event
on that rank's pod, naming the node and GPU) and one per refused report. No Kubernetes calls
here: the caller lists the pods and records the Events (`Operator._report_stragglers` each cycle).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voltpack.operator.kube.conventions import POD_GROUP_ANNOTATION
from voltpack.operator.power.straggler_caps import RankReadings
from voltpack.operator.scheduling.step_reports import (
    STEP_TIMES_ANNOTATION,
    RankReport,
    gang_step_reports,
)
from voltpack.policies.stragglers import (
    FloatArray,
    GpuSignals,
    StragglerDetector,
    StragglerParams,
    align_samples,
)

ExpectedSlowdown = Callable[[RankReport], float]
"""The step-time multiplier a deliberate cap explains for a rank's GPU (1.0 when uncapped)."""
ReadingsOf = Callable[[RankReport], RankReadings]
"""A rank's GPUs' power draw, SM clock and utilisation as last published (NaN where unknown):
evidence, not decision."""


@dataclass(frozen=True)
class StragglerNotice:
    """Something to record as an Event on `pod` (`namespace/name`)."""

    pod: str
    reason: str
    """`Straggler` or `StepReportRefused`."""
    message: str


def _gang_of(pod: Mapping[str, Any]) -> str:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(POD_GROUP_ANNOTATION) or "")


def _no_cap(_: RankReport) -> float:
    return 1.0


def _unknown_readings(_: RankReport) -> RankReadings:
    return RankReadings()


def _if_known(values: FloatArray) -> FloatArray | None:
    """`values`, or None when no rank's is known (a signal without a reading is left out)."""
    return values if np.isfinite(values).any() else None


@dataclass
class StragglerWatch:
    """Detectors of the gangs whose workers report step times."""

    params: StragglerParams = field(default_factory=StragglerParams)
    detectors: dict[str, StragglerDetector] = field(default_factory=dict)
    reported_errors: set[str] = field(default_factory=set)

    def update(
        self,
        pods: Iterable[Mapping[str, Any]],
        expected_slowdown: ExpectedSlowdown = _no_cap,
        gpu_readings: ReadingsOf = _unknown_readings,
    ) -> list[StragglerNotice]:
        """Feed every gang's new steps; notices for new flags and newly refused reports.
        A flag's message shows the rank's GPU power draw, SM clock and utilisation (those known
        for some rank of the gang) beside the gang's medians."""
        members: dict[str, list[Mapping[str, Any]]] = {}
        reporting: set[str] = set()
        for pod in pods:  # one pass: the operator calls this every cycle over every pod
            gang = _gang_of(pod)
            if not gang:
                continue
            members.setdefault(gang, []).append(pod)
            if STEP_TIMES_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {}):
                reporting.add(gang)
        notices: list[StragglerNotice] = []
        for gang in sorted(reporting):  # a gang without any report has nothing to feed
            notices.extend(self._update_gang(gang, members[gang], expected_slowdown, gpu_readings))
        for gone in set(self.detectors) - set(members):
            del self.detectors[gone]
        return notices

    def _update_gang(
        self,
        gang: str,
        pods: list[Mapping[str, Any]],
        expected_slowdown: ExpectedSlowdown,
        gpu_readings: ReadingsOf,
    ) -> list[StragglerNotice]:
        """`pods`: the gang's members."""
        reports = gang_step_reports(pods, gang)
        notices = [
            StragglerNotice(error.split(":", 1)[0], "StepReportRefused", error)
            for error in reports.errors
            if error not in self.reported_errors
        ]
        self.reported_errors.update(reports.errors)
        if not reports.ranks:
            return notices
        # the gang's size, so that a rank that has not reported yet does not resize the detector
        ranks = max(max(reports.ranks) + 1, len(pods))
        detector = self.detectors.get(gang)
        if detector is None or detector.ranks != ranks:
            if ranks < self.params.min_ranks:
                return notices
            detector = self.detectors[gang] = StragglerDetector(ranks, self.params)
        last = -1 if detector.last_step is None else detector.last_step
        steps, matrix = align_samples(reports.samples(), ranks, last)
        expected = np.ones(ranks)
        # the latest readings: the same evidence for each step
        clock_mhz, draw_w, busy = (np.full(ranks, np.nan) for _ in range(3))
        for rank, report in reports.ranks.items():
            expected[rank] = max(1.0, expected_slowdown(report))
            readings = gpu_readings(report)
            clock_mhz[rank] = readings.sm_clock_mhz
            draw_w[rank] = readings.power_w
            busy[rank] = readings.utilization
        signals = GpuSignals(
            sm_clock_mhz=_if_known(clock_mhz),
            power_w=_if_known(draw_w),
            utilization=_if_known(busy),
        )
        for step, row in zip(steps, matrix, strict=True):
            result = detector.observe(step, row, expected_slowdown=expected, signals=signals)
            flags = {flag.rank: flag for flag in result.flagged}
            for rank in result.newly_flagged:
                report = reports.ranks[rank]
                where = f" on {report.node or 'an unknown node'}"
                if report.gpu_indices:
                    where += f" GPU {','.join(str(i) for i in report.gpu_indices)}"
                message = flags[rank].reason.replace(f"rank {rank} ", f"rank {rank}{where} ", 1)
                notices.append(StragglerNotice(report.pod, "Straggler", f"gang {gang}: {message}"))
        return notices
