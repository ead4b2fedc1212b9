"""Mélange's workload regimes (Arena-like, PubMed-like, mixed) on the Azure traces' arrivals."""

from __future__ import annotations

import numpy as np
import pytest

from voltpack.model import InvalidRequestError
from voltpack.sim.traces.azure_llm import (
    CODE_TRACE,
    CONVERSATION_TRACE,
    LlmRequests,
    azure_llm_dir,
    load_azure_llm_trace,
)
from voltpack.sim.traces.melange_workloads import (
    PUBMED_LENGTHS,
    SHORT_CONTEXT_MAX_PROMPT_TOKENS,
    DocumentLengths,
    arena_like,
    mixed,
    pubmed_like,
    regime_workload,
)


@pytest.fixture(scope="module")
def conversation() -> LlmRequests:
    return load_azure_llm_trace(azure_llm_dir() / CONVERSATION_TRACE)


def test_arena_like_keeps_the_short_requests_at_their_own_arrival_times(
    conversation: LlmRequests,
) -> None:
    arena = arena_like(conversation)
    short = conversation.prompt_tokens <= SHORT_CONTEXT_MAX_PROMPT_TOKENS
    assert arena.arrival_s.size == int(short.sum()) == 9838
    assert arena.prompt_tokens.max() <= SHORT_CONTEXT_MAX_PROMPT_TOKENS
    np.testing.assert_array_equal(arena.arrival_s, conversation.arrival_s[short])
    np.testing.assert_array_equal(arena.output_tokens, conversation.output_tokens[short])
    with pytest.raises(InvalidRequestError, match="max_prompt_tokens"):
        arena_like(conversation, max_prompt_tokens=0)


def test_pubmed_lengths_match_the_dataset_means_within_the_context_window() -> None:
    prompts, outputs = PUBMED_LENGTHS.sizes(50_000, np.random.default_rng(1))
    assert (prompts + outputs <= PUBMED_LENGTHS.context_tokens).all()
    assert outputs.min() >= PUBMED_LENGTHS.min_output_tokens
    # outputs are rarely truncated: their mean is the abstract's 215 words x 1.3 tokens
    assert outputs.mean() == pytest.approx(215 * 1.3, rel=0.02)
    # prompts are long (document summarization) but truncated to the context window
    assert 2800 < prompts.mean() < 3043 * 1.3
    unbounded = DocumentLengths(3043, 215, 1.3, 0.5, 0.4, context_tokens=10**9)
    long_prompts, _ = unbounded.sizes(50_000, np.random.default_rng(1))
    assert long_prompts.mean() == pytest.approx(3043 * 1.3, rel=0.02)


def test_pubmed_like_uses_the_arrivals_given_and_is_deterministic() -> None:
    code = load_azure_llm_trace(azure_llm_dir() / CODE_TRACE)
    one, two = pubmed_like(code, seed=7), pubmed_like(code, seed=7)
    np.testing.assert_array_equal(one.arrival_s, code.arrival_s)
    np.testing.assert_array_equal(one.prompt_tokens, two.prompt_tokens)
    other = pubmed_like(code, seed=8)
    assert not np.array_equal(one.prompt_tokens, other.prompt_tokens)
    assert one.prompt_tokens.mean() > 5 * code.output_tokens.mean()


def test_mixed_is_an_80_20_blend_at_the_conversation_arrivals(conversation: LlmRequests) -> None:
    blend = mixed(conversation, seed=0)
    np.testing.assert_array_equal(blend.arrival_s, conversation.arrival_s)
    long = blend.prompt_tokens > SHORT_CONTEXT_MAX_PROMPT_TOKENS
    # documents shorter than the cut count as short here, so slightly under 20% are long
    assert 0.17 < long.mean() < 0.21
    arena = arena_like(conversation)
    short_sizes = set(zip(arena.prompt_tokens, arena.output_tokens, strict=True))
    drawn = zip(blend.prompt_tokens[~long], blend.output_tokens[~long], strict=True)
    assert sum(pair in short_sizes for pair in drawn) / (~long).sum() > 0.98
    np.testing.assert_array_equal(mixed(conversation, 0).prompt_tokens, blend.prompt_tokens)
    with pytest.raises(InvalidRequestError, match="long_share"):
        mixed(conversation, 0, long_share=1.5)


def test_regime_workload_names() -> None:
    assert regime_workload("arena").arrival_s.size == 9838
    with pytest.raises(InvalidRequestError, match="arena, pubmed, mixed"):
        regime_workload("sharegpt")
