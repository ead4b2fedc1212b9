"""Binding a cycle's gangs several at a time, as kube-scheduler binds in goroutines.

Each gang is still bound by `bind_gang` (one request per pod, all or none); only
different gangs are in flight together. A binding waits on the API server, not on this
process's CPU, so threads overlap the round trips: one after another, a real kube-apiserver on
this 2-core machine took about 20 ms per binding (50 pods/s).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace

from kubernetes.client import CoreV1Api

from voltpack.model.decision import Placement
from voltpack.operator.dra.support import GangClaims
from voltpack.operator.dra.writer import ClaimWrite
from voltpack.operator.kube.binder import GangBindResult, bind_gang, record_event
from voltpack.operator.kube.conventions import PLACEMENT_REASON_ANNOTATION
from voltpack.operator.kube.event_queue import EventQueue

CHUNKS_PER_CALL = 64
"""Gangs are handed to the pool in about this many chunks (each bound in order by one worker)."""
MAX_CHUNK_GANGS = 256

ClaimsWriter = Callable[[Sequence[ClaimWrite]], str]
"""Writes a gang's ResourceClaims all or none: '' on success, else why."""


@dataclass(frozen=True)
class GangBinding:
    """One gang to bind: its placements and what is written with them."""

    placements: tuple[Placement, ...]
    uids: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)
    claims: tuple[ClaimWrite, ...] = ()
    """ResourceClaims to allocate and reserve before any pod of the gang is bound."""
    owned: frozenset[str] = frozenset()
    """Pods a controller owns (created again when a failed binding undoes the gang)."""


def with_claims(binding: GangBinding, claims: GangClaims) -> GangBinding:
    """`binding` with its claim writes, the devices its claims hold as its pods' GPU indices
    and NICs (what the annotations record), and the devices in words added to its reason."""
    if not claims.writes and not claims.words:
        return binding
    annotations = dict(binding.annotations)
    words = "; ".join(
        f"{pod.split('/', 1)[-1]}: {text}" for pod, text in claims.words.items() if text
    )
    if words:
        reason = annotations.get(PLACEMENT_REASON_ANNOTATION)
        annotations[PLACEMENT_REASON_ANNOTATION] = f"{reason}; {words}" if reason else words
    placements = []
    for placement in binding.placements:
        gpus, nics = claims.chosen.get(placement.pod, ((), ()))
        update: dict[str, object] = {}
        if gpus:
            update["gpu_indices"] = gpus
        if nics:
            update["nics"] = nics
        placements.append(placement.model_copy(update=update) if update else placement)
    return replace(
        binding, placements=tuple(placements), annotations=annotations, claims=claims.writes
    )


def record_scheduled(
    core: CoreV1Api, placement: Placement, uid: str | None, events: EventQueue | None = None
) -> None:
    """kube-scheduler's Normal `Scheduled` Event on a bound pod ("Successfully assigned
    NAMESPACE/NAME to NODE"): `kubectl describe` shows it, and tools wait for it. Queued on
    `events` (written off the binding thread), else written now."""
    namespace, _, name = placement.pod.partition("/")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
    }
    message = f"Successfully assigned {placement.pod} to {placement.node}"
    if events is not None:
        events.record(pod, "Scheduled", message)
    else:
        record_event(core, pod, "Scheduled", message, kind="Normal", raw=True)


def bind_gangs(
    core: CoreV1Api,
    bindings: Sequence[GangBinding],
    pool: Executor | None,
    still_leader: Callable[[], bool],
    write_claims: ClaimsWriter | None = None,
    events: EventQueue | None = None,
) -> list[GangBindResult | None]:
    """What binding each gang did, in order; None for a gang not tried because this
    replica stopped leading first (its pods stay pending for the next leader). `pool` binds
    gangs concurrently; None: one after another. A gang's claims are written first; when they
    cannot be, no pod of it is bound."""

    def bind(binding: GangBinding) -> GangBindResult | None:
        if not still_leader():
            return None
        if binding.claims and write_claims is not None:
            problem = write_claims(binding.claims)
            if problem:
                return GangBindResult({p.pod: problem for p in binding.placements})
        result = bind_gang(
            core,
            binding.placements,
            binding.uids,
            binding.annotations,
            binding.ranks,
            binding.owned,
        )
        if not result.failures:
            for placement in binding.placements:
                record_scheduled(core, placement, binding.uids.get(placement.pod), events)
        return result

    if pool is None or len(bindings) <= 1:
        return [bind(b) for b in bindings]
    # a few chunks per worker, not a future per gang: 30,000 futures cost the cycle's thread
    # about 3 s of the GIL on a real apiserver
    size = max(1, min(MAX_CHUNK_GANGS, -(-len(bindings) // CHUNKS_PER_CALL)))
    chunks = [bindings[i : i + size] for i in range(0, len(bindings), size)]
    return [result for done in pool.map(lambda c: [bind(b) for b in c], chunks) for result in done]
