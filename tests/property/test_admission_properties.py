"""The admission loop's shortcuts (ctxbudget.admission) give exactly what the plain
definitions give (no timing here)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.admission import spaced_words
from ctxbudget.text import words
from tests.property.strategies import PIECES, texts

SETTINGS = settings(max_examples=300, deadline=None)


@SETTINGS
@given(texts, st.lists(st.sampled_from(PIECES), max_size=4).map(" ".join))
def test_an_items_word_hay_holds_exactly_its_words(text: str, probe: str) -> None:
    """A word is padded with spaces in an item's hay exactly when it is one of the item's
    words, and the hay's words joined are its padded words."""
    hay = spaced_words(text)
    ws = words(text)
    for w in {*ws, *words(probe), "x", "5"}:
        assert (f" {w} " in hay) == (w in ws)
    assert " " + " ".join(hay.split()) + " " == " " + " ".join(ws) + " "
