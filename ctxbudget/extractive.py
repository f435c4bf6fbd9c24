"""Extractive, query-aware compression: a known fallback, never a tail-drop.

Sentences are scored by the query terms they carry; sentences holding negations, numbers,
units, dates or conditions are protected when they bear on the query (they share a query
term, or sit next to a sentence that does). The kept sentences stay in source order and
each one keeps a span ``(chunk_id, start, end)`` into the original chunk text, so a
citation still resolves after compression.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ctxbudget.native import NATIVE
from ctxbudget.schemas import EvidenceSpan, Piece
from ctxbudget.text import (
    LATIN_TABLE,
    NOT_TERMS,
    content_terms,
    sentences,
    terms_of,
    word_skeleton,
    words,
)

GAP = " … "


#: Protected facts (negations, conditions, limits, numbers, dates, units), read from a
#: sentence's words as :func:`words` splits them: single words, phrases, contractions,
#: month names and units; digits, "%" and "°" by a one-class regex.
_PROTECTED_WORDS = frozenset(
    [
        "not",
        "no",
        "never",
        "none",
        "neither",
        "nor",
        "cannot",
        "without",
        "except",
        "unless",
        "if",
        "when",
        "until",
        "before",
        "after",
        "must",
        "kg",
        "mg",
        "g",
        "km",
        "m",
        "cm",
        "mm",
        "ms",
        "s",
        "h",
        "gb",
        "mb",
        "kb",
        "tb",
        "ghz",
        "mhz",
        "kw",
        "v",
        "usd",
        "eur",
    ]
)
#: Phrases, and month names (an ASCII word of letters opening with a month's first three
#: letters), read as whole words of a sentence's space-padded words.
_PROTECTED_PHRASES = re.compile(
    r" (?:only if|provided that|at least|at most|less than|more than"
    r"|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*) "
)
_CONTRACTIONS = ("can't", "won't", "don't", "doesn't", "isn't", "aren't", "wasn't")
_DIGIT_OR_SIGN = re.compile(r"[\d%°]")


def _protected(text: str, start: int, end: int, ws: Sequence[str], padded: str) -> bool:
    """The sentence ``text[start:end]`` holds a negation, condition, number, date or unit.
    ``ws`` are its words (lower-case) and ``padded`` the same words joined by single spaces,
    with a space on each side."""
    if _DIGIT_OR_SIGN.search(text, start, end) is not None:
        return True
    if not _PROTECTED_WORDS.isdisjoint(ws) or _PROTECTED_PHRASES.search(padded) is not None:
        return True
    if "'" in text[start:end]:
        low = text[start:end].lower()
        return any(c in low for c in _CONTRACTIONS)
    return False


@dataclass(frozen=True, slots=True)
class Compressed:
    """A compressed text: the kept sentences in document order (a :data:`GAP` where
    sentences were left out), the chunk spans they come from, and ``kept`` of the
    text's ``total`` sentences."""

    text: str
    spans: tuple[EvidenceSpan, ...]
    kept: int
    total: int


def map_range(pieces: Sequence[Piece], a: int, b: int) -> list[EvidenceSpan]:
    """Map ``[a, b)`` of an item's text to spans of the chunks the text was built from."""
    out = []
    for p in pieces:
        length = p.end - p.start
        lo, hi = max(a, p.at), min(b, p.at + length)
        if lo < hi:
            out.append(
                EvidenceSpan(
                    chunk_id=p.chunk_id, start=p.start + lo - p.at, end=p.start + hi - p.at
                )
            )
    return out


#: Score of a document's first sentence, on the scale of one shared query term.
LEAD_BONUS = 0.75
#: Score of a sentence holding a protected fact (negation, number, date, condition, unit)
#: next to the query's subject.
PROTECTED_BONUS = 0.5
#: Score of a sentence naming the entity another retrieved passage is about.
LINK_BONUS = 1.0
#: How many of the best sentences are picked one by one for the query stems they add.
COVERAGE_PICKS = 3


