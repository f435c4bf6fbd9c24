"""Query-aware extractive compression (ctxbudget.extractive)."""

from __future__ import annotations

from ctxbudget.extractive import ExtractiveCompressor, plural_stem, query_stems, stem
from ctxbudget.schemas import Piece
from ctxbudget.tokens import TiktokenCounter


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


def test_a_singular_query_word_meets_its_plural_in_a_sentence() -> None:
    """'state' in a question must reach a sentence saying 'states' (stemmed to 'stat')."""
    qstems = query_stems(frozenset({"state"}))
    assert stem("states") in qstems and stem("state") in qstems


def test_the_plural_stem_is_added_only_where_it_differs() -> None:
    """A word whose plural stems alike ('game', 'city') adds nothing, so scores are unmoved."""
    assert plural_stem("game") is None
    assert plural_stem("city") is None
    assert plural_stem("house") == "hous"
    assert query_stems(frozenset({"game", "city"})) == frozenset({"game", "city"})
