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

from ctxbudget.schemas import EvidenceSpan, Piece
from ctxbudget.text import content_terms, sentences

GAP = " … "

_PROTECTED = re.compile(
    r"\b(not|no|never|none|neither|nor|cannot|can't|won't|don't|doesn't|isn't|aren't|wasn't|"
    r"without|except|unless|only if|if|when|provided that|until|before|after|must|"
    r"at least|at most|no more than|less than|more than)\b"
    r"|\d"
    r"|\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b"
    r"|%|°|\b(kg|mg|g|km|m|cm|mm|ms|s|h|gb|mb|kb|tb|ghz|mhz|kw|v|usd|eur)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Compressed:
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


class ExtractiveCompressor:
    """Keep the sentences that matter most to the query within a token target."""

    def __init__(self, *, count: Callable[[str], int], span_cost: int = 0) -> None:
        if span_cost < 0:
            raise ValueError(f"span_cost must be >= 0, got {span_cost}")
        self.count = count
        #: Tokens each kept sentence adds to the envelope header (its location entry).
        self.span_cost = span_cost

    def compress(
        self, text: str, pieces: Sequence[Piece], query: str, target_tokens: int
    ) -> Compressed | None:
        """The compressed text, or None when not even one useful sentence fits."""
        bounds = sentences(text)
        if not bounds or target_tokens <= 0:
            return None
        qterms = content_terms(query)
        overlap = [len(content_terms(text[s:e]) & qterms) for s, e in bounds]
        scores = []
        for i, (s, e) in enumerate(bounds):
            near = (
                overlap[i] > 0
                or (i > 0 and overlap[i - 1] > 0)
                or (i + 1 < len(bounds) and overlap[i + 1] > 0)
            )
            protected = near and _PROTECTED.search(text[s:e]) is not None
            # Query overlap first, protection second, earlier sentences break ties.
            scores.append((overlap[i] + (0.5 if protected else 0.0), -i))
        order = sorted(range(len(bounds)), key=lambda i: scores[i], reverse=True)
        kept: list[int] = []
        used = 8  # the compressed="true" attribute
        for i in order:
            s, e = bounds[i]
            cost = self.count(text[s:e]) + 2 + self.span_cost
            if used + cost > target_tokens:
                continue
            kept.append(i)
            used += cost
        if not kept or (all(overlap[i] == 0 for i in kept) and any(overlap)):
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
