"""Topology files for the simulator: a `Topology` object in YAML, and a topology CSV.

The CSV is the format of Alibaba's Lingjun 2023 dataset (`topo.csv`): a header, a host column
first, then one column per switch level, top first (`ip,DSW,PSW,ASW`). Each row becomes a node
whose labels are the level columns, so the same `ClusterTopology.from_labels` serves the
simulator and the operator. A CSV without a `Topology` object gets one level per column with no
oversubscription stated (1:1) and no host layout.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from voltpack.model import safe_yaml
from voltpack.model.errors import TraceFormatError
from voltpack.model.resources import API_GROUP
from voltpack.model.resources.topology import TopologyLevel, TopologySpec
from voltpack.model.text_files import read_user_text
from voltpack.model.topology import ClusterTopology


@dataclass(frozen=True)
class TopologyCsv:
    """Hosts in file order and each host's level labels (column name -> switch)."""

    hosts: tuple[str, ...]
    level_columns: tuple[str, ...]
    labels: dict[str, dict[str, str]]


def read_topology_csv(path: Path) -> TopologyCsv:
    """Parse a topology CSV; raise TraceFormatError naming the file, line and column."""
    text = read_user_text(path, "topology CSV", TraceFormatError)
    reader = csv.reader(text.splitlines())
    header = [column.strip() for column in next(reader, [])]
    if len(header) < 2 or not all(header):
        raise TraceFormatError(
            f"{path}:1: expected a header with a host column then one column per switch level "
            f"(top first), e.g. ip,DSW,PSW,ASW; found {','.join(header) or 'nothing'}"
        )
    levels = tuple(header[1:])
    hosts: list[str] = []
    labels: dict[str, dict[str, str]] = {}
    for fields in reader:
        line = reader.line_num
        if not fields:
            continue
        if len(fields) != len(header):
            raise TraceFormatError(
                f"{path}:{line}: expected {len(header)} fields ({','.join(header)}), "
                f"found {len(fields)}"
            )
        host = fields[0].strip()
        if not host:
            raise TraceFormatError(f"{path}:{line}: field {header[0]} is empty")
        if host in labels:
            raise TraceFormatError(f"{path}:{line}: host {host} is listed twice")
        values = [value.strip() for value in fields[1:]]
        empty = [levels[i] for i, value in enumerate(values) if not value]
        if empty:
            raise TraceFormatError(f"{path}:{line}: field {empty[0]} is empty")
        hosts.append(host)
        labels[host] = dict(zip(levels, values, strict=True))
    if not hosts:
        raise TraceFormatError(f"{path}: no hosts after the header")
    return TopologyCsv(hosts=tuple(hosts), level_columns=levels, labels=labels)


def read_topology_spec(path: Path) -> TopologySpec:
    """A `Topology` object (`kind: Topology`) or its bare spec, from YAML; errors name fields."""
    text = read_user_text(path, "Topology YAML", TraceFormatError)
    try:
        document: Any = safe_yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TraceFormatError(f"{path}: not valid YAML: {exc}") from None
    if isinstance(document, dict) and "kind" in document:
        if document.get("kind") != "Topology" or not str(document.get("apiVersion", "")).startswith(
            f"{API_GROUP}/"
        ):
            raise TraceFormatError(
                f"{path}: expected apiVersion {API_GROUP}/v1alpha1, kind Topology; found "
                f"{document.get('apiVersion')}, {document.get('kind')}"
            )
        document = document.get("spec")
    if not isinstance(document, dict):
        raise TraceFormatError(f"{path}: expected a Topology object or its spec (a mapping)")
    try:
        return TopologySpec.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "spec"
        raise TraceFormatError(
            f"{path}: spec.{where}: {first['msg']} ({exc.error_count()} error(s))"
        ) from None


def spec_for_columns(columns: tuple[str, ...]) -> TopologySpec:
    """A plain spec naming each CSV level column as a level, 1:1, no host layout."""
    return TopologySpec(
        levels=[TopologyLevel(node_label=column) for column in columns],
        nvlink_clique_label=None,
    )


def load_csv_topology(
    csv_path: Path, spec: TopologySpec | None = None, gpus_per_host: int = 8
) -> ClusterTopology:
    """The cluster a topology CSV describes, its levels' properties from `spec` if given.

    Every level the spec names must be a column of the CSV.
    """
    table = read_topology_csv(csv_path)
    spec = spec or spec_for_columns(table.level_columns)
    missing = [lv.node_label for lv in spec.levels if lv.node_label not in table.level_columns]
    if missing:
        raise TraceFormatError(
            f"{csv_path}: the Topology names level {missing[0]!r}, which is not a column of the "
            f"CSV (columns: {', '.join(table.level_columns)})"
        )
    return ClusterTopology.from_labels(
        spec,
        table.hosts,
        table.labels,
        gpu_counts=dict.fromkeys(table.hosts, gpus_per_host),
    )
