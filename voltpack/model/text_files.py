"""Reading a user's text file, turning I/O and encoding failures into voltpack errors."""

from __future__ import annotations

from pathlib import Path

from voltpack.model.errors import VoltpackError


def read_user_text(path: Path, what: str, error: type[VoltpackError]) -> str:
    """The UTF-8 text of `path`; raise `error` naming the file (`what` says what it is)."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: {what} is not UTF-8 text (byte {exc.start})") from None
