"""The excerpt sizes' shortcuts (ctxbudget.excerpts) give exactly what the plain definitions
give (no timing here)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.text import content_terms
from tests.property.strategies import PIECES, SENTENCE_PIECES

SETTINGS = settings(max_examples=300, deadline=None)


@SETTINGS
@given(st.text(alphabet=".!?\n\"')] x\t\r", max_size=40))
def test_rough_sentence_ends_are_counted_as_the_plain_pattern_counts_them(text: str) -> None:
    """The rough sentence-end pattern, opened with one character class, finds the same ends
    as the plain alternation."""
    from ctxbudget.excerpts import ROUGH_END

    plain = re.compile(r"[.!?][\"')\]]*\s|\n")
    assert ROUGH_END.findall(text) == plain.findall(text)


@SETTINGS
@given(
    st.lists(st.sampled_from(SENTENCE_PIECES + PIECES), max_size=30).map(" ".join),
    st.integers(min_value=1, max_value=4),
)
def test_a_text_of_few_sentences_has_no_excerpt_of_that_many(text: str, wanted: int) -> None:
    """Excerpt sizes stop short of the whole text, so a text of no more than ``wanted``
    sentences has fewer than ``wanted`` of them: selection skips its ranking."""
    from ctxbudget.excerpts import excerpt_steps
    from ctxbudget.extractive import query_stems
    from ctxbudget.schemas import ConsolidatedItem
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
