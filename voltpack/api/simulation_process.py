"""Runs a what-if simulation in a child process and follows its progress.

A simulation replays a trace once per policy and seed: seconds to minutes of CPU. Run in a
thread of the API it would hold the interpreter for all that time, and every request would
wait its turn. So the API starts `python -m voltpack.api.simulation_process`, sends it the
request over its stdin and reads progress and the report back from its stdout (pickled, over
the two processes' own pipes).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voltpack.api.pipes import receive, send
from voltpack.model.errors import VoltpackError

if TYPE_CHECKING:
    from voltpack.api.simulations import SimulationRequest

TIMEOUT_S = 3600.0
"""A simulation that has not finished by then is killed and fails."""


class SimulationFailedError(VoltpackError):
    """The simulation could not run (bad input) or its process failed; the message says why."""


def simulate_in_child(
    request: SimulationRequest,
    path: Path,
    progress: Callable[[float], None],
    timeout_s: float = TIMEOUT_S,
) -> dict[str, Any]:
    """The report of `request` over the trace at `path`, simulated in a child process;
    `progress(share)` as it goes. SimulationFailedError when it fails or runs out of time."""
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(
            [sys.executable, "-m", "voltpack.api.simulation_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        assert child.stdin is not None and child.stdout is not None
        watchdog = threading.Timer(timeout_s, child.kill)
        watchdog.start()
        try:
            try:
                send(child.stdin, (request.model_dump(), str(path)))
                child.stdin.close()
            except BrokenPipeError:
                pass  # the child died: its exit status says so
            outcome: tuple[str, Any] | None = None
            while outcome is None:
                try:
                    kind, value = receive(child.stdout)
                except EOFError:
                    break
                if kind == "progress":
                    progress(float(value))
                else:
                    outcome = (kind, value)
            child.stdout.close()
            code = child.wait()
        finally:
            watchdog.cancel()
        if outcome is not None and outcome[0] == "report":
            report: dict[str, Any] = outcome[1]
            return report
        if outcome is not None and outcome[0] == "invalid":
            raise SimulationFailedError(str(outcome[1]))
        errors.seek(0)
        last = errors.read().decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        if code == -9:
            raise SimulationFailedError(f"the simulation did not finish within {timeout_s:g} s")
        raise SimulationFailedError(f"the simulation's process failed ({code}): {last[0]}")


def main() -> None:
    """The child: read the request, simulate, write progress and the report to stdout."""
    from voltpack.api.simulations import SimulationRequest, simulate  # noqa: PLC0415 (cycle)

    out = sys.stdout.buffer
    fields, path = receive(sys.stdin.buffer)
    request = SimulationRequest.model_validate(fields)
    try:
        report = simulate(request, Path(path), lambda share: send(out, ("progress", share)))
    except (VoltpackError, LookupError, ValueError) as exc:
        send(out, ("invalid", str(exc)))
        return
    send(out, ("report", report))


if __name__ == "__main__":
    main()
