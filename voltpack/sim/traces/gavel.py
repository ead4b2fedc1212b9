"""Gavel-format job traces (stanford-futuredata/gavel, OSDI'20), tab-separated, one job a line.

Two layouts exist. `physical_cluster` (10 fields): job type, command, working directory, steps
flag, needs-data-dir, total steps, scale factor, priority weight, SLO, arrival time (s). `msr`
(7 fields): job type, command, steps flag, needs-data-dir, total steps, arrival time (s), scale
factor. A malformed line raises TraceFormatError naming the file, the line and the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from voltpack.model.errors import TraceFormatError

PHYSICAL_FIELDS = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "slo",
    "arrival_s",
)
MSR_FIELDS = (
    "job_type",
    "command",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "arrival_s",
    "scale_factor",
)


@dataclass(frozen=True)
class GavelJob:
    """One training job: `total_steps` iterations on `scale_factor` GPUs of one model."""

    job_type: str
    total_steps: int
    scale_factor: int
    arrival_s: float
    priority_weight: float = 1.0
    slo: float | None = None
    command: str = ""
    working_directory: str = ""
    num_steps_arg: str = "--num_steps"
    needs_data_dir: bool = True

    def to_physical_line(self) -> str:
        """The job as one line of the 10-field physical_cluster layout.

        Raises TraceFormatError for a text field holding a tab or a line break (the line could
        not be read back).
        """
        for name in ("job_type", "command", "working_directory", "num_steps_arg"):
            if any(c in getattr(self, name) for c in "\t\r\n"):
                raise TraceFormatError(
                    f"job {self.job_type!r}: field {name} holds a tab or line break; "
                    "a Gavel trace line cannot carry it"
                )
        fields = (
            self.job_type,
            self.command,
            self.working_directory,
            self.num_steps_arg,
            "1" if self.needs_data_dir else "0",
            str(self.total_steps),
            str(self.scale_factor),
            str(int(self.priority_weight))
            if self.priority_weight.is_integer()
            else repr(self.priority_weight),
            "-1.000000" if self.slo is None else repr(self.slo),
            str(int(self.arrival_s)) if self.arrival_s.is_integer() else repr(self.arrival_s),
        )
        return "\t".join(fields)


def _number(path: Path, line: int, field: str, text: str, *, integer: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceFormatError(f"{path}:{line}: field {field}={text!r} is not a number") from None
    if not math.isfinite(value):
        raise TraceFormatError(f"{path}:{line}: field {field}={text!r} is not finite")
    if integer and not value.is_integer():
        raise TraceFormatError(f"{path}:{line}: field {field}={text!r} is not an integer")
    return value


def _parse_line(path: Path, line: int, text: str) -> GavelJob:
    parts = text.rstrip("\r\n").split("\t")
    if len(parts) == len(PHYSICAL_FIELDS):
        row = dict(zip(PHYSICAL_FIELDS, parts, strict=True))
    elif len(parts) == len(MSR_FIELDS):
        row = dict(zip(MSR_FIELDS, parts, strict=True))
    else:
        raise TraceFormatError(
            f"{path}:{line}: {len(parts)} tab-separated fields; a Gavel trace line has "
            f"{len(PHYSICAL_FIELDS)} (physical_cluster) or {len(MSR_FIELDS)} (msr)"
        )
    job_type = row["job_type"].strip()
    if not job_type:
        raise TraceFormatError(f"{path}:{line}: field job_type is empty")
    total_steps = int(_number(path, line, "total_steps", row["total_steps"], integer=True))
    scale_factor = int(_number(path, line, "scale_factor", row["scale_factor"], integer=True))
    arrival_s = _number(path, line, "arrival_s", row["arrival_s"], integer=False)
    weight = _number(path, line, "priority_weight", row.get("priority_weight", "1"), integer=False)
    slo = _number(path, line, "slo", row.get("slo", "-1"), integer=False)
    if total_steps < 1:
        raise TraceFormatError(f"{path}:{line}: field total_steps={total_steps} must be >= 1")
    if scale_factor < 1:
        raise TraceFormatError(f"{path}:{line}: field scale_factor={scale_factor} must be >= 1")
    if arrival_s < 0:
        raise TraceFormatError(f"{path}:{line}: field arrival_s={arrival_s} must not be negative")
    if weight <= 0:
        raise TraceFormatError(f"{path}:{line}: field priority_weight={weight} must be positive")
    return GavelJob(
        job_type=job_type,
        total_steps=total_steps,
        scale_factor=scale_factor,
        arrival_s=arrival_s,
        priority_weight=weight,
        slo=slo if slo > 0 else None,
        command=row["command"],
        working_directory=row.get("working_directory", ""),
        num_steps_arg=row["num_steps_arg"],
        needs_data_dir=row["needs_data_dir"].strip() not in ("", "0", "False", "false"),
    )


def load_gavel_trace(path: Path) -> list[GavelJob]:
    """Read a Gavel trace (either layout); jobs in file order, arrivals must not decrease."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot open: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise TraceFormatError(f"{path}: not UTF-8 text") from None
    jobs: list[GavelJob] = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        job = _parse_line(path, line, raw)
        if jobs and job.arrival_s < jobs[-1].arrival_s:
            raise TraceFormatError(
                f"{path}:{line}: field arrival_s={job.arrival_s} is earlier than the previous "
                f"job's {jobs[-1].arrival_s}; Gavel traces are sorted by arrival"
            )
        jobs.append(job)
    if not jobs:
        raise TraceFormatError(f"{path}: no jobs")
    return jobs


def write_gavel_trace(path: Path, jobs: list[GavelJob]) -> None:
    """Write jobs in the 10-field physical_cluster layout."""
    path.write_text("".join(job.to_physical_line() + "\n" for job in jobs), encoding="utf-8")
