"""The compression stage (ctxbudget.stages.compress): exact token counts, compression as the
known fallback, and the answerability a pack reports."""

from __future__ import annotations

from ctxbudget.pipeline import Pipeline
from ctxbudget.testing import batch, candidate
from ctxbudget.tokens import TiktokenCounter


def test_an_item_too_big_for_the_budget_is_compressed_not_cut(pipeline: Pipeline) -> None:
    """Compression is the known fallback: sentences kept whole, item marked compressed."""
    long = " ".join(f"Fact {i}: refunds take {i} days in region {i}." for i in range(60))
    b = batch(
        [candidate("big", "Refunds are available within 14 days. " + long, 5.0)],
        query="How many days for refunds?",
        input_limit=1000,
        class_hint="point_lookup",
    )
    pack = pipeline.run(b).pack
    assert pack.evidence and pack.evidence[0].compressed
    assert pack.evidence_tokens <= pack.budget.evidence_budget
    assert "Refunds are available within 14 days." in pack.evidence[0].text


def test_no_room_at_all_is_insufficient_budget(pipeline: Pipeline) -> None:
    """A budget at or below zero gives an empty pack, not a crash."""
    pack = pipeline.run(batch([candidate("a", "text")], input_limit=50)).pack
    assert pack.evidence == () and pack.answerability == "insufficient_budget"
    assert pack.evidence_tokens == 0 and pack.rendered == ""


def test_no_candidates_is_no_evidence(pipeline: Pipeline) -> None:
    """Nothing retrieved is a retrieval miss, and the pack says so."""
    pack = pipeline.run(batch([])).pack
    assert pack.answerability == "no_evidence"


def test_pack_tokens_are_exact(pipeline: Pipeline) -> None:
    """evidence_tokens is the exact count of `rendered`; item tokens add up to it."""
    b = batch(
        [
            candidate(f"c{i}", f"Passage {i} says the answer is {i * 7} units. " * 3, 5.0 - i)
            for i in range(6)
        ],
        input_limit=2000,
    )
    pack = pipeline.run(b).pack
    counter = TiktokenCounter("cl100k_base")
    assert pack.evidence_tokens == counter.count(pack.rendered)
    assert pack.evidence_tokens <= pack.budget.evidence_budget
