"""Opaque ids, fake site names, source authorities and random dates, all deterministic."""

from __future__ import annotations

import hashlib
import random
from datetime import date, timedelta


def _hex(*parts: object, n: int) -> str:
    joined = "|".join(str(p) for p in parts)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:n]


def chunk_id_for(*parts: object) -> str:
    """An opaque chunk id; every kind of passage gets the same shape."""
    return "ch-" + _hex("chunk", *parts, n=12)


def doc_id_for(*parts: object) -> str:
    return "doc-" + _hex("doc", *parts, n=10)


_SITE_A = (
    "health",
    "facts",
    "daily",
    "wiki",
    "answers",
    "science",
    "guide",
    "library",
    "med",
    "learn",
    "ref",
    "world",
    "review",
    "know",
    "study",
    "press",
)
_SITE_B = ("hub", "base", "zone", "point", "center", "desk", "wire", "lab", "net", "post")
_TLDS = (".com", ".org", ".net", ".edu", ".io")


def source_for(*parts: object) -> str:
    """A deterministic fake site name."""
    h = int(_hex("source", *parts, n=8), 16)
    return (
        _SITE_A[h % len(_SITE_A)]
        + _SITE_B[(h // 16) % len(_SITE_B)]
        + str((h // 160) % 50)
        + _TLDS[(h // 8000) % len(_TLDS)]
    )


def authority_for(source_id: str) -> float | None:
    """A source registry stand-in: a fixed authority per source, unknown for some."""
    h = int(_hex("authority", source_id, n=8), 16)
    if h % 7 == 0:
        return None
    return round(0.35 + 0.6 * (h % 1000) / 999, 2)


def _random_date(rng: random.Random, first_year: int, last_year: int) -> date:
    start = date(first_year, 1, 1)
    span = (date(last_year, 12, 31) - start).days
    return start + timedelta(days=rng.randint(0, span))
