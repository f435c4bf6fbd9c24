"""The excerpt ranking picks its second sentence for what it adds to the first."""

from __future__ import annotations

from ctxbudget.extractive import (
    COVERAGE_PICKS,
    ExtractiveCompressor,
    analyse,
    query_stems,
    rank_stemmed,
)
from ctxbudget.text import content_terms

TEXT = (
    "Oettinger Rockets is a German professional basketball team from Gotha. "
    "The German basketball team Oettinger Rockets plays professional basketball in Gotha. "
    "The club is sponsored by Oettinger Brauerei. "
    "Its colours are blue and white."
)
QUERY = "Which German professional basketball team from Gotha is sponsored by a brewery?"


def _order(text: str, query: str, links: tuple[str, ...] = ()) -> list[int]:
    return rank_stemmed(analyse(text), query_stems(content_terms(query)), lead=True, links=links)[1]


def test_second_sentence_adds_to_the_first_rather_than_repeating_it() -> None:
    """A sentence saying the question again loses to one carrying an uncovered query term."""
    order = _order(TEXT, QUERY)
    assert order[0] == 0
    assert order[1] == 2


def test_a_linked_sentence_beats_a_repeat() -> None:
    """A sentence naming another passage's entity comes before one that repeats the first."""
    order = _order(TEXT, "German professional basketball team Gotha", (" oettinger brauerei ",))
    assert order[:2] == [0, 2]


def test_order_is_a_permutation_and_deterministic() -> None:
    """Every sentence appears once, and the same input gives the same order."""
    first = _order(TEXT, QUERY)
    assert sorted(first) == list(range(4))
    assert _order(TEXT, QUERY) == first


def test_without_query_terms_the_plain_order_stands() -> None:
    """With no query stems there is nothing to cover: lead, then source order."""
    assert _order(TEXT, "") == [0, 1, 2, 3]


def test_only_the_first_picks_are_reordered() -> None:
    """Past the first few picks, sentences follow their plain score."""
    assert COVERAGE_PICKS >= 2
    text = " ".join(f"Gotha team sentence number {w}." for w in ("one", "two", "three", "four"))
    text += " Gotha team basketball German professional."
    order = _order(text, QUERY)
    assert order[0] == 4
    assert sorted(order) == list(range(5))


def test_the_excerpt_keeps_the_sentence_that_adds() -> None:
    """With room for two sentences, the compressor keeps the lead and the sponsor sentence."""
    compressor = ExtractiveCompressor(count=lambda s: len(s.split()))
    out = compressor.compress(TEXT, (), QUERY, 2 + 12 + 2 + 7 + 2 + 2, lead=True)
    assert out is not None
    assert "sponsored by Oettinger Brauerei" in out.text
    assert "plays professional basketball" not in out.text
