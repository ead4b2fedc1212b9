"""Reading trace CSV files row by row, with errors that name the file, the line and the field."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from voltpack.model.errors import TraceFormatError


def csv_rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """Each non-empty row of a CSV file with a header, as (line number, column -> text).

    Raises TraceFormatError naming the file and line for a file that cannot be opened, a
    header without a required column, a row with the wrong number of fields, or non-UTF-8 text.
    """
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot open: {exc.strerror}") from None
    with handle:
        yield from csv_lines_rows(handle, str(path), required)


def csv_lines_rows(
    lines: Iterable[str], origin: str, required: tuple[str, ...]
) -> Iterator[tuple[int, dict[str, str]]]:
    """As `csv_rows`, for text lines from any source (e.g. a member of a tar archive);
    `origin` names the source in error messages."""
    reader = csv.reader(lines)
    try:
        header = [column.strip() for column in next(reader, [])]
        missing = [c for c in required if c not in header]
        if missing:
            raise TraceFormatError(
                f"{origin}:1: header lacks column(s) {', '.join(missing)}; "
                f"expected at least {','.join(required)}"
            )
        for fields in reader:
            line = reader.line_num
            if not fields:
                continue
            if len(fields) != len(header):
                lacking = (
                    f"; field {header[len(fields)]} is missing" if len(fields) < len(header) else ""
                )
                raise TraceFormatError(
                    f"{origin}:{line}: expected {len(header)} fields, found {len(fields)}" + lacking
                )
            yield line, dict(zip(header, fields, strict=True))
    except UnicodeDecodeError as exc:
        raise TraceFormatError(
            f"{origin}:{reader.line_num + 1}: not UTF-8 text (byte {exc.start} of a block)"
        ) from None


def number_field(
    where: str, row: Mapping[str, str], field: str, minimum: float | None = None
) -> float:
    """A row's field as a finite number (at least `minimum` if given); `where` is the
    `file:line` that a TraceFormatError names with the field."""
    text = (row.get(field) or "").strip()
    try:
        value = float(text)
    except ValueError:
        raise TraceFormatError(f"{where}: field {field}={text!r} is not a number") from None
    if not math.isfinite(value) or (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum:g}"
        raise TraceFormatError(f"{where}: field {field}={text!r} must be a finite number{bound}")
    return value


def integer_field(
    where: str, row: Mapping[str, str], field: str, low: int, high: int | None = None
) -> int:
    """A row's field as a whole number in `low..high` (no upper bound if `high` is None)."""
    text = (row.get(field) or "").strip()
    try:
        value = float(text)
    except ValueError:
        raise TraceFormatError(f"{where}: field {field}={text!r} is not an integer") from None
    if not value.is_integer() or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in {low}..{high}"
        raise TraceFormatError(f"{where}: field {field}={text!r} must be an integer {bound}")
    return int(value)
