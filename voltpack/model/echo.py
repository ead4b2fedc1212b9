"""Echoing a user's input in an error message, bounded: a value is shown up to a limit.

An error that prints a bad value whole can be larger than the request that caused it (an
expanded YAML alias, a megabyte-long string). `short_repr` builds the repr with bounded work
(a few items per collection, a few levels deep) and cuts it to `limit` characters.
"""

from __future__ import annotations

import reprlib
from typing import Any

ECHO_LIMIT = 200
"""Characters of a user's value an error message shows."""
ELLIPSIS = "…"

_REPR = reprlib.Repr()
_REPR.maxlevel = 4
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdeque = 8
_REPR.maxdict = 8
_REPR.maxstring = ECHO_LIMIT
_REPR.maxother = ECHO_LIMIT
_REPR.maxlong = ECHO_LIMIT


def shorten(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text` cut to `limit` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[:limit] + ELLIPSIS


def short_repr(value: Any, limit: int = ECHO_LIMIT) -> str:
    """The repr of `value` (bounded work), cut to `limit` characters."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}{ELLIPSIS} ({len(value)} characters)"
    return shorten(_REPR.repr(value), limit)
