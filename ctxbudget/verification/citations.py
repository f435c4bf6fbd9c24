"""Reading an answer's prose into claims: one claim per sentence, with the ids it cites.

A citation is a bracket group of ids, ``[E2]`` or ``[E2, E5]`` (ids separated by commas or
semicolons), at the end of its sentence, before or after the final punctuation:
``... in 1960 [E2].``, ``... in 1960. [E2]`` and ``... in 1960.[E2][E5]`` all cite for the
sentence they close; when groups follow the punctuation, those before it are not citations
(``... as of 2015[update]. [E2]``). A bracket group anywhere else is text (``vibraphonist
[who] has``, ``[citation needed]``), unless every id in it is one of the ``known`` ids given.
A sentence ends at ``.``, ``!`` or ``?`` (with any closing quotes or brackets and the
citations after it) followed by a space and what can open a sentence, or at the end of the
text; a full stop after an initial (``J. R. R. Tolkien``), a known abbreviation (``Dr.``,
``U.S.``) or inside a number does not end one. A line break always ends a sentence (list
items are claims).

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
_NEXT_OPENS = re.compile(r"""\s+["'“‘(\[`]*[A-Z0-9À-Þ]""")
_INITIALS = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
#: Citation groups (and spaces) closing a sentence body, before its final punctuation.
_TRAILING = re.compile(rf"(?:\s*\[\s*{_ID}(?:\s*[,;]\s*{_ID})*\s*\])+\s*$")
#: The final punctuation of a sentence, with the quotes or brackets around it.
_FINAL = re.compile(r"""["'”’)]*[.!?]+["'”’)]*$""")


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
    if (len(prev) == 1 and prev.isalpha()) or _INITIALS.fullmatch(prev):
        return False  # an initial: "J. R. R. Tolkien", "E.P. Dutton"
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


def _split_ids(group: str) -> list[str]:
    return [i for i in _SPLIT_IDS.split(group.strip()) if i]


def _peel(text: str) -> tuple[str, list[str]]:
    """``text`` without the citation groups that end it, and their ids."""
    m = _TRAILING.search(text)
    if m is None:
        return text, []
    ids = [i for g in _GROUP.finditer(m.group(0)) for i in _split_ids(g.group(1))]
    return text[: m.start()], ids


def _cut(sentence: str, known: frozenset[str] | None) -> tuple[str, tuple[str, ...]]:
    """The sentence without its citation groups, and the ids they cite, in order: groups
    just before the final punctuation, groups after it, then known ids inside."""
    body, after = _peel(sentence.rstrip())
    p = _FINAL.search(body)
    punct = p.group(0) if p is not None else ""
    body = body[: p.start()] if p is not None else body
    ids: list[str] = []
    if not after:
        # no citation after the final punctuation: the groups just before it cite
        body, ids = _peel(body)
    ids.extend(after)

    def inner(m: re.Match[str]) -> str:
        group = _split_ids(m.group(1))
        if known is not None and group and all(i in known for i in group):
            ids.extend(group)
            return " "
        return m.group(0)

    body = _GROUP.sub(inner, body)
    text = _WS.sub(" ", body).strip()
    text = re.sub(r"\s+([,;:])", r"\1", text)
    return (text + punct if text else ""), tuple(dict.fromkeys(ids))


def parse_text(text: str, *, known: frozenset[str] | None = None) -> tuple[ParsedClaim, ...]:
    """The claims of an answer's prose, in order: each sentence and the ids it cites.

    A sentence with nothing but citations (``[E2]`` alone on a line) adds its ids to the
    sentence before it. ``known`` (the pack's evidence ids) lets a group inside a sentence
    cite when all its ids are known.
    """
    claims: list[ParsedClaim] = []
    for sentence in _sentences(text):
        body, ids = _cut(sentence, known)
        if not body and claims:
            prev = claims[-1]
            merged = prev.evidence_ids + tuple(i for i in ids if i not in prev.evidence_ids)
            claims[-1] = ParsedClaim(prev.text, merged)
            continue
        if body:
            claims.append(ParsedClaim(body, ids))
    return tuple(claims)
