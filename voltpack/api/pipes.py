"""Values sent between the API and a child process of its own over their pipes (pickled).

Only the two processes' own stdin and stdout carry them, never a file or a socket, so nothing
else can write what `receive` unpickles.
"""

from __future__ import annotations

import pickle
from typing import IO, Any


def send(stream: IO[bytes], value: Any) -> None:
    """Write one value and flush it, so the other side can start on it."""
    pickle.dump(value, stream, protocol=pickle.HIGHEST_PROTOCOL)
    stream.flush()


def receive(stream: IO[bytes]) -> Any:
    """The next value; EOFError once the other side closed its end."""
    return pickle.load(stream)
