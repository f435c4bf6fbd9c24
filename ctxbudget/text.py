"""Small, deterministic text helpers shared by the stages (no randomness, no hashing seeds)."""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Iterable
from functools import lru_cache

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "being",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "done",
        "for",
        "from",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "me",
        "my",
        "no",
        "nor",
        "not",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "any",
        "because",
        "before",
        "below",
        "between",
        "both",
        "during",
        "each",
        "few",
        "more",
        "most",
        "further",
        "here",
        "just",
        "s",
        "t",
        "don",
        "now",
        "also",
        "may",
        "might",
        "must",
        "shall",
        "get",
        "got",
    ]
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits), in order."""
    return _WORD.findall(text.lower())


def content_terms(text: str) -> frozenset[str]:
    """The distinct non-stopword terms of a text (used for query coverage)."""
    return frozenset(w for w in words(text) if w not in STOPWORDS and (len(w) > 1 or w.isdigit()))


def normalize(text: str) -> str:
    """Canonical form for exact-duplicate detection: NFKC, case-folded, words only."""
    return " ".join(words(unicodedata.normalize("NFKC", text).casefold()))


@lru_cache(maxsize=1 << 16)
def _word_id(word: str) -> int:
    return zlib.crc32(word.encode("utf-8"))


def shingles(tokens: list[str], size: int) -> frozenset[int]:
    """Stable integer ids of the word ``size``-grams of ``tokens`` (crc32-based, seed-free).

    A text shorter than ``size`` words yields its single whole-text shingle.
    """
    ids = [_word_id(w) for w in tokens]
    if not ids:
        return frozenset()
    if len(ids) < size:
        size = len(ids)
    out = set()
    for i in range(len(ids) - size + 1):
        h = 0
        for j in range(size):
            h = (h * 1_000_003 + ids[i + j]) & 0xFFFFFFFFFFFF
        out.add(h)
    return frozenset(out)


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def containment(a: frozenset[int], b: frozenset[int]) -> float:
    """Share of the smaller set found in the larger one."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")


def sentences(text: str) -> list[tuple[int, int]]:
    """Sentence boundaries as (start, end) character offsets covering the non-blank text."""
    out: list[tuple[int, int]] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        end = m.start()
        _append_trimmed(text, start, end, out)
        start = m.end()
    _append_trimmed(text, start, len(text), out)
    return out


def _append_trimmed(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        out.append((start, end))


def first_seen_order(items: Iterable[str]) -> list[str]:
    """Distinct items in order of first appearance."""
    seen: dict[str, None] = {}
    for i in items:
        seen.setdefault(i, None)
    return list(seen)
