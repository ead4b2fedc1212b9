"""Several inference services sharing one row: which trace each inference server replays.

The Azure LLM 2023 traces are two services (coding and conversation) of one provider. A row
that hosts a mix of them gives each service a share of its inference servers in proportion to
the service's request rate in its trace (requests per second over the trace's span), so every
server carries the same mean request rate and a busier service gets more servers. Servers are
assigned in turn, each to the service furthest below its share so far, so any first `n`
servers (the high-priority ones, or the servers of a smaller row) hold the services in
proportion too: with two services each count is n x share rounded (within half a server);
with more, this greedy rule keeps each within about one server. A single trace is a mix
of one service.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voltpack.model.errors import InvalidRequestError
from voltpack.sim.traces.azure_llm import LlmRequests, load_azure_llm_trace, trace_rate_per_s


@dataclass(frozen=True)
class ServiceMix:
    """Named request traces, one per service, in a fixed order."""

    names: tuple[str, ...]
    traces: tuple[LlmRequests, ...]

    def __post_init__(self) -> None:
        if not self.traces or len(self.names) != len(self.traces):
            raise InvalidRequestError(
                f"a service mix needs one name per trace and at least one trace; got "
                f"{len(self.names)} names and {len(self.traces)} traces"
            )
        for name, trace in zip(self.names, self.traces, strict=True):
            if trace.arrival_s.size == 0:
                raise InvalidRequestError(f"service {name!r}: its trace holds no requests")

    @property
    def shares(self) -> tuple[float, ...]:
        """Each service's share of the inference servers (its share of the request rate)."""
        rates = np.array([trace_rate_per_s(t) for t in self.traces])
        return tuple(float(r) for r in rates / rates.sum())

    def services_of(self, servers: int) -> list[int]:
        """The service index of each of `servers` inference servers, in server order."""
        shares = np.array(self.shares)
        assigned = np.zeros(shares.size)
        out: list[int] = []
        for index in range(servers):
            service = int(np.argmax(shares * (index + 1) - assigned))
            assigned[service] += 1
            out.append(service)
        return out

    def label(self) -> str:
        """The services and their shares, e.g. `conv 68% + code 32%`."""
        return " + ".join(
            f"{name} {share:.0%}" for name, share in zip(self.names, self.shares, strict=True)
        )


def load_service_mix(paths: Sequence[Path]) -> ServiceMix:
    """One service per Azure-format trace file, named after the file (`..._conv.csv` ->
    `conv`); a bad file raises `TraceFormatError` naming it."""
    names = tuple(_service_name(Path(p)) for p in paths)
    if len(set(names)) != len(names):
        raise InvalidRequestError(f"two trace files give the same service name: {list(names)}")
    return ServiceMix(names, tuple(load_azure_llm_trace(Path(p)) for p in paths))


def _service_name(path: Path) -> str:
    return path.stem.removeprefix("AzureLLMInferenceTrace_")


RowTraffic = LlmRequests | ServiceMix
"""What a row's inference servers replay: one trace, or a mix of services."""


def as_mix(traffic: RowTraffic) -> ServiceMix:
    """A mix of one service for a bare trace; a mix unchanged."""
    if isinstance(traffic, ServiceMix):
        return traffic
    return ServiceMix(("trace",), (traffic,))
