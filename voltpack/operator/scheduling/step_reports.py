"""Per-rank step times that training workers report on their own pods (docs/stragglers.md).

A worker writes the annotation `voltpack.io/step-times` on its pod: its last few steps as
`step:seconds` pairs separated by commas, steps strictly increasing, e.g.
`1200:1.532,1201:1.529,1202:1.611`. `seconds` is the rank's own time for the step up to the
point where it waits for its peers (forward + backward + optimizer, without the time blocked in
a collective), so that one slow rank does not make every rank's time equally slow.

Pure parsing and gathering from pod dicts; nothing here talks to Kubernetes. A malformed
annotation raises `StepReportError` naming the pod, the entry and the field; `gang_step_reports`
collects such errors per pod instead of raising, so one bad worker does not hide the others.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from voltpack.model.errors import VoltpackError
from voltpack.operator.kube.conventions import (
    GPU_INDICES_ANNOTATION,
    POD_GROUP_ANNOTATION,
    RANK_ANNOTATION,
)

STEP_TIMES_ANNOTATION = "voltpack.io/step-times"
MAX_ENTRIES = 512
"""At most this many `step:seconds` pairs (about 8 KiB; the API server allows 256 KiB of
annotations per object, and the detector needs only its window of recent steps)."""
FORMAT_HINT = (
    "write `step:seconds` pairs separated by commas, steps increasing, e.g. `7:1.52,8:1.49`"
)


class StepReportError(VoltpackError):
    """A pod's step-time report is malformed; the message names the pod, entry and field."""


@dataclass(frozen=True)
class RankReport:
    """One worker's report: its rank, where it runs, and its recent `(step, seconds)`."""

    pod: str
    rank: int
    node: str | None
    gpu_indices: tuple[int, ...]
    samples: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class GangStepReports:
    """The reports of one gang's pods, by rank, and the problems found."""

    gang: str
    ranks: dict[int, RankReport]
    missing: tuple[str, ...]
    """Pods of the gang with no step-time annotation (yet)."""
    errors: tuple[str, ...]
    """One message per pod whose report or rank was refused."""

    def samples(self) -> dict[int, tuple[tuple[int, float], ...]]:
        """`rank -> samples`, the input of `voltpack.policies.stragglers.align_samples`."""
        return {rank: report.samples for rank, report in self.ranks.items()}


def parse_step_times(text: str, where: str = "pod") -> tuple[tuple[int, float], ...]:
    """The `(step, seconds)` pairs of one annotation value; `where` names the pod in errors."""
    prefix = f"{where}: annotation {STEP_TIMES_ANNOTATION}"
    entries = [part.strip() for part in text.split(",")]
    if entries == [""]:
        raise StepReportError(f"{prefix} is empty; {FORMAT_HINT}")
    if len(entries) > MAX_ENTRIES:
        raise StepReportError(
            f"{prefix} has {len(entries)} entries; keep at most the last {MAX_ENTRIES}"
        )
    samples: list[tuple[int, float]] = []
    for number, entry in enumerate(entries, start=1):
        step_text, colon, seconds_text = entry.partition(":")
        label = f"{prefix} entry {number} ({entry!r})"
        if not colon:
            raise StepReportError(f"{label} has no ':'; {FORMAT_HINT}")
        try:
            step = int(step_text.strip())
        except ValueError:
            raise StepReportError(
                f"{label}: field step {step_text.strip()!r} is not an integer; {FORMAT_HINT}"
            ) from None
        if step < 0:
            raise StepReportError(f"{label}: field step must be >= 0, got {step}")
        try:
            seconds = float(seconds_text.strip())
        except ValueError:
            raise StepReportError(
                f"{label}: field seconds {seconds_text.strip()!r} is not a number; {FORMAT_HINT}"
            ) from None
        if not math.isfinite(seconds) or seconds <= 0:
            raise StepReportError(
                f"{label}: field seconds must be a finite number > 0, got {seconds_text.strip()}"
            )
        if samples and step <= samples[-1][0]:
            raise StepReportError(
                f"{label}: field step {step} is not after the previous entry's step "
                f"{samples[-1][0]}; steps must increase"
            )
        samples.append((step, seconds))
    return tuple(samples)


def _pod_name(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '?')}"


def rank_report(pod: Mapping[str, Any]) -> RankReport | None:
    """A pod's report (None when it has no step-time annotation); raises `StepReportError`
    for a malformed annotation or a missing or bad `voltpack.io/rank`."""
    name = _pod_name(pod)
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    text = annotations.get(STEP_TIMES_ANNOTATION)
    if text is None:
        return None
    rank_text = annotations.get(RANK_ANNOTATION)
    if rank_text is None:
        raise StepReportError(
            f"{name}: has {STEP_TIMES_ANNOTATION} but no {RANK_ANNOTATION} (voltpack writes the "
            "rank when it binds a gang; report step times from gang workers only)"
        )
    try:
        rank = int(rank_text)
    except ValueError:
        raise StepReportError(
            f"{name}: annotation {RANK_ANNOTATION} {rank_text!r} is not an integer"
        ) from None
    indices_text = annotations.get(GPU_INDICES_ANNOTATION) or ""
    try:
        indices = tuple(int(part) for part in indices_text.split(",") if part.strip())
    except ValueError:
        indices = ()
    return RankReport(
        pod=name,
        rank=rank,
        node=(pod.get("spec") or {}).get("nodeName"),
        gpu_indices=indices,
        samples=parse_step_times(str(text), name),
    )


def gang_step_reports(pods: Iterable[Mapping[str, Any]], gang: str) -> GangStepReports:
    """The step-time reports of the pods whose `voltpack.io/pod-group` is `gang`."""
    ranks: dict[int, RankReport] = {}
    missing: list[str] = []
    errors: list[str] = []
    for pod in pods:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if annotations.get(POD_GROUP_ANNOTATION) != gang:
            continue
        try:
            report = rank_report(pod)
        except StepReportError as exc:
            errors.append(str(exc))
            continue
        if report is None:
            missing.append(_pod_name(pod))
        elif report.rank in ranks:
            errors.append(
                f"{report.pod}: rank {report.rank} is also reported by {ranks[report.rank].pod}; "
                "each rank must be reported by one pod"
            )
        else:
            ranks[report.rank] = report
    return GangStepReports(gang, dict(sorted(ranks.items())), tuple(missing), tuple(errors))
