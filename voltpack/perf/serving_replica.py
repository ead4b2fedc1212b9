"""Iteration-level LLM serving replicas and the event loop that drives a fleet of them.

A replica runs one iteration at a time: a prefill batch, a decode step, or (chunked prefill) a
decode step that also prefills a chunk of prompt tokens. Every role runs at most its group's
`max_batch` sequences at once (the engine's `max_num_seqs`). Roles:

- `unified` with prefill priority (`prefill_chunk_tokens` None, vLLM V0's default): at each
  iteration boundary, waiting prompts are prefilled together (arrival order, up to a token
  budget but at least one, while the running batch stays within `max_batch` and their KV cache
  fits); the first token leaves at the end of the prefill and the sequence joins the decode
  batch. Otherwise one decode step gives every running sequence a token.
- `unified` with chunked prefill (`prefill_chunk_tokens` C, vLLM V1 and Sarathi-Serve): every
  iteration decodes all running sequences and prefills up to C prompt tokens from the head of
  the prompt queue in arrival order; a prompt may span several iterations and starts only when
  its KV cache fits and the running sequences plus the prompts in progress stay within
  `max_batch`. It takes `profile.mixed_step_s(batch, context, chunk)` (a plain prefill of the
  chunk when nothing decodes). A prompt's first token leaves at the end of the iteration that
  prefills its last token; it decodes from the next iteration on.
- `prefill`: only prefill batches (same admission, at most `max_batch` prompts, KV for the
  prompts only); after the first token the KV cache moves to a decode replica over the
  replica's link, one transfer after another.
- `decode`: admits arrived KV caches at each boundary (arrival order, while they fit) and runs
  decode steps back to back.

A sequence reserves its final KV footprint (prompt + output tokens) when it is admitted, so no
sequence is ever preempted; decode steps are timed with the tokens the batch actually holds.

Iterations between two events run as one *segment*: with the batch fixed until the next
sequence finishes, the step times come from one vectorised call. In a plain decode segment an
arrival that can join cuts the segment at the end of the step in progress. With chunked
prefill, the iterations that give all C tokens to one prompt that does not finish in them form
a segment too (arrivals cannot change them); the iteration that finishes a prompt (and may
start the next ones) runs on its own.

Busy time: a prefill batch, or a chunk with nothing to decode, counts as prefill and a decode
step as decode; a mixed iteration counts `chunk * profile.prefill_token_s` as prefill and the
rest (its decode step) as decode.

Simplifications against a real engine: with prefill priority a prefill stalls the whole
decode batch; a chunk costs the decode step plus a fixed time per prompt token (no attention
over the prompt's earlier chunks), and a chunk with nothing to decode is timed as one prompt
of the chunk's length; KV cache reserved for the final length at admission (the simulator
knows output lengths), so no preemption or recomputation, no paging granularity and no prefix
caching; a prefill replica frees a prompt's KV at the end of the prefill, starts transfers
only after the whole batch (no layer-by-layer overlap) and sends one at a time over its own
link, with no contention in the network or at the decode side; the router sees every
replica's state at once; step times are the profile's, with no scheduling, sampling or
streaming overhead and no noise.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from voltpack.perf.inference_profile import ServingProfile
from voltpack.perf.serving_capacity import MAX_BATCH, Role, kv_transfer_s

DEFAULT_PREFILL_TOKEN_BUDGET = 8192
"""Prompt tokens one prefill batch takes at most (a longer prompt runs alone)."""
SEGMENT_MAX_STEPS = 256
"""Decode steps computed ahead at once; a longer run is split (only a speed setting)."""
ROUTE_SCALE = 1 << 32
"""Weight of outstanding requests over queued prompt tokens in a replica's routing key."""

_IDLE, _WAKING, _PREFILL, _DECODE, _CHUNKS, _MIXED = range(6)
"""Phases: idle, woken for a boundary, prefill batch, decode segment, segment of chunked
iterations, one mixed iteration that finishes a prompt."""
_KV_ARRIVAL, _BOUNDARY = 0, 1
"""Event priorities at equal times: KV caches arrive before a boundary decides."""