_SUFFIXES = ("ings", "ing", "ers", "er", "ed", "es", "s")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix strip for matching query words to sentence words: "directors" meets
    "director", "writes" meets "writer" (at "writ"), "founded" meets "found"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


class StemMemo(dict[str, str]):
    """The :func:`stem` of each word asked for, remembered (a dict look-up costs less than
    a call through the cache of :func:`stem`); emptied when it grows past ``limit`` words.
    Words over ``longest`` characters (tokens, hashes: rarely seen twice) are stemmed each
    time instead, so the memo stays small. Owned by whoever analyses many texts; the result
    is the same with or without it."""

    limit = 1 << 16
    longest = 32

    def __missing__(self, word: str) -> str:
        value = stem(word)
        if len(word) <= self.longest:
            if len(self) >= self.limit:
                self.clear()
            self[word] = value
        return value


@dataclass(frozen=True, slots=True)
class SentenceAnalysis:
    """What ranking needs of a text, whatever the query: its sentences, their stemmed terms,
    whether each holds a protected fact, and their words space-padded (for entity look-ups).
    A pure function of the text, so stages may memoise it per passage."""

    bounds: tuple[tuple[int, int], ...]
    stems: tuple[frozenset[str], ...]
    protected: tuple[bool, ...]
    padded: tuple[str, ...]

    @property
    def weight(self) -> int:
        """About how many bytes it holds (for a byte-bounded memo)."""
        return (
            64
            + 64 * len(self.padded)
            + 2 * sum(map(len, self.padded))
            + 48 * sum(map(len, self.stems))
        )


def analyse(
    text: str,
    stems_of: StemMemo | None = None,
    bounds: list[tuple[int, int]] | None = None,
) -> SentenceAnalysis:
    """The :class:`SentenceAnalysis` of ``text``; ``stems_of`` remembers word stems across
    calls, and ``bounds`` is ``sentences(text)`` when the caller has it."""
    if bounds is None:
        bounds = sentences(text)
    if _ANALYSER is not None:
        found = (
            _ANALYSER.analyse(text, bounds)
            if text.isascii()
            else _ANALYSER.analyse_latin(text, bounds)
        )
        if found is not None:
            stems_of_each, protected_each, padded_each = found
            return SentenceAnalysis(
                bounds=tuple(bounds),
                stems=stems_of_each,
                protected=protected_each,
                padded=padded_each,
            )
    flat = word_skeleton(text)  # one pass for all sentences (ASCII text)
    if flat is not None:
        return _analyse_ascii(
            text, bounds, flat, stem if stems_of is None else stems_of.__getitem__
        )
    return analyse_reference(text, bounds)


def analyse_reference(text: str, bounds: list[tuple[int, int]]) -> SentenceAnalysis:
    """:func:`analyse` of text beyond ASCII, in pure Python: the reference of the compiled
    analysis of Latin text. A change here, to :func:`stem` or to the protected words,
    phrases and contractions needs the same change in ``native/src/lib.rs``
    (``tests/property/test_native_paths.py`` compares the two)."""
    stems: list[frozenset[str]] = []
    protected: list[bool] = []
    padded: list[str] = []
    for s, e in bounds:
        ws = words(text[s:e])
        joined = " " + " ".join(ws) + " "
        stems.append(frozenset(map(stem, terms_of(ws))))
        protected.append(_protected(text, s, e, ws, joined))
        padded.append(joined)
    return SentenceAnalysis(
        bounds=tuple(bounds), stems=tuple(stems), protected=tuple(protected), padded=tuple(padded)
    )


#: The compiled :func:`_analyse_ascii` and :func:`analyse_reference` (:mod:`ctxbudget.native`),
#: or None.
_ANALYSER = (
    NATIVE.SentenceAnalyser(
        sorted(NOT_TERMS), sorted(_PROTECTED_WORDS), list(_CONTRACTIONS), LATIN_TABLE
    )
    if NATIVE is not None
    else None
)


