"""A topology CSV is never loaded with unstated assumptions (issue 32, item 5).

The CSV names only each host's switches; without its levels' oversubscription and the host
layout the cluster used to become 1:1 with no NICs, silently. Each gap is now refused with the
field named the way the YAML spells it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from voltpack.model.errors import TraceFormatError
from voltpack.sim.traces.topology_files import load_csv_topology, read_topology_spec

ROOT = Path(__file__).resolve().parents[2]
LINGJUN = ROOT / "data" / "alibaba-lingjun-2023"

CSV = "ip,DSW,PSW,ASW\nh1,G1,P1,S1\nh2,G1,P1,S2\nh3,G1,P2,S3\n"
HOST = """defaultHost:
  gpus: 8
  nics:
    - {name: mlx5_0, nicClass: roce, lineRateGbitS: 200, gpus: [0, 1, 2, 3]}
    - {name: mlx5_1, nicClass: roce, lineRateGbitS: 200, gpus: [4, 5, 6, 7]}
"""
LEVELS = """levels:
  - {nodeLabel: DSW, oversubscription: 1.0}
  - {nodeLabel: PSW, oversubscription: 2.0}
  - {nodeLabel: ASW, oversubscription: 2.0}
"""


def _files(tmp_path: Path, spec_yaml: str) -> tuple[Path, Path]:
    csv_path = tmp_path / "topo.csv"
    csv_path.write_text(CSV)
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(spec_yaml)
    return csv_path, spec_path


def _error(tmp_path: Path, spec_yaml: str, gpus_per_host: int | None = None) -> str:
    csv_path, spec_path = _files(tmp_path, spec_yaml)
    with pytest.raises(TraceFormatError) as caught:
        load_csv_topology(csv_path, read_topology_spec(spec_path), gpus_per_host)
    return str(caught.value)


def test_a_complete_spec_loads(tmp_path: Path) -> None:
    csv_path, spec_path = _files(tmp_path, LEVELS + HOST)
    topo = load_csv_topology(csv_path, read_topology_spec(spec_path))
    assert topo.node_count == 3
    assert [level.oversubscription for level in topo.levels] == [1.0, 2.0, 2.0]
    assert all(host.gpu_count == 8 and len(host.nics) == 2 for host in topo.hosts)


def test_a_csv_without_a_spec_is_refused_naming_what_is_missing(tmp_path: Path) -> None:
    csv_path, _ = _files(tmp_path, "")
    with pytest.raises(TraceFormatError) as caught:
        load_csv_topology(csv_path, None)
    message = str(caught.value)
    for needed in (
        "oversubscription",
        "host layout",
        "--topology-spec",
        "spec.levels",
        "spec.defaultHost",
        "DSW, PSW, ASW",
        "topology.yaml",
    ):
        assert needed in message, needed


def test_a_level_without_oversubscription_is_refused(tmp_path: Path) -> None:
    levels = LEVELS.replace("{nodeLabel: PSW, oversubscription: 2.0}", "{nodeLabel: PSW}")
    message = _error(tmp_path, levels + HOST)
    assert "spec.levels.1: level nodeLabel=PSW: oversubscription is required" in message
    assert "1.0 = non-blocking" in message
    assert "nodeLabel=DSW" not in message and "nodeLabel=ASW" not in message


def test_every_level_without_oversubscription_is_named(tmp_path: Path) -> None:
    levels = (
        "levels:\n  - {nodeLabel: DSW}\n  - {nodeLabel: PSW}\n"
        "  - {nodeLabel: ASW, oversubscription: 2}\n"
    )
    message = _error(tmp_path, levels + HOST)
    assert "2 error(s)" in message
    assert "spec.levels.0: level nodeLabel=DSW: oversubscription is required" in message
    assert "spec.levels.1: level nodeLabel=PSW: oversubscription is required" in message


def test_a_level_the_csv_lacks_is_refused(tmp_path: Path) -> None:
    levels = LEVELS.replace("nodeLabel: ASW", "nodeLabel: TOR")
    message = _error(tmp_path, levels + HOST)
    assert "spec.levels[].nodeLabel 'TOR' is not a column of the CSV" in message
    assert "(its level columns: DSW, PSW, ASW)" in message
    # and the column it left out is named too
    assert "CSV column 'ASW' is not a level" in message


def test_a_csv_column_the_spec_leaves_out_is_refused(tmp_path: Path) -> None:
    levels = "levels:\n  - {nodeLabel: DSW, oversubscription: 1.0}\n"
    message = _error(tmp_path, levels + HOST)
    assert "CSV column 'PSW' is not a level" in message
    assert "CSV column 'ASW' is not a level" in message
    assert "2 thing(s)" in message


def test_a_spec_without_host_layout_or_nics_is_refused(tmp_path: Path) -> None:
    assert "spec.defaultHost is not given" in _error(tmp_path, LEVELS)
    no_nics = LEVELS + "defaultHost:\n  gpus: 8\n"
    assert "spec.defaultHost.nics is empty" in _error(tmp_path, no_nics)


def test_hosts_of_another_size_than_the_layout_are_refused(tmp_path: Path) -> None:
    message = _error(tmp_path, LEVELS + HOST, gpus_per_host=4)
    assert "spec.defaultHost.gpus is 8 but the hosts were given 4 GPUs each" in message


def test_lingjun_spec_states_everything() -> None:
    spec = read_topology_spec(LINGJUN / "topology.yaml")
    topo = load_csv_topology(LINGJUN / "topo.csv", spec, gpus_per_host=8)
    assert [level.oversubscription for level in topo.levels] == [1.0, 2.0, 2.0]
    assert all(len(host.nics) == 4 for host in topo.hosts)


def test_the_benchmark_refuses_a_csv_without_spec(tmp_path: Path) -> None:
    csv_path, _ = _files(tmp_path, "")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'benchmarks'}"}
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "topology_training.py"),
            "--topology",
            str(csv_path),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert run.returncode != 0
    assert "oversubscription and the host layout are missing" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()
