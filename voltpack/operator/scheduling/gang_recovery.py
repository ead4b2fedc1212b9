"""Fault recovery for GPUJobs: re-place a gang hit by a GPU fault, or shrink and grow it back.

Each cycle (as leader) the operator gives this the GPUJobs, the pods, the faults its GPUNodes
report and the cordoned snapshot. The decisions are the recovery core's
(`voltpack.scheduler.fault_recovery`); this module carries them out:

- a worker bound to a cordoned GPU (or node) is *hit*; `recovery_for` says how its job goes on:
  - `RESTART` (the default): every worker pod of the job is deleted and, once all are gone,
    the GPUJob controller creates them again with the same names; the scheduler places the
    gang whole, off the cordoned GPUs; ranks are given in placement order again (for a gang
    without a topology request, the same ranks as before). Within the `RestartBudget`
    (at most `max_restarts` per window, exponential backoff): a restart the budget refuses
    waits, and says until when.
  - `SHRINK` (an elastic job, `minWorkers < workers`, keeping at least `minWorkers` healthy
    workers): only the hit workers are deleted and not created again; the others keep
    running and their `voltpack.io/world-size` / `voltpack.io/world-ranks` annotations say
    the new size (docs/elastic-training.md).
- preemption may shrink an elastic job to its `minWorkers` instead of evicting it
  (`voltpack.scheduler.preemption`): the workers it takes are recorded as missing here;
- an elastic job running short grows back when workers fit again (`restart_workers` says how
  many; the same number must fit for `grow_settle_s`, so that a job finishing pod by pod
  does not cause a grow per pod): the missing workers are created as gangs of one that take
  the missing ranks. A grow counts against the budget as a re-placement.

Events on the GPUJob and a `Recovered` condition say what was done and why; `status.recovery`
keeps the re-placement times and the missing workers, so a new leader keeps the budget.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import CoreV1Api
from pydantic import ValidationError

from voltpack.model.errors import InvalidRequestError
from voltpack.model.resources import API_GROUP, API_VERSION, GpuJobSpec
from voltpack.model.snapshot import ClusterSnapshot
from voltpack.model.work import Eviction
from voltpack.model.workload import Pod
from voltpack.operator.kube.binder import record_event
from voltpack.operator.kube.client import api_message, call_json, status_code
from voltpack.operator.kube.conventions import (
    POD_GROUP_ANNOTATION,
    RANK_ANNOTATION,
    REJOIN_RANK_ANNOTATION,
    WORKER_RANKS_ANNOTATION,
    WORLD_SIZE_ANNOTATION,
)
from voltpack.operator.kube.translate import gpu_indices, pod_from_k8s, pod_key
from voltpack.operator.scheduling.gpu_faults import GpuFaultSeen
from voltpack.operator.scheduling.jobs import (
    JOB_LABEL,
    WorkerPlan,
    is_elastic,
    owning_job,
    worker_index,
    worker_pod,
)
from voltpack.policies.strategy import pick_best_fit_gpus
from voltpack.scheduler.fault_recovery import (
    FaultedGang,
    FaultScope,
    GangShape,
    Isolation,
    RecoveryChoice,
    RecoveryKind,
    RecoveryPolicy,
    RestartBudget,
    choose_recovery,
    restart_workers,
)
from voltpack.scheduler.filter import filter_nodes

log = logging.getLogger(__name__)


@dataclass
class _JobState:
    missing: set[int] = field(default_factory=set)
    """Worker indices an elastic job runs without."""
    draining: set[str] = field(default_factory=set)
    """UIDs of pods deleted for a restart that the cache still shows."""
    shed: set[str] = field(default_factory=set)
    """UIDs of workers deleted in a shrink that the cache still shows (not hit twice)."""
    rejoin: dict[int, int] = field(default_factory=dict)
    """Worker index -> rank of workers created to grow the job back, until bound."""
    message: str = ""
    reason: str = ""
    deferred: str = ""
    """The last 'restart deferred' message (said once)."""
    growing: tuple[int, float] | None = None
    """(size the job could grow to, since when): room seen but not yet held for long enough."""


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class _Hit:
    scope: FaultScope
    reason: str


@dataclass(frozen=True)
class _Prepared:
    """One job as `prepare` found it: its workers alive and bound, and those on a fault."""

    job: dict[str, Any]
    spec: GpuJobSpec
    key: str
    state: _JobState
    bound: list[dict[str, Any]]
    alive: list[dict[str, Any]]
    hits: dict[str, _Hit]


class GangRecovery:
    """Carries out the recovery core's decisions for every GPUJob, cycle after cycle."""

    def __init__(
        self,
        core: CoreV1Api,
        policy: RecoveryPolicy | None = None,
        clock: Callable[[], float] = time.time,
        grow_settle_s: float = 2.0,
    ) -> None:
        """`grow_settle_s`: room for an elastic job's missing workers must hold this long
        (e.g. every pod of a finished job gone, not the first of them) before it grows."""
        self.core = core
        self.grow_settle_s = grow_settle_s
        self.policy = policy or RecoveryPolicy()
        self.budget = RestartBudget(self.policy)
        self.clock = clock
        self._state: dict[str, _JobState] = {}
        self._prepared: dict[str, _Prepared] = {}
        self.restarts = 0
        self.shrinks = 0
        self.grows = 0

    def set_policy(self, policy: RecoveryPolicy) -> None:
        """Switch to `policy` (a policy file applied); the re-placements so far still count."""
        self.policy = policy
        self.budget.policy = policy

    def cycle(
        self,
        gpujobs: Iterable[dict[str, Any]],
        pods: list[dict[str, Any]],
        faults: list[GpuFaultSeen],
        isolation: Isolation,
        snapshot: ClusterSnapshot,
    ) -> dict[str, WorkerPlan]:
        """`prepare`, the core's choice for each faulted gang, and `carry_out`, in one call
        (the operator's cycle has the session choose in between)."""
        faulted = self.prepare(gpujobs, pods, faults, isolation, snapshot)
        choices = {gang.name: choose_recovery(gang, self.policy) for gang in faulted}
        return self.carry_out(choices, snapshot)

    def prepare(
        self,
        gpujobs: Iterable[dict[str, Any]],
        pods: list[dict[str, Any]],
        faults: list[GpuFaultSeen],
        isolation: Isolation,
        snapshot: ClusterSnapshot,
    ) -> list[FaultedGang]:
        """Every job's workers matched with the faults; the gangs hit, for the session to
        choose their recovery (`carry_out` then acts on the choices)."""
        now = self.clock()
        by_job: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for pod in pods:
            meta = pod["metadata"]
            job = (meta.get("labels") or {}).get(JOB_LABEL)
            if job:
                by_job.setdefault((meta.get("namespace") or "default", job), []).append(pod)
        self._prepared = {}
        seen = set()
        quiet = not isolation.gpus and not isolation.nodes
        faulted = []
        for job in gpujobs:
            meta = job["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            key = f"{meta['namespace']}/{meta['name']}"
            seen.add(key)
            if quiet and key not in self._state and not (job.get("status") or {}).get("recovery"):
                continue  # the common case: nothing cordoned, nothing ever recovered
            try:
                spec = GpuJobSpec.model_validate(job.get("spec") or {})
            except ValidationError:
                continue
            workers = by_job.get((meta["namespace"], meta["name"]), [])
            try:
                prepared = self._prepare_job(job, spec, key, workers, faults, isolation, snapshot)
            except Exception as error:  # one job's trouble does not stop the others
                log.warning("GPUJob %s: recovery not carried out: %s", key, api_message(error))
                continue
            self._prepared[key] = prepared
            if prepared.hits and not prepared.state.draining:
                faulted.append(self._faulted(prepared, now))
        for gone in set(self._state) - seen:
            del self._state[gone]
        return faulted

    def carry_out(
        self, choices: Mapping[str, RecoveryChoice], snapshot: ClusterSnapshot
    ) -> dict[str, WorkerPlan]:
        """Act on the prepared jobs: each faulted gang as `choices` says, elastic jobs short
        of workers grown back when room holds; the job controller's plans."""
        now = self.clock()
        plans: dict[str, WorkerPlan] = {}
        for key, job in self._prepared.items():
            try:
                plans[key] = self._carry_out_job(job, choices.get(key), snapshot, now)
            except Exception as error:  # one job's trouble does not stop the others
                log.warning("GPUJob %s: recovery not carried out: %s", key, api_message(error))
        self._prepared = {}
        return plans

    def shrunk_by_preemption(
        self, eviction: Eviction, by_key: Mapping[str, dict[str, Any]]
    ) -> None:
        """Preemption took some workers of an elastic job (`eviction.shrink`): they are not
        created again until the job grows back."""
        jobs: dict[str, dict[str, Any]] = {}
        for request, _, _ in eviction.gang.pods:
            pod = by_key.get(request.name)
            job = owning_job(pod) if pod is not None else None
            if pod is None or job is None:
                continue
            index = worker_index(job["metadata"]["name"], pod["metadata"]["name"])
            key = _key(job)
            if index is None:
                continue
            self._state.setdefault(key, _JobState()).missing.add(index)
            jobs[key] = job
        for key, job in jobs.items():
            self._say(job, self._state[key], "ShrunkInPlace", eviction.reason)
            self.shrinks += 1

    def _seed(self, job: dict[str, Any], key: str, now: float) -> _JobState:
        """State from `status.recovery` (a new leader, or an operator restart)."""
        recovery = (job.get("status") or {}).get("recovery") or {}
        state = _JobState(missing={int(i) for i in recovery.get("missingWorkers") or []})
        state.message = str(recovery.get("message") or "")
        for text in recovery.get("restarts") or []:
            moment = _parse(str(text))
            if moment is None or moment <= now - self.policy.budget_window_s:
                continue
            if self.budget.next_allowed_s(key, moment) <= moment:
                self.budget.record(key, moment)
        return state

    def _prepare_job(
        self,
        job: dict[str, Any],
        spec: GpuJobSpec,
        key: str,
        workers: list[dict[str, Any]],
        faults: list[GpuFaultSeen],
        isolation: Isolation,
        snapshot: ClusterSnapshot,
    ) -> _Prepared:
        state = self._state.get(key)
        if state is None:
            state = self._state[key] = self._seed(job, key, self.clock())
        present = {str(w["metadata"].get("uid")) for w in workers}
        state.draining &= present
        state.shed &= present
        alive = [
            w
            for w in workers
            if not w["metadata"].get("deletionTimestamp")
            and str(w["metadata"].get("uid")) not in state.shed
            and (w.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        bound = [w for w in alive if (w.get("spec") or {}).get("nodeName")]
        for index, _ in list(state.rejoin.items()):
            name = f"{job['metadata']['name']}-worker-{index}"
            if any(w["metadata"]["name"] == name for w in bound):
                del state.rejoin[index]
        hits = {
            w["metadata"]["name"]: hit
            for w in bound
            if (hit := self._hit(w, faults, isolation, snapshot)) is not None
        }
        return _Prepared(job, spec, key, state, bound, alive, hits)

    def _faulted(self, job: _Prepared, now: float) -> FaultedGang:
        """The core's view of a job hit by faults."""
        hits = job.hits.values()
        first = next(iter(hits))
        scope = FaultScope.NODE if any(h.scope is FaultScope.NODE for h in hits) else first.scope
        spec = job.spec
        allowed_s = self.budget.next_allowed_s(job.key, now)
        return FaultedGang(
            name=job.key,
            scope=scope,
            shape=GangShape(
                workers=min(len(job.bound), spec.workers),
                full_workers=spec.workers,
                min_workers=min(spec.min_workers or spec.workers, spec.workers),
            ),
            hit_workers=len(job.hits),
            elastic=is_elastic(spec),
            restart_deferred_until_s=allowed_s if allowed_s > now else None,
            pods=frozenset(pod_key(w) for w in job.bound),
        )

    def _carry_out_job(
        self,
        job: _Prepared,
        choice: RecoveryChoice | None,
        snapshot: ClusterSnapshot,
        now: float,
    ) -> WorkerPlan:
        state, bound = job.state, job.bound
        if job.hits and not state.draining and choice is not None:
            gone = self._recover(job, choice, now)
            bound = [w for w in bound if w["metadata"]["name"] not in gone]
        elif state.missing and not state.draining and not job.hits and is_elastic(job.spec):
            self._grow(job.job, job.spec, job.key, state, bound, snapshot, now)
        return self._plan(job.job, job.spec, state, bound)

    def _hit(
        self,
        pod: dict[str, Any],
        faults: list[GpuFaultSeen],
        isolation: Isolation,
        snapshot: ClusterSnapshot,
    ) -> _Hit | None:
        """The fault a bound worker sits on, if any."""
        node_name = pod["spec"]["nodeName"]
        try:
            node = snapshot.node_index(node_name)
        except KeyError:
            return None
        gpus = gpu_indices(pod) or ()
        if node not in isolation.nodes and not any(isolation.covers(node, g) for g in gpus):
            return None
        on_node = [f for f in faults if f.node == node_name]
        mine = [f for f in on_node if f.gpu in gpus or f.scope is FaultScope.NODE] or on_node
        scope = FaultScope.NODE if node in isolation.nodes else FaultScope.GPU
        reason = mine[0].reason if mine else f"node {node_name} is cordoned"
        return _Hit(scope, reason)

    def _recover(self, job: _Prepared, choice: RecoveryChoice, now: float) -> set[str]:
        """Shrink or restart the job (or defer the restart) as the session chose; the names
        of the pods deleted."""
        name, state, hits = job.job["metadata"]["name"], job.state, job.hits
        first = next(iter(hits.values()))
        running = len(job.bound)
        if choice.kind is RecoveryKind.SHRINK:
            min_workers = min(job.spec.min_workers or job.spec.workers, job.spec.workers)
            for pod in job.bound:
                if pod["metadata"]["name"] in hits:
                    self._delete(pod)
                    state.shed.add(str(pod["metadata"].get("uid")))
                    index = worker_index(name, pod["metadata"]["name"])
                    if index is not None:
                        state.missing.add(index)
            left = running - len(hits)
            self._say(
                job.job,
                state,
                "ShrunkInPlace",
                f"{first.reason}: shrinking in place from {running} to {left} workers "
                f"(minWorkers {min_workers}); the other workers go on without a restart",
            )
            self.shrinks += 1
            return set(hits)
        if choice.kind is None:
            allowed_at = choice.deferred_until_s or now
            message = (
                f"{first.reason}: gang restart deferred until {_stamp(allowed_at)} (restart "
                f"budget: {self.policy.max_restarts} per {self._window()}, with backoff)"
            )
            if state.deferred != first.reason:
                state.deferred = first.reason
                self._say(job.job, state, "RestartDeferred", message)
            return set()
        self.budget.record(job.key, now)
        count = self.budget.count(job.key, now)
        for pod in job.alive:
            self._delete(pod)
        state.draining = {str(p["metadata"].get("uid")) for p in job.alive}
        state.missing.clear()
        state.rejoin.clear()
        state.deferred = ""
        self._say(
            job.job,
            state,
            "RestartingGang",
            f"{first.reason}: restarting gang from its checkpoint (restart {count} of "
            f"{self.policy.max_restarts} {self._window('this')})",
        )
        self.restarts += 1
        return {p["metadata"]["name"] for p in job.alive}

    def _grow(
        self,
        job: dict[str, Any],
        spec: GpuJobSpec,
        key: str,
        state: _JobState,
        bound: list[dict[str, Any]],
        snapshot: ClusterSnapshot,
        now: float,
    ) -> None:
        if state.rejoin:
            return  # workers already on their way back
        running = len(bound)
        gang = GangShape(
            workers=max(min(running, spec.workers), 1),
            full_workers=spec.workers,
            min_workers=min(spec.min_workers or spec.workers, spec.workers),
        )
        index = min(state.missing)
        request = pod_from_k8s(worker_pod(job, spec, index))
        fit = _workers_that_fit(snapshot, request, len(state.missing))
        target = restart_workers(gang, running + fit, self.policy)
        if target is None or target <= running:
            state.growing = None
            return
        if state.growing is None or state.growing[0] != target:
            state.growing = (target, now)  # room seen: grow once it has held for settle_s
            return
        if now - state.growing[1] < self.grow_settle_s:
            return
        if self.budget.next_allowed_s(key, now) > now:
            return
        state.growing = None
        self.budget.record(key, now)
        used = {_rank(w) for w in bound} - {None}
        free_ranks = [r for r in range(spec.workers) if r not in used]
        chosen = sorted(state.missing)[: target - running]
        state.rejoin = dict(zip(chosen, free_ranks, strict=False))
        state.missing -= set(chosen)
        count = self.budget.count(key, now)
        self._say(
            job,
            state,
            "GrowingBack",
            f"capacity is back: growing from {running} to {target} workers (re-placement "
            f"{count} of {self.policy.max_restarts} {self._window('this')})",
        )
        self.grows += 1

    def _plan(
        self, job: dict[str, Any], spec: GpuJobSpec, state: _JobState, bound: list[dict[str, Any]]
    ) -> WorkerPlan:
        skip = set(state.missing)
        if state.draining:
            skip |= set(range(spec.workers))
        world = spec.workers - len(state.missing)
        ranks = tuple(
            sorted({r for w in bound if (r := _rank(w)) is not None} | set(state.rejoin.values()))
        )
        if is_elastic(spec):
            self._tell_world_size(bound, world, ranks)
        recovery = None
        condition = None
        if state.message:
            recovery = {
                "restarts": [_stamp(t) for t in self.budget.times(_key(job), self.clock())],
                "missingWorkers": sorted(state.missing),
                "message": state.message,
            }
            whole = not state.draining and not state.missing and len(bound) == spec.workers
            condition = {
                "type": "Recovered",
                "status": "True" if whole else "False",
                "reason": state.reason or "Recovered",
                "message": state.message,
            }
        return WorkerPlan(
            skip=frozenset(skip),
            rejoin=dict(state.rejoin),
            world_size=world if is_elastic(spec) else None,
            ranks=ranks if is_elastic(spec) and len(ranks) == world else (),
            recovery=recovery,
            condition=condition,
        )

    def _tell_world_size(
        self, bound: list[dict[str, Any]], world: int, ranks: tuple[int, ...]
    ) -> None:
        """Bring the running workers' world-size annotations up to date."""
        wanted = {WORLD_SIZE_ANNOTATION: str(world)}
        if len(ranks) == world:
            wanted[WORKER_RANKS_ANNOTATION] = ",".join(str(r) for r in ranks)
        for pod in bound:
            annotations = pod["metadata"].get("annotations") or {}
            if WORLD_SIZE_ANNOTATION not in annotations:
                continue  # not created as an elastic worker
            if all(annotations.get(k) == v for k, v in wanted.items()):
                continue
            try:
                call_json(
                    self.core.patch_namespaced_pod,
                    pod["metadata"]["name"],
                    pod["metadata"]["namespace"],
                    {"metadata": {"annotations": wanted}},
                )
            except Exception as error:
                if status_code(error) != 404:
                    log.warning(
                        "world size not written on %s: %s",
                        pod["metadata"]["name"],
                        api_message(error),
                    )

    def _say(self, job: dict[str, Any], state: _JobState, reason: str, message: str) -> None:
        state.message, state.reason = message, reason
        obj = {**job, "apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": "GPUJob"}
        record_event(self.core, obj, reason, message)
        log.info("GPUJob %s: %s", job["metadata"]["name"], message)

    def _delete(self, pod: dict[str, Any]) -> None:
        try:
            call_json(
                self.core.delete_namespaced_pod,
                pod["metadata"]["name"],
                pod["metadata"]["namespace"],
            )
        except Exception as error:
            if status_code(error) != 404:
                raise

    def _window(self, prefix: str = "") -> str:
        window = self.policy.budget_window_s
        text = "hour" if window == 3600 else f"{window:g} s"
        return f"{prefix} {text}".strip()


def _key(job: dict[str, Any]) -> str:
    return f"{job['metadata']['namespace']}/{job['metadata']['name']}"


def _rank(pod: dict[str, Any]) -> int | None:
    text = (pod["metadata"].get("annotations") or {}).get(RANK_ANNOTATION)
    return int(text) if text and text.isdigit() else None


def _workers_that_fit(snapshot: ClusterSnapshot, request: Pod, most: int) -> int:
    """How many workers like `request` fit in `snapshot`'s free capacity (greedy, at most
    `most`); the snapshot is not changed."""
    room = snapshot.copy()
    placed = 0
    while placed < most:
        feasible = filter_nodes(room, request).feasible
        if not feasible.any():
            break
        node = int(feasible.argmax())
        try:
            room.allocate(node, request, pick_best_fit_gpus(room, node, request))
        except InvalidRequestError:
            break
        placed += 1
    return placed


def join_ranks(
    gang: list[str], by_key: Mapping[str, dict[str, Any]], pods: Iterable[dict[str, Any]]
) -> dict[str, int]:
    """Ranks for pods (`namespace/name`) joining an elastic job whose other workers run: the
    rank a rejoining worker was given (`voltpack.io/rejoin-rank`), else the lowest ranks the
    running workers do not hold. Empty when the gang is not such a joiner (ranks by position)."""
    first = by_key.get(gang[0]) if gang else None
    annotations = (first or {}).get("metadata", {}).get("annotations") or {}
    if first is None or WORLD_SIZE_ANNOTATION not in annotations:
        return {}
    namespace = first["metadata"].get("namespace")
    group = annotations.get(POD_GROUP_ANNOTATION)
    joining = set(gang)
    used = {
        rank
        for pod in pods
        if (pod.get("spec") or {}).get("nodeName")
        and pod["metadata"].get("namespace") == namespace
        and (pod["metadata"].get("annotations") or {}).get(POD_GROUP_ANNOTATION) == group
        and f"{namespace}/{pod['metadata']['name']}" not in joining
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and not pod["metadata"].get("deletionTimestamp")
        and (rank := _rank(pod)) is not None
    }
    ranks: dict[str, int] = {}
    for key in gang:
        text = ((by_key.get(key) or {}).get("metadata", {}).get("annotations") or {}).get(
            REJOIN_RANK_ANNOTATION, ""
        )
        if text.isdigit():
            ranks[key] = int(text)
    if not used:
        return ranks
    taken = used | set(ranks.values())
    free = (r for r in range(len(taken) + len(gang)) if r not in taken)
    for key in gang:
        if key not in ranks:
            ranks[key] = next(free)
    return ranks
