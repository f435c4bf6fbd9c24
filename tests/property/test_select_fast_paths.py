"""Selection's and sentence analysis's shortcuts give exactly what the plain definitions give
(no timing here)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.extractive import _PROTECTED_WORDS, StemMemo, analyse, stem
from ctxbudget.text import content_terms, terms_of, words

SETTINGS = settings(max_examples=300, deadline=None)

PIECES = [
    "May",
    "mayor",
    "Jan.",
    "janx2",
    "DECember",
    "Dez",
    "only if",
    "Provided that",
    "at least",
    "at   most",
    "less-than",
    "more than",
    "don't",
    "WON'T",
    "it's",
    "not",
    "g",
    "5",
    "42%",
    "3°",
    "a",
    "the",
    "x",
    "İstanbul",
    "ſep",
    "café",
    "²",
    "٣",
    "the Big Stone Gap",
    ". ",
    "! ",
    "\n",
    " ",
    ", ",
]
texts = st.lists(st.sampled_from(PIECES), max_size=30).map(" ".join) | st.text(
    alphabet="abjnmyMJ '.\n1%°İſéxt", max_size=60
)

_PHRASES = (" only if ", " provided that ", " at least ", " at most ", " less than ", " more than ")
_CONTRACTIONS = ("can't", "won't", "don't", "doesn't", "isn't", "aren't", "wasn't")
_MONTHS = frozenset(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
)


def plain_protected(sentence: str, ws: Sequence[str]) -> bool:
    """The protected-fact test read word by word: digits and signs, protected words, month
    names, phrases, contractions."""
    if re.search(r"[\d%°]", sentence) or not _PROTECTED_WORDS.isdisjoint(ws):
        return True
    if any(w[:3] in _MONTHS and w.isalpha() and w.isascii() for w in ws):
        return True
    padded = " " + " ".join(ws) + " "
    if any(p in padded for p in _PHRASES):
        return True
    low = sentence.lower()
    return any(c in low for c in _CONTRACTIONS)


@SETTINGS
@given(texts)
def test_protected_sentences_match_the_word_by_word_reading(text: str) -> None:
    """One regex over the padded words finds what the word, month and phrase checks find."""
    found = analyse(text)
    want = [plain_protected(text[s:e], words(text[s:e])) for s, e in found.bounds]
    assert list(found.protected) == want


@SETTINGS
@given(texts)
def test_sentence_stems_match_the_word_by_word_reading(text: str) -> None:
    """Each sentence's stems are the stems of its terms, with or without a stem memo (ASCII
    text takes the skeleton path, other text the word path)."""
    memo = StemMemo()
    for found in (analyse(text), analyse(text, memo), analyse(text, memo)):
        want = tuple(frozenset(map(stem, terms_of(words(text[s:e])))) for s, e in found.bounds)
        assert found.stems == want
        assert found.padded == tuple(
            " " + " ".join(words(text[s:e])) + " " for s, e in found.bounds
        )


@SETTINGS
@given(texts, st.lists(st.sampled_from(PIECES), max_size=4).map(" ".join))
def test_an_items_word_hay_holds_exactly_its_words(text: str, probe: str) -> None:
    """A word is padded with spaces in an item's hay exactly when it is one of the item's
    words, and the hay's words joined are its padded words."""
    from ctxbudget.stages.select import _hay

    hay = _hay(text)
    ws = words(text)
    for w in {*ws, *words(probe), "x", "5"}:
        assert (f" {w} " in hay) == (w in ws)
    assert " " + " ".join(hay.split()) + " " == " " + " ".join(ws) + " "


@SETTINGS
@given(texts, texts)
def test_query_terms_of_an_item_are_its_words_among_them(text: str, query: str) -> None:
    """The query's terms an item carries are the query terms among its words (a word is a
    term or not by itself), so the item's terms need not be built."""
    qterms = content_terms(query)
    assert qterms.intersection(words(text)) == terms_of(words(text)) & qterms


@SETTINGS
@given(texts, st.frozensets(st.sampled_from(["x", "5", "the", "may", "stone", "gap", "é", "a"])))
def test_facet_terms_of_an_item_are_the_terms_of_its_words_in_the_facet(
    text: str, facet: frozenset[str]
) -> None:
    """A facet may hold words that are not terms (one letter); the terms of the item's words
    in the facet are still the item's terms in the facet."""
    ws = words(text)
    assert terms_of(facet.intersection(ws)) == terms_of(ws) & facet


@SETTINGS
@given(st.text(alphabet=".!?\n\"')] x\t\r", max_size=40))
def test_rough_sentence_ends_are_counted_as_the_plain_pattern_counts_them(text: str) -> None:
    """The rough sentence-end pattern, opened with one character class, finds the same ends
    as the plain alternation."""
    from ctxbudget.stages.select import _ROUGH_END

    plain = re.compile(r"[.!?][\"')\]]*\s|\n")
    assert _ROUGH_END.findall(text) == plain.findall(text)


SENTENCE_PIECES = [
    "Mr.",
    "U.S.",
    "e.g.",
    "St.",
    "A.",
    "c.",
    "Big Stone Gap",
    "ends.",
    "ends!",
    "ends?!",
    'said."',
    "(so.)",
    "x.y",
    "...",
    "\n",
    "\n\n",
    " \n ",
    "\t",
    "\u2028",
    "\u00a0",
    "–J.",
    "İ.",
]


@SETTINGS
@given(
    st.lists(st.sampled_from(SENTENCE_PIECES), max_size=20).map(" ".join)
    | st.lists(st.sampled_from(SENTENCE_PIECES), max_size=20).map("".join)
    | st.text(alphabet=".!?\n\"')] xMrS\t\u2028", max_size=40)
)
def test_sentences_match_the_look_behind_split(text: str) -> None:
    """:func:`ctxbudget.text.sentences` splits with a pattern that opens with a character
    class; it finds exactly the sentences of the plain form (a look-behind for the closing
    mark, the mark kept by the sentence before)."""
    from ctxbudget.text import _abbreviated, _append_trimmed, sentences

    ends = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")
    expected: list[tuple[int, int]] = []
    start = 0
    for m in ends.finditer(text):
        if "\n" not in m.group(0) and _abbreviated(text[start : m.start()]):
            continue
        _append_trimmed(text, start, m.start(), expected)
        start = m.end()
    _append_trimmed(text, start, len(text), expected)
    assert sentences(text) == expected


@SETTINGS
@given(
    st.lists(st.sampled_from(SENTENCE_PIECES + PIECES), max_size=30).map(" ".join),
    st.integers(min_value=1, max_value=4),
)
def test_a_text_of_few_sentences_has_no_excerpt_of_that_many(text: str, wanted: int) -> None:
    """Excerpt sizes stop short of the whole text, so a text of no more than ``wanted``
    sentences has fewer than ``wanted`` of them: selection skips its ranking."""
    from ctxbudget.extractive import query_stems
    from ctxbudget.schemas import ConsolidatedItem
    from ctxbudget.stages.select import excerpt_steps
    from ctxbudget.text import sentences

    if len(sentences(text)) > wanted:
        return
    item = ConsolidatedItem(
        item_id="i",
        members=(0,),
        unit_size=1,
        chunk_ids=("c",),
        doc_id="d",
        source_id="s",
        source_ids=("s",),
        title=None,
        version=None,
        published_at=None,
        text=text,
        pieces=(),
        score=None,
        authority=0.5,
        span_start=None,
    )
    qstems = query_stems(content_terms("the big stone gap 5 may"))
    assert len(excerpt_steps(item, qstems, (" big stone gap ",))) < wanted
