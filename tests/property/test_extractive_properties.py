"""Sentence analysis (ctxbudget.extractive): the protected-fact test and the stems give exactly
what the word-by-word reading gives."""

from __future__ import annotations

import re
from collections.abc import Sequence

from hypothesis import given, settings

from ctxbudget.extractive import _PROTECTED_WORDS, StemMemo, analyse, stem
from ctxbudget.text import terms_of, words
from tests.property.strategies import texts

SETTINGS = settings(max_examples=300, deadline=None)


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
