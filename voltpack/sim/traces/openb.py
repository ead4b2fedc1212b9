"""Loader for the openb CSV files (Alibaba GPU cluster trace v2023, used by the FGD paper).

Nodes: `sn,cpu_milli,memory_mib,gpu,model`. Pods: `name,cpu_milli,memory_mib,num_gpu,gpu_milli`
followed by the optional `gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`.
A malformed row raises TraceFormatError naming the file, the line and the field.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from voltpack.model.cluster import Node
from voltpack.model.csv_rows import csv_rows
from voltpack.model.errors import TraceFormatError
from voltpack.model.workload import Pod

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


def count_field(path: Path, line: int, row: dict[str, str], field: str) -> int:
    """A row's field as a whole number >= 0; TraceFormatError naming file, line and field."""
    text = (row.get(field) or "").strip()
    try:
        value = int(text)
    except ValueError:
        raise TraceFormatError(f"{path}:{line}: field {field}={text!r} is not an integer") from None
    if value < 0:
        raise TraceFormatError(f"{path}:{line}: field {field}={value} must not be negative")
    return value


def _time_field(path: Path, line: int, row: dict[str, str], field: str) -> float | None:
    text = (row.get(field) or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise TraceFormatError(f"{path}:{line}: field {field}={text!r} is not a number") from None


def load_nodes(path: Path) -> list[Node]:
    """Read an openb node list into empty nodes."""
    nodes: list[Node] = []
    seen: set[str] = set()
    for line, row in csv_rows(path, NODE_COLUMNS):
        name = row["sn"].strip()
        if not name:
            raise TraceFormatError(f"{path}:{line}: field sn is empty")
        if name in seen:
            raise TraceFormatError(f"{path}:{line}: field sn={name!r} repeats an earlier node")
        seen.add(name)
        gpu_count = count_field(path, line, row, "gpu")
        model = row["model"].strip() or None
        if gpu_count and model is None:
            raise TraceFormatError(f"{path}:{line}: field model is empty but gpu={gpu_count}")
        nodes.append(
            Node.empty(
                name=name,
                cpu_milli=count_field(path, line, row, "cpu_milli"),
                memory_mib=count_field(path, line, row, "memory_mib"),
                gpu_count=gpu_count,
                gpu_model=model,
            )
        )
    return nodes


def load_pods(path: Path) -> list[Pod]:
    """Read an openb pod list; pods keep the file's order."""
    pods: list[Pod] = []
    for line, row in csv_rows(path, POD_COLUMNS):
        num_gpu = count_field(path, line, row, "num_gpu")
        gpu_milli = count_field(path, line, row, "gpu_milli")
        if num_gpu == 0:
            gpu_milli = 0
        spec = (row.get("gpu_spec") or "").strip()
        creation = _time_field(path, line, row, "creation_time")
        try:
            pods.append(
                Pod(
                    name=row["name"].strip(),
                    cpu_milli=count_field(path, line, row, "cpu_milli"),
                    memory_mib=count_field(path, line, row, "memory_mib"),
                    num_gpu=num_gpu,
                    gpu_milli=gpu_milli,
                    gpu_models=tuple(m.strip() for m in spec.split("|") if m.strip()),
                    qos=(row.get("qos") or "BE").strip() or "BE",
                    creation_time_s=0.0 if creation is None else creation,
                    deletion_time_s=_time_field(path, line, row, "deletion_time"),
                )
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "row"
            raise TraceFormatError(f"{path}:{line}: field {field}: {first['msg']}") from None
    return pods
