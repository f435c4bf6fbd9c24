"""The naive baseline (:mod:`ctxbudget.testing.naive`): the budget equation, the score-order
fill that tail-drops, and what it admits that the product does not."""

from __future__ import annotations

from collections import Counter

from ctxbudget.schemas import Turn
from ctxbudget.testing.naive import (
    DEFAULT_ANSWER_RESERVE,
    SAFETY_MARGIN,
    SEPARATOR_TOKENS,
    default_counter,
    naive_assemble,
    naive_budget,
)
from ctxbudget.testing.traffic import GeneratedBatch
from tests.unit.scored_batches import scored_batch as _batch


def test_naive_budget_follows_the_budget_equation() -> None:
    """Input limit minus instructions, conversation, reserve (500 by default) and margin 64."""
    turn = Turn(role="user", text="an earlier question about retention")
    b = _batch([("x", 1.0)], input_limit=2000, conversation=(turn,))
    budget = naive_budget(b)
    conv = default_counter().count(turn.text)
    assert budget.conversation == conv
    assert budget.answer_reserve == DEFAULT_ANSWER_RESERVE
    assert budget.evidence_budget == 2000 - 100 - conv - DEFAULT_ANSWER_RESERVE - SAFETY_MARGIN
    assert naive_budget(_batch([], input_limit=2000, reserve=300)).answer_reserve == 300


def test_naive_fill_stops_at_the_first_passage_that_does_not_fit() -> None:
    """The baseline tail-drops: a small passage after a misfit is not admitted."""
    big = "word " * 200
    small = "short passage"
    cost = default_counter().count(small) + SEPARATOR_TOKENS
    limit = 100 + DEFAULT_ANSWER_RESERVE + SAFETY_MARGIN + cost + 10
    b = _batch([(small, 0.9), (big, 0.8), (small + "!", 0.7)], input_limit=limit)
    result = naive_assemble(b)
    assert result.admitted_chunk_ids == ("c0",)
    assert result.evidence_tokens == cost <= result.budget.evidence_budget


def test_naive_ties_break_by_chunk_id_descending_and_missing_scores_sort_last() -> None:
    """Equal scores must not depend on input order (the whole key sorts descending)."""
    b = _batch([("b", 0.5), ("a", 0.5), ("z", 0.9)], input_limit=10_000)
    unscored = b.candidates[0].model_copy(update={"chunk_id": "c9", "rerank_score": None})
    b = b.model_copy(update={"candidates": (*b.candidates, unscored)})
    assert naive_assemble(b).admitted_chunk_ids == ("c2", "c1", "c0", "c9")


def test_naive_admits_nothing_when_the_frame_eats_the_budget() -> None:
    """A prompt frame larger than the input limit leaves a zero budget, not a negative one."""
    result = naive_assemble(_batch([("x", 1.0)], input_limit=300))
    assert result.budget.evidence_budget == 0
    assert result.admitted_chunk_ids == ()
    assert not result.over_budget


def test_naive_never_exceeds_its_budget(generated: list[GeneratedBatch]) -> None:
    """The one property the baseline does have: the budget holds."""
    for g in generated:
        result = naive_assemble(g.batch)
        assert result.evidence_tokens == sum(result.admitted_costs)
        assert result.evidence_tokens <= result.budget.evidence_budget


def test_naive_admits_injected_and_cross_tenant_passages(
    every_case: list[GeneratedBatch],
) -> None:
    """The baseline's known flaw, which the product's gates exist to fix."""
    kinds: Counter[str] = Counter()
    for g in every_case:
        for cid in naive_assemble(g.batch).admitted_chunk_ids:
            kinds[g.truth.kind_of(cid) or "?"] += 1
    assert kinds["injected"] >= 1
    assert kinds["cross_tenant"] >= 1
    assert kinds["copy"] >= 1
