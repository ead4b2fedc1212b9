"""Topology files for the simulator: a `Topology` object in YAML, and a topology CSV.

The CSV is the format of Alibaba's Lingjun 2023 dataset (`topo.csv`): a header, a host column
first, then one column per switch level, top first (`ip,DSW,PSW,ASW`). Each row becomes a node
whose labels are the level columns, so the same `ClusterTopology.from_labels` serves the
simulator and the operator.

A CSV says only which switch each host hangs off, so it is never loaded alone: it needs a
`Topology` whose levels name every column and state each one's `oversubscription`, and whose
`defaultHost` gives the inside of a host (GPUs, NVLink domains, NICs). A missing piece is refused
with an error naming the field, never filled in as 1:1 with no NICs (which would make every
placement look alike). `data/alibaba-lingjun-2023/topology.yaml` is an example.
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
from voltpack.model.resources.topology import TopologySpec
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
        problems = [
            f"spec.{'.'.join(str(part) for part in error['loc'])}: {error['msg']}".replace(
                "spec.: ", "spec: "
            )
            for error in exc.errors()
        ]
        raise TraceFormatError(
            f"{path}: {exc.error_count()} error(s):\n- " + "\n- ".join(problems)
        ) from None


EXAMPLE_SPEC = "data/alibaba-lingjun-2023/topology.yaml"
"""A complete Topology YAML for a topology CSV, to copy."""


def spec_gaps(spec: TopologySpec, columns: tuple[str, ...], gpus_per_host: int | None) -> list[str]:
    """What `spec` leaves unstated about a CSV with these level `columns`: one line per gap.

    Each line names the field (as spelled in the YAML) and what to write there. A level's
    `oversubscription` is checked by the model itself (`TopologyLevel`: required, no default).
    """
    gaps: list[str] = []
    named = [level.node_label for level in spec.levels]
    for level in spec.levels:
        if level.node_label not in columns:
            gaps.append(
                f"spec.levels[].nodeLabel {level.node_label!r} is not a column of the CSV "
                f"(its level columns: {', '.join(columns)}); name one of those"
            )
    for column in columns:
        if column not in named:
            gaps.append(
                f"spec.levels: CSV column {column!r} is not a level; add "
                f"{{nodeLabel: {column}, oversubscription: <downlink/uplink, 1.0 = non-blocking>}}"
            )
    host = spec.default_host
    if host is None:
        gaps.append(
            "spec.defaultHost is not given; state the host layout: gpus, nvlinkDomains, "
            "numaNodes and nics (each {name, nicClass, lineRateGbitS, numaNode, gpus})"
        )
    else:
        if not host.nics:
            gaps.append(
                "spec.defaultHost.nics is empty; list each NIC as "
                "{name, nicClass, lineRateGbitS, numaNode, gpus}"
            )
        if gpus_per_host is not None and gpus_per_host != host.gpus:
            gaps.append(
                f"spec.defaultHost.gpus is {host.gpus} but the hosts were given {gpus_per_host} "
                "GPUs each; make them agree"
            )
    return gaps


def load_csv_topology(
    csv_path: Path,
    spec: TopologySpec | None,
    gpus_per_host: int | None = None,
    spec_source: str = "the Topology",
) -> ClusterTopology:
    """The cluster a topology CSV describes, its levels' properties and hosts from `spec`.

    Refuses (TraceFormatError listing every gap) a missing spec, a spec that leaves a CSV
    column or a level's oversubscription unstated, names a level the CSV lacks, or has no
    host layout with NICs. `gpus_per_host` defaults to the spec's `defaultHost.gpus`.
    """
    table = read_topology_csv(csv_path)
    if spec is None:
        raise TraceFormatError(
            f"{csv_path}: a topology CSV gives only each host's switches; its levels' "
            "oversubscription and the host layout are missing. Give a Topology YAML "
            "(--topology-spec FILE, or topology.yaml beside the CSV) with spec.levels "
            f"(one {{nodeLabel, oversubscription}} per column: {', '.join(table.level_columns)}) "
            "and spec.defaultHost (gpus, nvlinkDomains, numaNodes, nics); "
            f"e.g. {EXAMPLE_SPEC}"
        )
    gaps = spec_gaps(spec, table.level_columns, gpus_per_host)
    if gaps or spec.default_host is None:
        raise TraceFormatError(
            f"{csv_path}: {spec_source} leaves {len(gaps)} thing(s) unstated or wrong "
            f"(e.g. {EXAMPLE_SPEC}):\n- " + "\n- ".join(gaps)
        )
    return ClusterTopology.from_labels(
        spec,
        table.hosts,
        table.labels,
        gpu_counts=dict.fromkeys(table.hosts, spec.default_host.gpus),
    )