def _analyse_ascii(
    text: str, bounds: list[tuple[int, int]], flat: str, stem_of: Callable[[str], str]
) -> SentenceAnalysis:
    """:func:`analyse` of ASCII ``text``, whose :func:`word_skeleton` is ``flat``, with
    ``stem_of`` giving each term's :func:`stem`. The reference of the compiled analysis: a
    change here, to :func:`stem` or to the protected words, phrases and contractions needs
    the same change in ``native/src/lib.rs`` (``tests/property/test_native_paths.py``).

    On ASCII text a sentence's words are letters and digits only, so it holds a digit
    exactly when its words joined are not all letters; the only sign that can occur is "%"
    ("°" is not ASCII); and its terms are its distinct words less :data:`NOT_TERMS`."""
    percent = "%" in text
    quote = "'" in text
    stems: list[frozenset[str]] = []
    protected: list[bool] = []
    padded: list[str] = []
    for s, e in bounds:
        ws = flat[s:e].split()
        joined = " " + " ".join(ws) + " "
        stems.append(frozenset(map(stem_of, frozenset(ws).difference(NOT_TERMS))))
        if (
            (ws and not "".join(ws).isalpha())
            or (percent and text.find("%", s, e) >= 0)
            or not _PROTECTED_WORDS.isdisjoint(ws)
            or _PROTECTED_PHRASES.search(joined) is not None
        ):
            protected.append(True)
        elif quote and text.find("'", s, e) >= 0:
            low = text[s:e].lower()
            protected.append(any(c in low for c in _CONTRACTIONS))
        else:
            protected.append(False)
        padded.append(joined)
    return SentenceAnalysis(
        bounds=tuple(bounds), stems=tuple(stems), protected=tuple(protected), padded=tuple(padded)
    )


def query_stems(qterms: frozenset[str]) -> frozenset[str]:
    """The :func:`stem` of each query term, and of its plural where that strips further
    (:func:`plural_stem`): "state" meets "states" (at "stat") as "states" meets "state"."""
    out = set(map(stem, qterms))
    out.update(p for p in map(plural_stem, qterms) if p is not None)
    return frozenset(out)


def plural_stem(word: str) -> str | None:
    """The stem of ``word`` + "s" when it differs from the stem of ``word``: a word ending
    in "e" keeps its "e" ("state"), while its plural loses "es" ("states" -> "stat"), so a
    question saying the singular would never meet a sentence saying the plural. None when
    both stem alike."""
    if not word.endswith("e"):
        return None
    plural = stem(word + "s")
    return plural if plural != stem(word) else None


def rank_stemmed(
    analysis: SentenceAnalysis,
    qstems: frozenset[str],
    *,
    lead: bool,
    links: Sequence[str] = (),
) -> tuple[list[int], list[int]]:
    """Per-sentence query overlap, and the sentence indices best first: the compiled
    ranking when it is loaded (:mod:`ctxbudget.native`), else :func:`rank_stemmed_reference`,
    which says what both compute."""
    if RANKER is not None:
        found = RANKER.rank(
            analysis.stems, analysis.protected, analysis.padded, qstems, lead, links
        )
        if found is not None:
            return found
    return rank_stemmed_reference(analysis, qstems, lead=lead, links=links)


