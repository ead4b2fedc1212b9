"""Gavel-format job traces: both layouts, round trip, and errors naming file:line:field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voltpack.model.errors import TraceFormatError
from voltpack.sim.datasets import data_dir
from voltpack.sim.traces.gavel import (
    MSR_FIELDS,
    PHYSICAL_FIELDS,
    GavelJob,
    load_gavel_trace,
    write_gavel_trace,
)

GAVEL = data_dir() / "gavel"
ANCHOR = GAVEL / "generated" / "gavel_gen_120jobs_lam1200_seed0.trace"

PHYSICAL_COUNTS = {
    "artifact_evaluation.trace": 15,
    "debug.trace": 14,
    "debug_v2.trace": 14,
    "highmem_test.trace": 8,
    "max_min_fairness.trace": 96,
    "medium_test.trace": 20,
    "minimize_makespan.trace": 100,
    "small_test.trace": 20,
}
MSR_COUNTS = {
    "0e4a51.trace": 1181,
    "103959.trace": 986,
    "11cb48.trace": 2000,
    "23dbec.trace": 9,
    "2869ce.trace": 533,
    "51b7ef.trace": 18,
    "6214e9.trace": 2000,
    "6c71a0.trace": 2000,
    "795a4c.trace": 3,
    "7f04ca.trace": 972,
    "925e2b.trace": 4,
    "b436b2.trace": 2000,
    "e13805.trace": 607,
    "ed69ec.trace": 951,
    "ee9e8c.trace": 2000,
}

PHYSICAL_LINE = "A3C\tpython3 main.py\trl\t--max-steps\t0\t25832\t1\t1\t-1.000000\t173"
MSR_LINE = "LM (batch size 20)\tpython3 main.py\t--steps\t1\t500\t12.5\t2"


def _write(tmp_path: Path, *lines: str, name: str = "t.trace") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _physical(**fields: str) -> str:
    row = dict(zip(PHYSICAL_FIELDS, PHYSICAL_LINE.split("\t"), strict=True))
    row.update(fields)
    return "\t".join(row[name] for name in PHYSICAL_FIELDS)


def _msr(**fields: str) -> str:
    row = dict(zip(MSR_FIELDS, MSR_LINE.split("\t"), strict=True))
    row.update(fields)
    return "\t".join(row[name] for name in MSR_FIELDS)


# --- shipped files --------------------------------------------------------------------------


def test_physical_cluster_traces_parse_with_their_job_counts() -> None:
    folder = GAVEL / "physical_cluster"
    assert {p.name for p in folder.glob("*.trace")} == set(PHYSICAL_COUNTS)
    for name, count in PHYSICAL_COUNTS.items():
        jobs = load_gavel_trace(folder / name)
        assert len(jobs) == count, name
        assert all(len(line.split("\t")) == 10 for line in (folder / name).read_text().splitlines())
        assert all(j.total_steps >= 1 and j.scale_factor >= 1 for j in jobs)


def test_msr_traces_parse_with_their_job_counts() -> None:
    folder = GAVEL / "msr-seed0"
    assert {p.name for p in folder.glob("*.trace")} == set(MSR_COUNTS)
    for name, count in MSR_COUNTS.items():
        jobs = load_gavel_trace(folder / name)
        assert len(jobs) == count, name
        # The 7-field layout has no weight, SLO or working directory.
        assert all(j.priority_weight == 1.0 and j.slo is None for j in jobs)
        assert all(j.working_directory == "" for j in jobs)
        arrivals = [j.arrival_s for j in jobs]
        assert arrivals == sorted(arrivals)


def test_anchor_trace_fields() -> None:
    jobs = load_gavel_trace(ANCHOR)
    assert len(jobs) == 120
    first = jobs[0]
    assert first.job_type == "Transformer (batch size 128)"
    assert first.total_steps == 19605
    assert first.scale_factor == 1
    assert first.arrival_s == 0.0
    assert first.priority_weight == 1.0
    assert first.slo is None
    assert first.working_directory == "translation"
    assert first.num_steps_arg == "-step"
    assert first.needs_data_dir is True
    assert jobs[1].needs_data_dir is False
    assert {j.scale_factor for j in jobs} == {1, 2, 4}


def test_msr_line_fields(tmp_path: Path) -> None:
    (job,) = load_gavel_trace(_write(tmp_path, MSR_LINE))
    assert job == GavelJob(
        job_type="LM (batch size 20)",
        total_steps=500,
        scale_factor=2,
        arrival_s=12.5,
        command="python3 main.py",
        num_steps_arg="--steps",
        needs_data_dir=True,
    )


def test_physical_line_with_weight_and_slo(tmp_path: Path) -> None:
    line = _physical(priority_weight="2.5", slo="3600.000000", arrival_s="7.25")
    (job,) = load_gavel_trace(_write(tmp_path, line))
    assert job.priority_weight == 2.5
    assert job.slo == 3600.0
    assert job.arrival_s == 7.25


def test_blank_lines_are_skipped_and_line_numbers_stay_physical(tmp_path: Path) -> None:
    path = _write(tmp_path, PHYSICAL_LINE, "", "   ", _physical(scale_factor="0"))
    with pytest.raises(TraceFormatError, match=r"t\.trace:4: field scale_factor"):
        load_gavel_trace(path)
    assert len(load_gavel_trace(_write(tmp_path, "", MSR_LINE, "", PHYSICAL_LINE, ""))) == 2


# --- round trip -----------------------------------------------------------------------------


def test_anchor_trace_round_trips_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "copy.trace"
    write_gavel_trace(out, load_gavel_trace(ANCHOR))
    assert out.read_bytes() == ANCHOR.read_bytes()


def test_msr_trace_round_trips_through_the_physical_layout(tmp_path: Path) -> None:
    jobs = load_gavel_trace(GAVEL / "msr-seed0" / "51b7ef.trace")
    out = tmp_path / "msr-as-physical.trace"
    write_gavel_trace(out, jobs)
    assert all(len(line.split("\t")) == 10 for line in out.read_text().splitlines())
    assert load_gavel_trace(out) == jobs


_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")),
    max_size=20,
)
_jobs = st.lists(
    st.builds(
        GavelJob,
        job_type=_text.map(str.strip).filter(bool),
        total_steps=st.integers(1, 10**9),
        scale_factor=st.integers(1, 64),
        arrival_s=st.floats(0, 1e7, allow_nan=False),
        priority_weight=st.one_of(
            st.integers(1, 100).map(float), st.floats(0.01, 100, allow_nan=False)
        ),
        slo=st.one_of(st.none(), st.integers(1, 10**6).map(float)),
        command=_text,
        working_directory=_text,
        num_steps_arg=_text,
        needs_data_dir=st.booleans(),
    ),
    min_size=1,
    max_size=20,
).map(lambda jobs: sorted(jobs, key=lambda j: j.arrival_s))


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(jobs=_jobs)
def test_write_then_load_returns_the_same_jobs(tmp_path: Path, jobs: list[GavelJob]) -> None:
    path = tmp_path / "roundtrip.trace"
    write_gavel_trace(path, jobs)
    assert load_gavel_trace(path) == jobs


# --- malformed lines ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (_physical(total_steps="12.5"), "total_steps"),
        (_physical(total_steps="many"), "total_steps"),
        (_physical(total_steps="0"), "total_steps"),
        (_physical(total_steps="nan"), "total_steps"),
        (_physical(scale_factor="0"), "scale_factor"),
        (_physical(scale_factor="-2"), "scale_factor"),
        (_physical(scale_factor="1.5"), "scale_factor"),
        (_physical(arrival_s="-1"), "arrival_s"),
        (_physical(arrival_s="inf"), "arrival_s"),
        (_physical(arrival_s=""), "arrival_s"),
        (_physical(priority_weight="0"), "priority_weight"),
        (_physical(priority_weight="heavy"), "priority_weight"),
        (_physical(slo="soon"), "slo"),
        (_physical(job_type="  "), "job_type"),
        (_msr(total_steps="1e3.5"), "total_steps"),
        (_msr(scale_factor="0"), "scale_factor"),
        (_msr(arrival_s="-0.5"), "arrival_s"),
    ],
)
def test_bad_field_names_file_line_and_field(tmp_path: Path, line: str, field: str) -> None:
    path = _write(tmp_path, PHYSICAL_LINE, line)
    with pytest.raises(TraceFormatError, match=rf"^{re.escape(str(path))}:2: field {field}\b"):
        load_gavel_trace(path)


@pytest.mark.parametrize("count", [1, 6, 8, 9, 11])
def test_wrong_field_count_names_file_and_line(tmp_path: Path, count: int) -> None:
    path = _write(tmp_path, PHYSICAL_LINE, "\t".join(["x"] * count))
    with pytest.raises(
        TraceFormatError, match=rf"^{re.escape(str(path))}:2: {count} tab-separated fields"
    ):
        load_gavel_trace(path)


def test_decreasing_arrivals_name_file_line_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, _physical(arrival_s="100"), _physical(arrival_s="99.5"))
    with pytest.raises(
        TraceFormatError, match=rf"^{re.escape(str(path))}:2: field arrival_s=99.5 is earlier"
    ):
        load_gavel_trace(path)


def test_equal_arrivals_are_allowed(tmp_path: Path) -> None:
    path = _write(tmp_path, PHYSICAL_LINE, PHYSICAL_LINE)
    assert len(load_gavel_trace(path)) == 2


@pytest.mark.parametrize("content", ["", "\n\n", "  \n\t\n"])
def test_empty_file_names_the_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.trace"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TraceFormatError, match=rf"^{re.escape(str(path))}: no jobs"):
        load_gavel_trace(path)


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.trace"
    with pytest.raises(TraceFormatError, match=rf"^{re.escape(str(path))}: cannot open"):
        load_gavel_trace(path)


def test_non_utf8_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.trace"
    path.write_bytes(PHYSICAL_LINE.replace("A3C", "A3C\xe9").encode("latin-1") + b"\n")
    with pytest.raises(TraceFormatError, match=rf"^{re.escape(str(path))}: not UTF-8"):
        load_gavel_trace(path)


def test_a_field_with_a_tab_cannot_be_written(tmp_path: Path) -> None:
    job = GavelJob("A3C", 10, 1, 0.0, command="python3 main.py\t--x")
    with pytest.raises(TraceFormatError, match="field command holds a tab or line break"):
        write_gavel_trace(tmp_path / "bad.trace", [job])


@pytest.mark.parametrize("slo", [1.23456789, 1e-7, 250.0])
def test_an_slo_survives_the_round_trip_exactly(tmp_path: Path, slo: float) -> None:
    path = tmp_path / "slo.trace"
    write_gavel_trace(path, [GavelJob("A3C", 10, 1, 0.0, slo=slo)])
    assert load_gavel_trace(path)[0].slo == slo