@dataclass(frozen=True)
class PoolSpec:
    """One replica group as the engine sees it."""

    profile: ServingProfile
    role: Role
    replicas: int
    max_batch: int = MAX_BATCH
    """Most sequences running at once (and prompts in one prefill batch)."""
    prefill_chunk_tokens: int | None = None
    """Unified replicas: prompt tokens per iteration (chunked prefill); None = prefill priority.
    Ignored for other roles."""


@dataclass(frozen=True)
class RequestPlan:
    """Requests in arrival order with the pools routing chose (-1: not served)."""

    arrival_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    front_pool: NDArray[np.int64]
    """Unified or prefill pool of each request, -1 for a request that is not served."""
    decode_pool: NDArray[np.int64]
    """Decode pool of each request whose front pool is a prefill pool, else -1."""
    front_alternatives: Sequence[tuple[int, ...]] | None = None
    """Per request, other pools of its front pool's role that may take it instead (None or
    empty: only its front pool); see `ServingEngine.run`."""
    decode_alternatives: Sequence[tuple[int, ...]] | None = None
    """Per request via a prefill pool, other decode pools that may take it instead (None or
    empty: only its decode pool); see `ServingEngine.decode_target`."""


@dataclass(frozen=True)
class ReplicaUsage:
    """What one replica did."""

    pool: int
    prefill_busy_s: float
    decode_busy_s: float
    requests: int
    """Requests that started here (unified, prefill) or decoded here (decode)."""


@dataclass(frozen=True)
class EngineOutcome:
    """First- and last-token times per request (NaN when not served) and replica usage."""

    first_token_s: NDArray[np.float64]
    last_token_s: NDArray[np.float64]
    replicas: tuple[ReplicaUsage, ...]


class _Pool:
    """A group's replicas and the router's key of each (least key wins, lowest slot on ties)."""

    def __init__(self, engine: ServingEngine, index: int, spec: PoolSpec) -> None:
        self.index = index
        self.spec = spec
        self.keys = np.zeros(spec.replicas, dtype=np.int64)
        self.token_s = spec.profile.prefill_token_s
        """Marginal prefill time of one prompt token: queued tokens x this = the wait."""
        self.chunk_alone_s: dict[int, float] = {}
        self.replicas = [_Replica(engine, self, slot) for slot in range(spec.replicas)]

    def pick(self) -> _Replica:
        return self.replicas[int(np.argmin(self.keys))]

    def wait_s(self, replica: _Replica, request: int) -> float:
        """The router's estimate of how long `request` would wait on `replica`: its queued
        prompt tokens' prefill; infinite when the request's KV cache cannot fit there or the
        replica already holds `max_batch` requests."""
        engine = replica.engine
        need = engine.prompt[request]
        if self.spec.role != "prefill":
            need += engine.output[request]
            if replica.outstanding >= replica.max_batch:
                return float("inf")
        if need > replica.kv_capacity_tokens:
            return float("inf")
        return replica.queued_prompt_tokens * self.token_s

    def chunk_alone_step_s(self, tokens: int) -> float:
        """Time of an iteration that only prefills `tokens` prompt tokens (memoised)."""
        step_s = self.chunk_alone_s.get(tokens)
        if step_s is None:
            zero = np.zeros(1)
            step_s = float(self.spec.profile.mixed_step_s(zero, zero, np.array([tokens]))[0])
            self.chunk_alone_s[tokens] = step_s
        return step_s