def rank_stemmed_reference(
    analysis: SentenceAnalysis,
    qstems: frozenset[str],
    *,
    lead: bool,
    links: Sequence[str] = (),
) -> tuple[list[int], list[int]]:
    """Per-sentence query overlap, and the sentence indices best first.

    A sentence scores the query stems it carries (``qstems``: :func:`query_stems`), plus
    :data:`PROTECTED_BONUS` when it holds a protected fact and bears on the query (it, or a
    neighbour, shares a query term), plus :data:`LEAD_BONUS` for the first sentence when
    ``lead``, plus :data:`LINK_BONUS` when it names one of ``links`` (the entities other
    retrieved passages are about, as space-padded lower-case words: the sentence that carries
    a multi-hop question to its next passage); earlier sentences break ties.

    The first :data:`COVERAGE_PICKS` sentences are picked one by one, each scoring only the
    query stems the sentences picked before it do not carry (the bonuses stay whole): the
    second sentence of an excerpt is then the one that adds to the first (the bridge it
    names, the attribute asked for), not one that says the question again. The rest follow
    in score order. The selector estimates an excerpt's size with this ranking, and the
    compressor keeps sentences in this order, so both agree on what an excerpt holds.

    The reference of the compiled ranking: a change here or to the bonuses needs the same
    change in ``native/src/rank.rs`` (``tests/property/test_native_rank.py`` compares the
    two; the scores are floats summed in this order on both sides).
    """
    hits = [st & qstems for st in analysis.stems]
    overlap = [len(h) for h in hits]
    n = len(overlap)
    bonus: list[float] = []
    for i in range(n):
        near = (
            overlap[i] > 0 or (i > 0 and overlap[i - 1] > 0) or (i + 1 < n and overlap[i + 1] > 0)
        )
        score = PROTECTED_BONUS if near and analysis.protected[i] else 0.0
        if lead and i == 0:
            score += LEAD_BONUS
        if links:
            padded = analysis.padded[i]
            if any(link in padded for link in links):
                score += LINK_BONUS
        bonus.append(score)
    scores = [(overlap[i] + bonus[i], -i) for i in range(n)]
    order = sorted(range(n), key=scores.__getitem__, reverse=True)
    picks = min(COVERAGE_PICKS, n - 1)
    if picks <= 0 or not qstems:
        return overlap, order
    chosen: list[int] = [order[0]]
    covered = set(hits[order[0]])
    rest = order[1:]
    for _ in range(picks - 1):
        # Equal scores: the earlier sentence.
        pick = max(rest, key=lambda i: (len(hits[i] - covered) + bonus[i], -i))
        rest.remove(pick)
        chosen.append(pick)
        covered.update(hits[pick])
    return overlap, chosen + rest


#: The compiled :func:`rank_stemmed_reference` (:mod:`ctxbudget.native`), and the sentence
#: scans of :mod:`ctxbudget.hops`; None without the extension.
RANKER = (
    NATIVE.SentenceRanker(PROTECTED_BONUS, LEAD_BONUS, LINK_BONUS, COVERAGE_PICKS)
    if NATIVE is not None
    else None
)


class ExtractiveCompressor:
    """Keep the sentences that matter most to the query within a token target."""

    def __init__(
        self,
        *,
        count: Callable[[str], int],
        span_cost: int = 0,
        analyse: Callable[[str], SentenceAnalysis] = analyse,
    ) -> None:
        if span_cost < 0:
            raise ValueError(f"span_cost must be >= 0, got {span_cost}")
        self.count = count
        self.analyse = analyse
        #: Tokens each kept sentence adds to the envelope header (its location entry).
        self.span_cost = span_cost

    def compress(
        self,
        text: str,
        pieces: Sequence[Piece],
        query: str,
        target_tokens: int,
        *,
        lead: bool = False,
        links: Sequence[str] = (),
    ) -> Compressed | None:
        """The compressed text, or None when not even one useful sentence fits.

        ``lead``: the text starts its document, so its first sentence names and defines the
        subject (encyclopedic and reference text); it is preferred after query matches.
        """
        analysis = self.analyse(text)
        bounds = analysis.bounds
        if not bounds or target_tokens <= 0:
            return None
        overlap, order = rank_stemmed(
            analysis, query_stems(content_terms(query)), lead=lead, links=links
        )
        kept: list[int] = []
        used = 2  # the excerpt attribute
        for i in order:
            s, e = bounds[i]
            cost = self.count(text[s:e]) + 2 + self.span_cost
            if used + cost > target_tokens:
                continue
            kept.append(i)
            used += cost
        if not kept or (all(overlap[i] == 0 for i in kept) and any(overlap) and not lead):
            return None
        kept.sort()
        parts: list[str] = []
        spans: list[EvidenceSpan] = []
        prev = -2
        for i in kept:
            s, e = bounds[i]
            if parts:
                parts.append(" " if i == prev + 1 else GAP)
            parts.append(text[s:e])
            spans.extend(map_range(pieces, s, e))
            prev = i
        return Compressed(
            text="".join(parts), spans=tuple(spans), kept=len(kept), total=len(bounds)
        )
