"""Reading an answer's prose into claims: one claim per sentence, with the ids it cites.

A citation is a bracket group of ids, ``[E2]`` or ``[E2, E5]`` (ids separated by commas or
semicolons), at the end of its sentence, before or after the final punctuation:
``... in 1960 [E2].``, ``... in 1960. [E2]`` and ``... in 1960.[E2][E5]`` all cite for the
sentence they close. Groups inside a sentence cite for that sentence too. A sentence ends at
``.``, ``!`` or ``?`` (with any closing quotes or brackets and the citations after it)
followed by a space and what can open a sentence, or at the end of the text; a full stop
after an initial (``J. R. R. Tolkien``), a known abbreviation (``Dr.``, ``U.S.``) or inside a
number does not end one. A line break always ends a sentence (list items are claims).

Pure functions of the text; the claim text keeps the sentence's words without its citation
groups, spaces collapsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ParsedClaim", "parse_text"]

_ID = r"[^\[\]\s,;]+"
_GROUP = re.compile(rf"\[\s*({_ID}(?:\s*[,;]\s*{_ID})*)\s*\]")
_SPLIT_IDS = re.compile(r"\s*[,;]\s*")
#: A sentence end: terminal punctuation, closing quotes or brackets, then citation groups.
_END = re.compile(
    rf"""[.!?]+["'”’)\]]*(?:\s*\[\s*{_ID}(?:\s*[,;]\s*{_ID})*\s*\])*(?=\s|$)""", re.VERBOSE
)
_ABBREVIATION_WORDS = """
    mr mrs ms dr prof sr jr st mt ft vs etc inc ltd co corp no vol fig al e.g i.e
    u.s u.k u.n approx est dept univ gen col lt sgt capt rev hon jan feb mar apr jun jul aug
    sep sept oct nov dec"""
_ABBREVIATIONS = frozenset(_ABBREVIATION_WORDS.split())
_WS = re.compile(r"\s+")
_NEXT_OPENS = re.compile(r"""\s+["'“‘(\[]*[A-Z0-9À-Þ]""")


@dataclass(frozen=True, slots=True)
class ParsedClaim:
    """One sentence of an answer: its text without citations and the ids it cites."""

    text: str
    evidence_ids: tuple[str, ...]


def _ends_sentence(text: str, m: re.Match[str]) -> bool:
    """Whether the punctuation run at ``m`` closes a sentence."""
    if m.end() >= len(text.rstrip()):
        return True
    if not _NEXT_OPENS.match(text, m.end()):
        return False
    if m.group(0)[0] != ".":
        return True
    if "[" in m.group(0):
        return True
    word = re.search(r"(\S+)$", text[: m.start()])
    if word is None:
        return True
    prev = word.group(1).lower().lstrip("(\"'“")
    if len(prev) == 1 and prev.isalpha():
        return False  # an initial: "J. R. R. Tolkien"
    return prev not in _ABBREVIATIONS


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        start = 0
        for m in _END.finditer(line):
            if _ends_sentence(line, m):
                out.append(line[start : m.end()])
                start = m.end()
        out.append(line[start:])
    return [s for s in (s.strip() for s in out) if s]


def _ids(sentence: str) -> tuple[str, ...]:
    ids: list[str] = []
    for group in _GROUP.findall(sentence):
        for i in _SPLIT_IDS.split(group.strip()):
            if i and i not in ids:
                ids.append(i)
    return tuple(ids)


def _claim_text(sentence: str) -> str:
    text = _GROUP.sub(" ", sentence)
    text = _WS.sub(" ", text).strip()
    return re.sub(r"\s+([.!?,;:])", r"\1", text)


def parse_text(text: str) -> tuple[ParsedClaim, ...]:
    """The claims of an answer's prose, in order: each sentence and the ids it cites.

    A sentence with nothing but citations (``[E2]`` alone on a line) adds its ids to the
    sentence before it.
    """
    claims: list[ParsedClaim] = []
    for sentence in _sentences(text):
        ids = _ids(sentence)
        body = _claim_text(sentence)
        if not body.strip(".!?;:, ") and claims:
            prev = claims[-1]
            merged = prev.evidence_ids + tuple(i for i in ids if i not in prev.evidence_ids)
            claims[-1] = ParsedClaim(prev.text, merged)
            continue
        if body.strip(".!?;:, "):
            claims.append(ParsedClaim(body, ids))
    return tuple(claims)