class _Replica:
    __slots__ = (
        "batch",
        "batch_start_s",
        "chunk_tokens",
        "context_tokens",
        "decode_busy_s",
        "engine",
        "iteration_tokens",
        "kv_capacity_tokens",
        "kv_used_tokens",
        "link_bytes_per_s",
        "link_free_s",
        "max_batch",
        "outstanding",
        "partial",
        "partial_left",
        "phase",
        "pool",
        "prefill_busy_s",
        "prefill_token_s",
        "profile",
        "queued_prompt_tokens",
        "requests",
        "role",
        "running",
        "segment_chunk",
        "segment_ends_s",
        "segment_start_s",
        "segment_steps",
        "slot",
        "step_count",
        "version",
        "waiting",
    )

    def __init__(self, engine: ServingEngine, pool: _Pool, slot: int) -> None:
        self.engine = engine
        self.pool = pool
        self.slot = slot
        self.profile = pool.spec.profile
        self.role = pool.spec.role
        self.max_batch = pool.spec.max_batch
        chunk = pool.spec.prefill_chunk_tokens if self.role == "unified" else None
        self.chunk_tokens = chunk or 0  # prompt tokens per iteration, 0: prefill priority
        self.prefill_token_s = self.profile.prefill_token_s if chunk else 0.0
        self.partial = -1  # chunked prefill: the admitted prompt begun but not finished
        self.partial_left = 0  # its prompt tokens not yet prefilled
        self.iteration_tokens = 0
        self.kv_capacity_tokens = self.profile.kv_capacity_tokens
        self.link_bytes_per_s = engine.link_bytes_per_s_per_gpu * self.profile.gpus
        self.link_free_s = 0.0
        self.waiting: deque[int] = deque()
        self.queued_prompt_tokens = 0
        self.outstanding = 0
        self.kv_used_tokens = 0
        self.running: list[tuple[int, int]] = []  # heap: (step count when done, request)
        self.context_tokens = 0
        self.step_count = 0
        self.phase = _IDLE
        self.version = 0
        self.batch: list[int] = []
        self.batch_start_s = 0.0
        self.segment_start_s = 0.0
        self.segment_ends_s: NDArray[np.float64] = np.empty(0)
        self.segment_steps = 0
        self.segment_chunk = 0
        self.prefill_busy_s = 0.0
        self.decode_busy_s = 0.0
        self.requests = 0

    # routing and arrivals

    def update_key(self) -> None:
        """Prefill replicas: prompt tokens not yet prefilled. Others: outstanding requests
        (queued, prefilling, running, KV in flight), then prompt tokens not yet prefilled."""
        if self.role == "prefill":
            key = self.queued_prompt_tokens
        else:
            key = self.outstanding * ROUTE_SCALE + self.queued_prompt_tokens
        self.pool.keys[self.slot] = key

    def reserve(self) -> None:
        """A request is now bound for this replica (counted before its KV cache arrives)."""
        self.outstanding += 1
        self.requests += 1
        self.update_key()

    def accept(self, request: int, now_s: float) -> None:
        """A prompt (unified, prefill) or a KV cache (decode) arrives."""
        self.waiting.append(request)
        if self.role != "decode":
            self.queued_prompt_tokens += self.engine.prompt[request]
            self.outstanding += 1
            self.requests += 1
            self.update_key()
        if self.phase == _IDLE:
            self.phase = _WAKING
            self.engine.push(now_s, _BOUNDARY, self, self.version)
        elif self.phase == _DECODE and self._head_fits():
            self._cut_segment(now_s)

    def _head_fits(self, starting: int = 0) -> bool:
        """Whether the head of the queue can start beside the running sequences and
        `starting` other admitted sequences that do not run yet (KV for the final length)."""
        head = self.waiting[0]
        need = self.engine.prompt[head] + self.engine.output[head]
        return (
            len(self.running) + starting < self.max_batch
            and self.kv_used_tokens + need <= self.kv_capacity_tokens
        )

    # iterations

    def on_boundary(self, now_s: float, version: int) -> None:
        """An iteration ends (or an idle replica wakes): account for it, then start the next."""
        if version != self.version:
            return
        if self.phase == _PREFILL:
            self._finish_prefill(now_s)
        elif self.phase in (_DECODE, _CHUNKS):
            self._finish_segment(now_s)
        elif self.phase == _MIXED:
            self._finish_mixed(now_s)
        if self.role == "decode":
            self._join_arrived()
        elif self.chunk_tokens:
            if self._start_chunked(now_s):
                return
        elif self._start_prefill(now_s):
            return
        if self.running:
            steps = min(self.running[0][0] - self.step_count, SEGMENT_MAX_STEPS)
            self._start_segment(now_s, steps, 0)
        else:
            self.phase = _IDLE

    def _start_prefill(self, now_s: float) -> bool:
        engine = self.engine
        budget = engine.prefill_token_budget
        unified = self.role == "unified"
        batch: list[int] = []
        tokens = 0
        while self.waiting:
            head = self.waiting[0]
            prompt = engine.prompt[head]
            need = prompt + engine.output[head] if unified else prompt
            if batch and tokens + prompt > budget:
                break
            if self.kv_used_tokens + need > self.kv_capacity_tokens:
                break
            if len(batch) >= self.max_batch or (
                unified and len(self.running) + len(batch) >= self.max_batch
            ):
                break
            self.waiting.popleft()
            batch.append(head)
            tokens += prompt
            self.kv_used_tokens += need
        if not batch:
            return False
        self.batch = batch
        self.batch_start_s = now_s
        self.phase = _PREFILL
        self.version += 1
        duration_s = self.profile.prefill_s(engine.prompt[r] for r in batch)
        engine.push(now_s + duration_s, _BOUNDARY, self, self.version)
        return True

    def _finish_prefill(self, now_s: float) -> None:
        engine = self.engine
        self.prefill_busy_s += now_s - self.batch_start_s
        for request in self.batch:
            engine.first_token_s[request] = now_s
            prompt = engine.prompt[request]
            output = engine.output[request]
            self.queued_prompt_tokens -= prompt
            if self.role == "unified":
                if output == 1:
                    self._leave(request, now_s)
                else:
                    heapq.heappush(self.running, (self.step_count + output - 1, request))
                    self.context_tokens += prompt + 1
                continue
            self.kv_used_tokens -= prompt
            self.outstanding -= 1
            if output == 1:
                engine.last_token_s[request] = now_s
            else:
                self._send_kv(request, now_s)
        self.batch = []
        self.update_key()

    def _send_kv(self, request: int, now_s: float) -> None:
        engine = self.engine
        start_s = max(self.link_free_s, now_s)
        transfer_s = kv_transfer_s(self.profile, engine.prompt[request], self.link_bytes_per_s)
        self.link_free_s = start_s + transfer_s
        target = engine.decode_target(request)
        target.reserve()
        engine.push(self.link_free_s, _KV_ARRIVAL, target, request)

    def _join_arrived(self) -> None:
        engine = self.engine
        while self.waiting and self._head_fits():
            request = self.waiting.popleft()
            prompt = engine.prompt[request]
            output = engine.output[request]
            self.kv_used_tokens += prompt + output
            heapq.heappush(self.running, (self.step_count + output - 1, request))
            self.context_tokens += prompt + 1

    def _start_chunked(self, now_s: float) -> bool:
        """Chunked prefill: start the next iteration(s) if any prompt tokens can be prefilled."""
        engine = self.engine
        chunk = self.chunk_tokens
        if self.partial < 0:
            if not (self.waiting and self._head_fits()):
                return False
            head = self.waiting.popleft()
            self.kv_used_tokens += engine.prompt[head] + engine.output[head]
            self.partial = head
            self.partial_left = engine.prompt[head]
        if self.partial_left > chunk:
            # iterations that give the whole chunk to this prompt without finishing it
            steps = (self.partial_left - 1) // chunk
            if self.running:
                steps = min(steps, self.running[0][0] - self.step_count)
            self._start_segment(now_s, min(steps, SEGMENT_MAX_STEPS), chunk)
            return True
        # one iteration that finishes the prompt and fills the chunk from the queue
        batch = [self.partial]
        tokens = self.partial_left
        self.partial = -1
        while tokens < chunk and self.waiting and self._head_fits(len(batch)):
            head = self.waiting.popleft()
            prompt = engine.prompt[head]
            self.kv_used_tokens += prompt + engine.output[head]
            take = min(prompt, chunk - tokens)
            tokens += take
            if take == prompt:
                batch.append(head)
            else:
                self.partial = head
                self.partial_left = prompt - take
        self.batch = batch
        self.batch_start_s = now_s
        self.iteration_tokens = tokens
        self.phase = _MIXED
        self.version += 1
        if self.running:
            duration_s = float(
                self.profile.mixed_step_s(
                    np.array([float(len(self.running))]),
                    np.array([float(self.context_tokens)]),
                    np.array([float(tokens)]),
                )[0]
            )
        else:
            duration_s = self.pool.chunk_alone_step_s(tokens)
        engine.push(now_s + duration_s, _BOUNDARY, self, self.version)
        return True

    def _finish_mixed(self, now_s: float) -> None:
        engine = self.engine
        self._count_busy(now_s - self.batch_start_s, self.iteration_tokens, 1)
        self.queued_prompt_tokens -= self.iteration_tokens
        if self.running:
            self.step_count += 1
            self.context_tokens += len(self.running)
            while self.running and self.running[0][0] <= self.step_count:
                _, request = heapq.heappop(self.running)
                self._leave(request, now_s)
        for request in self.batch:
            engine.first_token_s[request] = now_s
            output = engine.output[request]
            if output == 1:
                self._leave(request, now_s)
            else:
                heapq.heappush(self.running, (self.step_count + output - 1, request))
                self.context_tokens += engine.prompt[request] + 1
        self.batch = []
        self.update_key()

    def _count_busy(self, busy_s: float, chunk: int, steps: int) -> None:
        """Split `steps` iterations' time: the chunk's share to prefill, the rest to decode."""
        if not chunk:
            self.decode_busy_s += busy_s
        elif not self.running:
            self.prefill_busy_s += busy_s
        else:
            prefill_s = min(busy_s, chunk * steps * self.prefill_token_s)
            self.prefill_busy_s += prefill_s
            self.decode_busy_s += busy_s - prefill_s

    def _start_segment(self, now_s: float, steps: int, chunk: int) -> None:
        """Run `steps` iterations with the running batch fixed, each also prefilling `chunk`
        prompt tokens of the prompt in progress (0: plain decode steps)."""
        batch = len(self.running)
        context = self.context_tokens + batch * np.arange(steps, dtype=np.float64)
        if chunk and not batch:
            step_s = np.full(steps, self.pool.chunk_alone_step_s(chunk))
        elif chunk:
            step_s = self.profile.mixed_step_s(
                np.full(steps, float(batch)), context, np.full(steps, float(chunk))
            )
        else:
            step_s = self.profile.decode_time_s(np.full(steps, float(batch)), context)
        self.segment_ends_s = now_s + np.cumsum(step_s)
        self.segment_start_s = now_s
        self.segment_steps = steps
        self.segment_chunk = chunk
        self.phase = _CHUNKS if chunk else _DECODE
        self.version += 1
        self.engine.push(float(self.segment_ends_s[-1]), _BOUNDARY, self, self.version)

    def _cut_segment(self, now_s: float) -> None:
        """End the decode run at the first step boundary at or after `now_s`."""
        step = int(np.searchsorted(self.segment_ends_s, now_s, side="left"))
        if step + 1 < self.segment_steps:
            self.segment_steps = step + 1
            self.version += 1
            self.engine.push(float(self.segment_ends_s[step]), _BOUNDARY, self, self.version)

    def _finish_segment(self, now_s: float) -> None:
        chunk = self.segment_chunk
        self._count_busy(now_s - self.segment_start_s, chunk, self.segment_steps)
        if chunk:
            self.partial_left -= chunk * self.segment_steps
            self.queued_prompt_tokens -= chunk * self.segment_steps
        self.step_count += self.segment_steps
        self.context_tokens += len(self.running) * self.segment_steps
        while self.running and self.running[0][0] <= self.step_count:
            _, request = heapq.heappop(self.running)
            self._leave(request, now_s)
        self.update_key()

    def _leave(self, request: int, now_s: float) -> None:
        """The request's last token leaves; its KV cache is freed."""
        footprint = self.engine.prompt[request] + self.engine.output[request]
        self.engine.last_token_s[request] = now_s
        self.context_tokens -= footprint if self.engine.output[request] > 1 else 0
        self.kv_used_tokens -= footprint
        self.outstanding -= 1


