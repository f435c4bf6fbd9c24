"""The compiled parts of the select stage give exactly what their pure-Python references give."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxbudget import admission, excerpts, extractive, hops
from ctxbudget.extractive import SentenceAnalysis, analyse, query_stems
from ctxbudget.native import NATIVE
from ctxbudget.text import content_terms

pytestmark = pytest.mark.skipif(
    NATIVE is None, reason="the compiled path is off or absent (tests/e2e checks it is built)"
)

#: A small vocabulary, so that sentences share stems with the query and with each other,
#: scores tie often and links are found; with accented words, since links and sentences
#: are compared as text of any script.
_WORDS = st.sampled_from(
    ["river", "mill", "north", "old", "road", "east", "gotha", "team", "zürich", "łódź", "a", "b"]
)
#: Enough distinct stems that the query can hold more than one 64-bit row of them.
_MANY = [f"w{k}" for k in range(80)]
_STEMS = st.sampled_from(["river", "mill", "north", "old", "road", "gotha", "zürich", *_MANY])


@st.composite
def _analyses(draw: st.DrawFn) -> SentenceAnalysis:
    n = draw(st.integers(0, 9))
    stems = tuple(frozenset(draw(st.lists(_STEMS, max_size=8))) for _ in range(n))
    protected = tuple(draw(st.booleans()) for _ in range(n))
    padded = tuple(" " + " ".join(draw(st.lists(_WORDS, max_size=8))) + " " for _ in range(n))
    bounds = tuple((k, k + 1) for k in range(n))
    return SentenceAnalysis(bounds=bounds, stems=stems, protected=protected, padded=padded)


_QSTEMS = st.frozensets(_STEMS, max_size=70)
_LINKS = st.lists(st.lists(_WORDS, min_size=1, max_size=2).map(lambda w: f" {' '.join(w)} "))


def _both(
    analysis: SentenceAnalysis, qstems: frozenset[str], lead: bool, links: list[str]
) -> tuple[tuple[list[int], list[int]], tuple[list[int], list[int]]]:
    got = extractive.rank_stemmed(analysis, qstems, lead=lead, links=links)
    want = extractive.rank_stemmed_reference(analysis, qstems, lead=lead, links=links)
    return got, want


@settings(max_examples=1500, deadline=None)
@given(_analyses(), _QSTEMS, st.booleans(), _LINKS)
def test_ranking_matches_the_reference(
    analysis: SentenceAnalysis, qstems: frozenset[str], lead: bool, links: list[str]
) -> None:
    """Overlaps and order agree on any analysis, query stems (over 64 too), lead and links."""
    got, want = _both(analysis, qstems, lead, links)
    assert got == want


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(["The", "river", "mill", "ran", "north", "in", "1990", ".", "!"]))
    .map(" ".join)
    .filter(bool),
    st.lists(st.sampled_from(["river", "mill", "north", "old", "mills", "rivers"])).map(" ".join),
    st.booleans(),
)
@example("The river ran north. The mill ran in 1990. North!", "river mill north", True)
def test_ranking_of_analysed_text_matches_the_reference(text: str, query: str, lead: bool) -> None:
    """On the analyses the stages make (real sentence splitting and stems), both agree."""
    qstems = query_stems(content_terms(query))
    got, want = _both(analyse(text), qstems, lead, [" mill ", " north "])
    assert got == want


def test_text_that_is_no_valid_utf8_goes_to_the_reference() -> None:
    """A lone surrogate in a link or a sentence is left to the reference, which ranks it."""
    analysis = SentenceAnalysis(
        bounds=((0, 1), (1, 2)),
        stems=(frozenset({"river"}), frozenset()),
        protected=(False, True),
        padded=(" river \ud800 ", " mill "),
    )
    ranker = extractive.RANKER
    assert ranker is not None
    assert (
        ranker.rank(analysis.stems, analysis.protected, analysis.padded, frozenset(), True, [" x "])
        is None
    )
    got, want = _both(analysis, frozenset({"river"}), True, [" \ud800 "])
    assert got == want


@settings(max_examples=600, deadline=None)
@given(
    st.lists(
        st.frozensets(st.integers(0, 40) | st.integers(2**63, 2**64 - 1), max_size=30),
        max_size=8,
    )
)
def test_shared_shingles_match_the_reference(sets: list[frozenset[int]]) -> None:
    """The compiled table counts shared shingles as ``len(a & b)`` does, 64-bit ids too."""
    assert admission.shared_shingles(sets) == admission.shared_shingles_reference(sets)


def test_shared_shingles_leave_other_ids_to_the_loop() -> None:
    """Ids that are no 64-bit unsigned integers give no table (the loop intersects)."""
    assert admission.shared_shingles([frozenset({1, 2}), frozenset({-1})]) is None
    assert admission.shared_shingles([frozenset({2**64})]) is None


_KEYS = st.lists(
    st.lists(_WORDS, min_size=1, max_size=2).map(lambda w: f" {' '.join(w)} "), max_size=4
)


@settings(max_examples=800, deadline=None)
@given(_analyses(), _QSTEMS, _KEYS)
def test_hop_sentences_match_the_reference(
    analysis: SentenceAnalysis, qstems: frozenset[str], keys: list[str]
) -> None:
    """The compiled scan keeps the sentences the reference keeps, in order."""
    ranker = extractive.RANKER
    assert ranker is not None
    got = ranker.hop_sentences(analysis.stems, analysis.padded, qstems, keys)
    assert got == hops.hop_sentences_reference(analysis, keys, qstems)


@settings(max_examples=800, deadline=None)
@given(_analyses(), _QSTEMS, _KEYS.map(lambda k: k[0] if k else " river "))
def test_names_beside_query_match_the_reference(
    analysis: SentenceAnalysis, qstems: frozenset[str], key: str
) -> None:
    """The compiled scan finds a name beside a query stem where the reference does."""
    ranker = extractive.RANKER
    assert ranker is not None
    got = ranker.names_beside_query(analysis.stems, analysis.padded, qstems, key)
    assert got == hops.names_beside_query_reference(analysis, key, qstems)


#: Text made of what the rough sentence ends look at: the three stops, closing quotes and
#: brackets, every kind of space Python's ``\s`` knows (and a few it does not), line breaks.
_ROUGH_PIECES = st.sampled_from(
    [
        ".", "!", "?", '"', "'", ")", "]", "(", "[", " ", "\t", "\n", "\r", "\x0b", "\x0c",
        "\x1c", "\x1f", "\x85", "\xa0", "\u1680", "\u2003", "\u2028", "\u202f", "\u3000",
        "\u180e", "\u200b", "\ufeff", "a", "Dr", "é", "東",
    ]
)  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(st.lists(_ROUGH_PIECES, max_size=30).map("".join) | st.text(max_size=80))
@example('He left.\nShe stayed." Then?) x.\n\nEnd')
def test_rough_sentence_count_matches_the_reference(sample: str) -> None:
    """The compiled scan counts the regex's rough sentence ends, on any text."""
    assert excerpts.rough_sentence_count(sample) == excerpts.rough_sentence_count_reference(sample)


def test_rough_sentence_ends_read_every_space_as_python_does() -> None:
    """After a stop and a quote, every code point ends a sentence exactly where ``\\s`` does."""
    for c in map(chr, range(0x110000)):
        if 0xD800 <= ord(c) <= 0xDFFF:
            continue
        sample = f'x."{c}y'
        assert excerpts.rough_sentence_count(sample) == excerpts.rough_sentence_count_reference(
            sample
        ), hex(ord(c))


def test_rough_sentence_count_leaves_lone_surrogates_to_the_regex() -> None:
    """Text that is no valid UTF-8 is counted by the regex."""
    assert excerpts.rough_sentence_count("a.\ud800 b. c") == 2
