"""Text helpers (ctxbudget.text): words, terms, shingles, sentences and overlaps on their fast
paths give exactly what the plain definitions give (no timing here, ever)."""

from __future__ import annotations

import re
import zlib

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxbudget.extractive import analyse
from ctxbudget.text import (
    STOPWORDS,
    ShingleCache,
    common_shingles,
    content_terms,
    normalize,
    shingles,
    shingles_of_many,
    terms_of,
    words,
)
from tests.property.strategies import SENTENCE_PIECES, texts

SETTINGS = settings(max_examples=300, deadline=None)

CHARS = "abcIKSgnorepvtu .:\n\t\"<>|#[]/{}_-,'&" + "\u0130\u0131\u017f\u212aéßΣﬁＡ٣²\u00a0\u2028"


def _plain_words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text.lower())


def _plain_shingles(tokens: list[str], size: int) -> frozenset[int]:
    ids = [zlib.crc32(w.encode("utf-8")) for w in tokens]
    if not ids:
        return frozenset()
    size = min(size, len(ids))
    out = set()
    for i in range(len(ids) - size + 1):
        h = 0
        for j in range(size):
            h = (h * 1_000_003 + ids[i + j]) & 0xFFFFFFFFFFFF
        out.add(h)
    return frozenset(out)


@SETTINGS
@given(st.text(alphabet=CHARS + "ABCZ019", max_size=60))
def test_words_terms_and_normal_forms_match_their_definitions(text: str) -> None:
    """The ASCII fast paths of words(), terms_of() and normalize() change nothing."""
    tokens = _plain_words(text)
    assert words(text) == tokens
    plain_terms = frozenset(w for w in tokens if w not in STOPWORDS and (len(w) > 1 or w.isdigit()))
    assert terms_of(tokens) == plain_terms
    import unicodedata

    assert normalize(text) == " ".join(_plain_words(unicodedata.normalize("NFKC", text).casefold()))
    assert normalize(text, words(text)) == normalize(text)


@SETTINGS
@given(st.text(max_size=80))
@example("Straße in İstanbul: ΟΔΟΣ, the ﬁrst ½ of Ⅻ")
@example("Tekezé — “Aschenbrödel”")
def test_a_normal_form_from_given_words_is_the_normal_form(text: str) -> None:
    """Passing a text's words to normalize() (the shortcut for text NFKC leaves alone)
    gives the canonical form on any text, ligatures, sharp s and final sigma included."""
    assert normalize(text, words(text)) == normalize(text)


token_lists = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "ab", "é", "10"]), max_size=70), max_size=8
)


@SETTINGS
@given(token_lists, st.integers(min_value=1, max_value=8))
def test_shingles_one_by_one_and_batched_match_the_fold(lists: list[list[str]], size: int) -> None:
    """The zip, numpy and batched shingle paths all give the fold of crc32 word ids."""
    expected = [_plain_shingles(t, size) for t in lists]
    assert [shingles(t, size) for t in lists] == expected
    assert shingles_of_many(lists, size) == expected


@SETTINGS
@given(st.lists(st.sampled_from(["a b c d", "b c d e", "x y", "é b c d", "", "one"]), max_size=8))
def test_text_overlaps_match_the_definitions_with_or_without_remembered_sets(
    texts: list[str],
) -> None:
    """Sets, normal forms and the shared-shingle table are the same whether the sets were
    remembered or made now."""
    cache = ShingleCache()
    expected_sets = [_plain_shingles(words(t), 2) for t in texts]
    cache.text_overlaps(texts[::2], 2)
    for _ in range(2):  # some made and some remembered, then all remembered
        found = cache.text_overlaps(texts, 2)
        assert found.sets == expected_sets
        assert found.norms == [normalize(t) for t in texts]
        common = common_shingles(expected_sets)
        assert found.common is not None and common is not None
        assert (found.common == common).all()


@given(st.text(alphabet=st.characters(max_codepoint=127)), st.integers(0, 60), st.integers(0, 60))
def test_the_word_skeleton_gives_the_words_of_any_slice(text: str, a: int, b: int) -> None:
    """Sentence analysis splits one skeleton of an ASCII text instead of every sentence: any
    slice of the skeleton holds exactly the words of that slice of the text."""
    from ctxbudget.text import word_skeleton, words

    flat = word_skeleton(text)
    assert flat is not None and len(flat) == len(text)
    lo, hi = sorted((min(a, len(text)), min(b, len(text))))
    assert flat[lo:hi].split() == words(text[lo:hi])
    found = analyse(text)
    assert [p.split() for p in found.padded] == [words(text[s:e]) for s, e in found.bounds]


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