class ServingEngine:
    """Replays routed requests through the pools' replicas, one event at a time."""

    def __init__(
        self,
        pools: Sequence[PoolSpec],
        requests: RequestPlan,
        prefill_token_budget: int = DEFAULT_PREFILL_TOKEN_BUDGET,
        link_bytes_per_s_per_gpu: float = 50e9,
    ) -> None:
        self.prefill_token_budget = prefill_token_budget
        self.link_bytes_per_s_per_gpu = link_bytes_per_s_per_gpu
        self.requests = requests
        self.prompt: list[int] = requests.prompt_tokens.tolist()
        self.output: list[int] = requests.output_tokens.tolist()
        self.decode_pool: list[int] = requests.decode_pool.tolist()
        count = len(self.prompt)
        self.first_token_s: list[float] = [float("nan")] * count
        self.last_token_s: list[float] = [float("nan")] * count
        self._heap: list[tuple[float, int, int, _Replica, int]] = []
        self._sequence = 0
        self.alternatives = requests.front_alternatives
        self.decode_alternatives = requests.decode_alternatives
        self.pools = [_Pool(self, index, spec) for index, spec in enumerate(pools)]

    def push(self, time_s: float, priority: int, replica: _Replica, payload: int) -> None:
        """Schedule a KV arrival (payload: request) or a boundary (payload: version)."""
        self._sequence += 1
        heapq.heappush(self._heap, (time_s, priority, self._sequence, replica, payload))

    def decode_target(self, request: int) -> _Replica:
        """The decode replica a prefilled request's KV cache goes to: the least-loaded one of
        its decode pool, unless a replica of one of its decode alternatives is less full
        (outstanding sequences over its batch cap, among replicas whose KV cache can hold
        the request; ties keep the planned pool): a router that sends decode work where a
        batch has room, not only where the plan expected it."""
        planned = self.pools[self.decode_pool[request]]
        chosen = planned.pick()
        alternatives = self.decode_alternatives[request] if self.decode_alternatives else ()
        if not alternatives:
            return chosen
        need = self.prompt[request] + self.output[request]
        best = _fullness(chosen, need)
        for other in alternatives:
            candidate = self.pools[other].pick()
            fullness = _fullness(candidate, need)
            if fullness < best:
                chosen, best = candidate, fullness
        return chosen

    def route(self, request: int, pool: int) -> _Replica:
        """The least-loaded replica of `pool`, unless a replica of one of the request's front
        alternatives would start it sooner (`_Pool.wait_s`; ties keep the planned pool)."""
        chosen = self.pools[pool].pick()
        alternatives = self.alternatives[request] if self.alternatives is not None else ()
        if not alternatives:
            return chosen
        best_s = self.pools[pool].wait_s(chosen, request)
        for other in alternatives:
            candidate = self.pools[other].pick()
            wait_s = self.pools[other].wait_s(candidate, request)
            if wait_s < best_s:
                chosen, best_s = candidate, wait_s
        return chosen

    def run(self) -> EngineOutcome:
        """Route each request on arrival (`route`) and run to the end, i.e. until every
        served request has left."""
        arrival_s: list[float] = self.requests.arrival_s.tolist()
        front: list[int] = self.requests.front_pool.tolist()
        heap = self._heap
        pools = self.pools
        index = 0
        count = len(arrival_s)
        while True:
            if index < count and (not heap or arrival_s[index] <= heap[0][0]):
                if front[index] >= 0:
                    self.route(index, front[index]).accept(index, arrival_s[index])
                index += 1
                continue
            if not heap:
                break
            time_s, priority, _, replica, payload = heapq.heappop(heap)
            if priority == _KV_ARRIVAL:
                replica.accept(payload, time_s)
            else:
                replica.on_boundary(time_s, payload)
        usage = tuple(
            ReplicaUsage(pool.index, r.prefill_busy_s, r.decode_busy_s, r.requests)
            for pool in pools
            for r in pool.replicas
        )
        return EngineOutcome(
            first_token_s=np.asarray(self.first_token_s, dtype=np.float64),
            last_token_s=np.asarray(self.last_token_s, dtype=np.float64),
            replicas=usage,
        )


def _fullness(replica: _Replica, need_tokens: int) -> float:
    """How full a decode replica is for a request needing `need_tokens` of KV cache: its
    outstanding sequences over its batch cap; infinite when the request cannot fit at all."""
    if need_tokens > replica.kv_capacity_tokens:
        return float("inf")
    return replica.outstanding / replica.max_batch
