"""A watch's byte stream cut anywhere gives back its whole lines (`kube/watch_stream.py`)."""

from __future__ import annotations

import itertools
import json

from hypothesis import given
from hypothesis import strategies as st

from voltpack.operator.kube.watch_stream import event_lines

EVENTS = [
    {"type": "ADDED", "object": {"metadata": {"name": f"p{i}", "resourceVersion": str(i)}}}
    for i in range(6)
]
STREAM = b"".join(json.dumps(e).encode() + b"\n" for e in EVENTS)


@given(cuts=st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_lines_survive_any_cut(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(STREAM)]
    chunks = [STREAM[a:b] for a, b in itertools.pairwise(points)]
    assert [json.loads(line) for line in event_lines(iter(chunks))] == EVENTS


def test_an_unended_last_line_and_blank_lines() -> None:
    chunks = [b'\n{"type": "BOOKMARK"}\n\n', b'{"type": "ADD', b'ED"}']
    assert list(event_lines(iter(chunks))) == [b'{"type": "BOOKMARK"}', b'{"type": "ADDED"}']
