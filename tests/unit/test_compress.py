"""The compression stage (ctxbudget.stages.compress): exact token counts, compression as the
known fallback, and the answerability a pack reports."""

from __future__ import annotations

from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Admission
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


def test_over_budget_the_leftover_filler_gives_way_before_a_whole_item(pipeline: Pipeline) -> None:
    """The item compressed into the room left (basis ``leftover``) was sized from estimates;
    when the exact count is over budget it shrinks (or goes) first, before a whole admitted
    item of lower utility is dropped."""
    facts = " ".join(f"Depot {i} was built beside the river in {1900 + i}." for i in range(40))
    b = batch(
        [
            candidate("a", "The main depot opens at 7 am on weekdays and at 9 am on Sundays.", 5.0),
            candidate("b", "The north depot opens at 8 am.", 4.0),
            candidate("c", "Every depot opens at 6 am. " + facts, 3.0),
        ],
        query="When does the depot open?",
        input_limit=700,
        class_hint="point_lookup",
    )
    packed = pipeline.run(b).packed
    index = {cid: k for k, it in enumerate(packed.consolidated.items) for cid in it.chunk_ids}
    admitted = (
        Admission(
            item=index["a"], rank=0, utility=0.5, estimated_tokens=30, basis=("query_terms",)
        ),
        Admission(
            item=index["b"], rank=1, utility=0.2, estimated_tokens=15, basis=("query_terms",)
        ),
        # Estimated to fit, but its whole text is far over what the budget leaves.
        Admission(
            item=index["c"],
            rank=2,
            utility=0.9,
            estimated_tokens=60,
            compress_to=None,
            basis=("query_terms", "leftover"),
        ),
    )
    budget = packed.consolidated.routed.budget.evidence_budget
    result = pipeline.compressor.run(packed.model_copy(update={"admitted": admitted}))
    pack = result.pack
    kept = {cid for e in pack.evidence for cid in e.chunk_ids}
    assert {"a", "b"} <= kept
    assert pack.evidence_tokens <= budget
    filler = [e for e in pack.evidence if "c" in e.chunk_ids]
    assert not filler or filler[0].compressed
