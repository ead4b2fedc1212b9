"""Loaders for the Alibaba GenAI serving trace 2026 (alibaba/clusterdata, v2026-GenAI).

Two files are shipped in `data/alibaba-genai-2026/`, each a gzipped tar holding one CSV:

- `qps.tar.gz` / `qps.csv`: `timestamp_anon,value,container_ip,request_type`, raw gateway QPS
  samples (one container, one timestamp); the dataset's README asks to sum across containers
  per time window. An empty, `None` or `NULL` container_ip is kept as "" (the API requests
  carry none).
- `pod_gpu_duty_cycle_anon.tar.gz` / `pod_gpu_duty_cycle_anon.csv`:
  `value,timestamp_anon,container_ip`, the GPU duty cycle (percent busy) of each pod.

Either loader also reads the plain CSV. A malformed row raises TraceFormatError naming the
file (and archive member), the line and the field.
"""

from __future__ import annotations

import io
import math
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from voltpack.model.csv_rows import csv_lines_rows, csv_rows
from voltpack.model.errors import TraceFormatError

GENAI_FOLDER = "alibaba-genai-2026"
QPS_ARCHIVE = "qps.tar.gz"
DUTY_CYCLE_ARCHIVE = "pod_gpu_duty_cycle_anon.tar.gz"
QPS_COLUMNS = ("timestamp_anon", "value", "container_ip", "request_type")
DUTY_COLUMNS = ("value", "timestamp_anon", "container_ip")
_MISSING_IP = ("", "None", "NULL", "null", "none")


class QpsSamples(NamedTuple):
    """Raw QPS samples as parallel arrays, in file order."""

    time_s: NDArray[np.float64]
    qps: NDArray[np.float64]
    container: tuple[str, ...]
    request_type: tuple[str, ...]


class DutyCycleSamples(NamedTuple):
    """Raw per-pod GPU duty-cycle samples (percent, 0..100) as parallel arrays, in file order."""

    time_s: NDArray[np.float64]
    duty_pct: NDArray[np.float64]
    container: tuple[str, ...]


@contextmanager
def _csv_member(path: Path, required: tuple[str, ...]) -> Iterator[
    tuple[str, Iterator[tuple[int, dict[str, str]]]]
]:  # fmt: skip
    """(origin for messages, rows) of `path`: a plain CSV, or the single .csv member of a
    (gzipped) tar archive (origin `archive[member]`)."""
    if not path.name.endswith((".tar.gz", ".tgz", ".tar")):
        yield str(path), csv_rows(path, required)
        return
    try:
        archive = tarfile.open(path, mode="r:*")  # noqa: SIM115 - closed by the with below
    except (OSError, tarfile.TarError) as exc:
        raise TraceFormatError(f"{path}: cannot open as a tar archive: {exc}") from None
    with archive:
        members = [m for m in archive.getmembers() if m.isfile() and m.name.endswith(".csv")]
        if len(members) != 1:
            raise TraceFormatError(
                f"{path}: expected exactly one .csv member, found {[m.name for m in members]}"
            )
        handle = archive.extractfile(members[0])
        if handle is None:  # pragma: no cover - isfile() members always extract
            raise TraceFormatError(f"{path}: cannot read member {members[0].name}")
        with io.TextIOWrapper(handle, encoding="utf-8", newline="") as text:
            origin = f"{path}[{members[0].name}]"
            yield origin, csv_lines_rows(text, origin, required)


def _number(origin: str, line: int, field: str, text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise TraceFormatError(f"{origin}:{line}: field {field}={text!r} is not a number") from None
    if not math.isfinite(value):
        raise TraceFormatError(f"{origin}:{line}: field {field}={text!r} is not finite")
    return value


def load_qps(path: Path) -> QpsSamples:
    """Read the gateway QPS samples (`qps.tar.gz` or `qps.csv`)."""
    times: list[float] = []
    values: list[float] = []
    containers: list[str] = []
    kinds: list[str] = []
    with _csv_member(path, QPS_COLUMNS) as (origin, rows):
        for line, row in rows:
            times.append(_number(origin, line, "timestamp_anon", row["timestamp_anon"]))
            value = _number(origin, line, "value", row["value"])
            if value < 0:
                raise TraceFormatError(f"{origin}:{line}: field value={value} must not be negative")
            values.append(value)
            ip = row["container_ip"].strip()
            containers.append("" if ip in _MISSING_IP else ip)
            kind = row["request_type"].strip()
            if not kind:
                raise TraceFormatError(f"{origin}:{line}: field request_type is empty")
            kinds.append(kind)
    if not times:
        raise TraceFormatError(f"{path}: holds no QPS samples")
    return QpsSamples(
        np.asarray(times, dtype=np.float64),
        np.asarray(values, dtype=np.float64),
        tuple(containers),
        tuple(kinds),
    )


def load_duty_cycle(path: Path) -> DutyCycleSamples:
    """Read the per-pod GPU duty cycle (`pod_gpu_duty_cycle_anon.tar.gz` or its CSV)."""
    times: list[float] = []
    duty: list[float] = []
    containers: list[str] = []
    with _csv_member(path, DUTY_COLUMNS) as (origin, rows):
        for line, row in rows:
            times.append(_number(origin, line, "timestamp_anon", row["timestamp_anon"]))
            value = _number(origin, line, "value", row["value"])
            if not 0.0 <= value <= 100.0:
                raise TraceFormatError(
                    f"{origin}:{line}: field value={value} is a duty cycle in percent; "
                    "it must lie in 0..100"
                )
            duty.append(value)
            ip = row["container_ip"].strip()
            if ip in _MISSING_IP:
                raise TraceFormatError(f"{origin}:{line}: field container_ip is empty")
            containers.append(ip)
    if not times:
        raise TraceFormatError(f"{path}: holds no duty-cycle samples")
    return DutyCycleSamples(
        np.asarray(times, dtype=np.float64), np.asarray(duty, dtype=np.float64), tuple(containers)
    )
