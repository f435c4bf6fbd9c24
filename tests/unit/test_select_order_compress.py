"""Admission, ordering and compression."""

from __future__ import annotations

import pytest

from ctxbudget.extractive import ExtractiveCompressor
from ctxbudget.order import edges
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Piece
from ctxbudget.stages.select import comparison_options
from ctxbudget.testing import batch, candidate
from ctxbudget.tokens import TiktokenCounter


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (9, [1, 3, 5, 7, 9, 8, 6, 4, 2]),
        (10, [1, 3, 5, 7, 9, 10, 8, 6, 4, 2]),
        (1, [1]),
        (2, [1, 2]),
    ],
)
def test_edges_puts_the_strongest_at_both_ends(n: int, expected: list[int]) -> None:
    """Lost in the middle: rank 1 first, rank 2 last, both parities."""
    assert edges(list(range(1, n + 1))) == expected


def test_comparison_options_drop_the_shared_words() -> None:
    """'Basic plan vs Pro plan' compares Basic and Pro, not plans."""
    assert comparison_options("Compare the Basic plan vs the Pro plan") == [
        frozenset({"basic"}),
        frozenset({"pro"}),
    ]
    assert comparison_options("difference between postgres and mysql") == [
        frozenset({"postgres"}),
        frozenset({"mysql"}),
    ]
    assert comparison_options("what is postgres") == []


def test_a_comparison_gets_a_passage_for_each_option(pipeline: Pipeline) -> None:
    """The weaker-scored option still gets its passage."""
    b = batch(
        [
            candidate(
                "basic1", "The Basic plan allows 60 requests per minute.", 9.0, source_id="kb"
            ),
            candidate(
                "basic2", "Basic plan customers get email support only.", 8.0, source_id="kb2"
            ),
            candidate(
                "basic3", "Upgrading from the Basic plan keeps your keys.", 7.5, source_id="kb3"
            ),
            candidate("pro1", "The Pro plan allows 600 requests per minute.", 2.0, source_id="kb4"),
        ],
        query="Compare the Basic plan vs the Pro plan",
        input_limit=4096,
    )
    pack = pipeline.run(b).pack
    admitted = {c for e in pack.evidence for c in e.chunk_ids}
    assert "pro1" in admitted and pack.query_class == "comparison"


def test_a_lower_scored_passage_covering_a_missing_part_wins(pipeline: Pipeline) -> None:
    """Coverage beats a near-repeat: the second sub-question gets its passage."""
    b = batch(
        [
            candidate("a1", "Paris is the capital of France and its largest city.", 9.0),
            candidate("a2", "The capital of France is Paris, a city on the Seine.", 8.9),
            candidate("b1", "Berlin has been the capital of Germany since reunification.", 3.0),
        ],
        query="What are the capitals of France and Germany?",
        sub_questions=("capital of France", "capital of Germany"),
        class_hint="point_lookup",
    )
    pack = pipeline.run(b).pack
    admitted = [e.chunk_ids[0] for e in pack.evidence]
    assert "b1" in admitted and "a1" in admitted


def test_per_source_cap_yields_when_the_corpus_is_one_source(pipeline: Pipeline) -> None:
    """The cap is a preference: with one source, its items still fill the budget."""
    b = batch(
        [
            candidate(
                f"c{i}",
                f"Region number {i} named r{i} was affected for {i} hours.",
                10.0 - i,
                source_id="status",
            )
            for i in range(4)
        ],
        query="list all regions affected",
    )
    pack = pipeline.run(b).pack
    assert pack.query_class == "aggregation"
    assert [e.chunk_ids[0] for e in pack.evidence] != [] and len(pack.evidence) == 4
    assert "source_cap" not in pack.dropped


def test_per_source_cap_lets_other_sources_go_first(pipeline: Pipeline) -> None:
    """Items over their source's cap wait until every other source has had its turn."""
    crowd = [
        candidate(
            f"a{i}", f"Region a{i} was affected for {i} hours in March.", 10.0 - i, source_id="a"
        )
        for i in range(4)
    ]
    other = candidate("b0", "Region b0 was affected for 9 hours in March.", 1.0, source_id="b")
    b = batch([*crowd, other], query="list all regions affected")
    packed = pipeline.selector.run(pipeline.consolidator.run(pipeline.router.run(b)))
    items = packed.consolidated.items
    order = [items[a.item].chunk_ids[0] for a in sorted(packed.admitted, key=lambda a: a.rank)]
    # aggregation caps a source at one item: b0 comes before a1..a3 despite its low score
    assert order[:2] == ["a0", "b0"] and sorted(order[2:]) == ["a1", "a2", "a3"]


def test_compression_keeps_numbers_negations_and_order() -> None:
    """Query-aware extractive compression keeps source order and maps spans back."""
    text = (
        "The gateway is fast. Keys expire after 90 days. The logo is blue. "
        "Keys cannot be rotated before 2024. Our office has plants."
    )
    counter = TiktokenCounter("cl100k_base")
    comp = ExtractiveCompressor(count=counter.count)
    out = comp.compress(
        text,
        [Piece(chunk_id="c", start=0, end=len(text), at=0)],
        "when do keys expire and can they be rotated?",
        40,
    )
    assert out is not None
    assert "90 days" in out.text and "cannot be rotated" in out.text
    assert "plants" not in out.text
    assert out.text.index("90 days") < out.text.index("cannot")
    for span in out.spans:
        assert text[span.start : span.end] in out.text


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
