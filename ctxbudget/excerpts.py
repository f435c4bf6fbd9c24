"""Excerpt sizes: what an excerpt of a passage's best sentences costs, roughly from its
sentence count before its sentences are read, and exactly from the compressor's ranking
(:func:`excerpt_steps`) once they are."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from ctxbudget.extractive import SentenceAnalysis, analyse, rank_stemmed
from ctxbudget.native import NATIVE
from ctxbudget.schemas import ConsolidatedItem
from ctxbudget.tokens import estimate_tokens

#: Room asked of the compressor above the estimate of the sentences it should keep: the
#: exact count of short sentences runs above the character estimate.
EXCERPT_SLACK = 1.15

#: Sentence ends, roughly (abbreviations count too): for rough excerpt sizes only. A line
#: break, or ``[.!?]`` then closing quotes or brackets then a space; written to open with
#: one character class, which the regex engine scans for quickly.
ROUGH_END = re.compile(r"[.!?\n](?:(?<=\n)|[\"')\]]*\s)")


def rough_sentence_count(text: str) -> int:
    """About how many sentences ``text`` has: one more than its :data:`ROUGH_END` matches.
    Counted by the compiled path when it is loaded (a plain scan), else by
    :func:`rough_sentence_count_reference`."""
    if NATIVE is not None:
        found = NATIVE.rough_sentence_count(text)
        if found is not None:
            return found
    return rough_sentence_count_reference(text)


def rough_sentence_count_reference(text: str) -> int:
    """:func:`rough_sentence_count` in pure Python: the reference of
    ``native/src/rough.rs`` (``tests/property/test_native_rank.py`` compares the two)."""
    return len(ROUGH_END.findall(text)) + 1


def excerpt_steps(
    item: ConsolidatedItem,
    qstems: frozenset[str],
    links: tuple[str, ...] = (),
    analysis: SentenceAnalysis | None = None,
    estimate: Callable[[str], int] = estimate_tokens,
) -> tuple[int, ...]:
    """Text tokens for excerpts of the item's best 1, 2, ... sentences (the compressor's
    ranking, with room for the gaps and :data:`EXCERPT_SLACK`), while smaller than the
    whole text. ``qstems`` are the query terms' stems (:func:`query_stems`), and
    ``analysis`` is ``analyse(item.text)`` when the caller has it; ``estimate`` estimates a
    text's tokens (:func:`text_estimator`)."""
    found = analysis if analysis is not None else analyse(item.text)
    bounds = found.bounds
    if len(bounds) < 2:
        return ()
    lead = item.span_start is None or item.span_start == 0
    _, order = rank_stemmed(found, qstems, lead=lead, links=links)
    whole = estimate(item.text)
    out: list[int] = []
    est = 2
    for i in order[:-1]:
        s, e = bounds[i]
        est += estimate(item.text[s:e]) + 1
        step = math.ceil(est * EXCERPT_SLACK)
        if step >= whole:
            break
        out.append(step)
    return tuple(out)
