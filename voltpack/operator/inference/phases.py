"""Each replica's phase mix, from its vLLM token counters, for the phase-aware clocks.

The power loop locks a decode-heavy replica's GPUs at a lower clock
(`voltpack.policies.power.phase_clocks`); what it needs is the share of wall time the GPUs
spent in prefill and in decode over the last `phase_clocks.window_s`. vLLM's per-request
histograms (`vllm:request_prefill_time_seconds`, `vllm:request_decode_time_seconds`) do not
give it: requests decode together in one batch, so their decode times overlap (a batch of 16
adds 16 seconds per second) and the ratio would lean to decode by the batch size. The token
counters do: `vllm:prompt_tokens_total` and `vllm:generation_tokens_total`, with the
`vllm:num_requests_running` gauge as the batch, turned into GPU time by the serving profile
the plan uses:

- prefill seconds = prompt tokens x the profile's prefill seconds per prompt token (over the
  spec's request sizes, one prompt at a time; prefill is compute-bound, so batching does not
  overlap it);
- decode seconds = generated tokens / batch x the profile's decode step time at that batch
  (each step makes one token per running sequence).

Each share is that time over the window's wall time, the sum at most 1 (prefill first). A
counter that went down (a restarted server) starts the window again; a replica without a
window of at least half `window_s` has no mix (the power loop then sets no floor).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from voltpack.model.errors import InvalidRequestError
from voltpack.model.resources.inferenceservice import InferenceServiceSpec
from voltpack.operator.inference.vllm import RUNNING_GAUGE, family_sums, finite_counts
from voltpack.perf.inference_profile import ServingProfile

PROMPT_FAMILY = "vllm:prompt_tokens"
GENERATION_FAMILY = "vllm:generation_tokens"
MIN_WINDOW_SHARE = 0.5
"""A mix needs counters spanning at least this share of `window_s`."""


@dataclass(frozen=True)
class TokenSample:
    """One replica's token counters and running requests at one scrape."""

    prompt_tokens: float
    generation_tokens: float
    running: float


def parse_token_counters(text: str) -> TokenSample:
    """The token counters of one vLLM metrics page (every series of a family summed).
    InvalidRequestError naming what is missing or unreadable."""
    sums = family_sums(text, (PROMPT_FAMILY, GENERATION_FAMILY), (RUNNING_GAUGE,))
    for needed in (PROMPT_FAMILY, GENERATION_FAMILY):
        if needed not in sums:
            raise InvalidRequestError(f"no {needed}_total counter (is it a vLLM server?)")
    values = [sums[PROMPT_FAMILY], sums[GENERATION_FAMILY], sums.get(RUNNING_GAUGE, 0.0)]
    values = finite_counts(values, "vLLM token counters")
    return TokenSample(*values)


@dataclass(frozen=True)
class PhaseCost:
    """How a replica's tokens become GPU time at max clock (`phase_cost`)."""

    prefill_s_per_token: float
    profile: ServingProfile
    context_per_sequence: float
    """Mean tokens a decoding sequence holds (its prompt and half its output)."""

    def decode_s(self, tokens: float, batch: float) -> float:
        """Seconds to generate `tokens` in steps of `batch` sequences."""
        batch = max(1.0, batch)
        step_s = self.profile.decode_step_s(batch, batch * self.context_per_sequence)
        return tokens / batch * step_s


def phase_cost(spec: InferenceServiceSpec, profile: ServingProfile) -> PhaseCost:
    """The spec's size mix on `profile`: prefill seconds per prompt token, decode context."""
    total = sum(size.share for size in spec.request_sizes)
    seconds = tokens = context = 0.0
    for size in spec.request_sizes:
        weight = size.share / total
        seconds += weight * profile.prefill_s([size.prompt_tokens])
        tokens += weight * size.prompt_tokens
        context += weight * (size.prompt_tokens + size.output_tokens / 2)
    return PhaseCost(seconds / tokens, profile, context)


@dataclass(frozen=True)
class PhaseMix:
    """Shares of wall time in prefill and in decode, over a window ending at `at_s`."""

    prefill_share: float
    decode_share: float
    at_s: float


@dataclass
class PhaseWindow:
    """One replica's recent token samples (oldest first)."""

    samples: list[tuple[float, TokenSample]] = field(default_factory=list)

    def record(self, now_s: float, sample: TokenSample, window_s: float) -> None:
        """Add a scrape; a counter that went down or a clock that went back starts again."""
        if self.samples:
            last_s, last = self.samples[-1]
            reset = (
                sample.prompt_tokens < last.prompt_tokens
                or sample.generation_tokens < last.generation_tokens
            )
            if reset or now_s <= last_s:
                self.samples = []
        self.samples.append((now_s, sample))
        # keep the newest sample at least `window_s` old (the window's start) and all after
        older = [i for i, (t, _) in enumerate(self.samples) if t <= now_s - window_s]
        if older:
            self.samples = self.samples[older[-1] :]

    def mix(self, cost: PhaseCost, window_s: float) -> PhaseMix | None:
        """The phase mix over the samples (None: they span less than half the window)."""
        if len(self.samples) < 2:
            return None
        (start_s, first), (end_s, last) = self.samples[0], self.samples[-1]
        span_s = end_s - start_s
        if span_s < MIN_WINDOW_SHARE * window_s:
            return None
        batch = sum(s.running for _, s in self.samples[1:]) / (len(self.samples) - 1)
        prefill_s = (last.prompt_tokens - first.prompt_tokens) * cost.prefill_s_per_token
        decode_s = cost.decode_s(last.generation_tokens - first.generation_tokens, batch)
        prefill = min(1.0, prefill_s / span_s)
        decode = min(1.0 - prefill, decode_s / span_s)
        return PhaseMix(round(prefill, 4), round(decode, 4), end_s)


@dataclass
class ServicePhases:
    """The phase windows of one service's replicas (by pod uid) and when they were scraped."""

    windows: dict[str, PhaseWindow] = field(default_factory=dict)
    last_scrape_s: float | None = None
    failures: list[str] = field(default_factory=list)

    def due(self, now_s: float, step_s: float) -> bool:
        """Whether `step_s` passed since the last scrape (or the clock went back)."""
        last = self.last_scrape_s
        return last is None or now_s < last or now_s - last >= step_s

    def record(
        self, now_s: float, results: dict[str, TokenSample | str], live: Iterable[str],
        window_s: float,
    ) -> None:  # fmt: skip
        """One scrape's samples by pod uid (a string: why that pod did not answer; its
        window is dropped, so a stale mix is never published)."""
        self.failures = []
        for uid, result in results.items():
            if isinstance(result, str):
                self.failures.append(result)
                self.windows.pop(uid, None)
                continue
            self.windows.setdefault(uid, PhaseWindow()).record(now_s, result, window_s)
        keep = set(live)
        self.windows = {uid: w for uid, w in self.windows.items() if uid in keep}
        self.last_scrape_s = now_s
