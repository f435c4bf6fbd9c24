"""What a question asks for, read from its text: the options a comparison names, and what a
troubleshooting question gives a passage to match (error codes, versions, environments).

Selection turns the options into facets a pack should cover and the signals into a match
score; both are pure functions of the question's text.
"""

from __future__ import annotations

import re

from ctxbudget.text import STOPWORDS, content_terms, words

#: "than" joins two options unless a number follows ("more than 50", "more than how many").
_CHOICE = re.compile(r"\s(?:vs\.?|versus|compared (?:to|with)|or|than(?!\s+(?:\d|how\b)))\s", re.I)
_PAIR = re.compile(r"\s(?:and|with|to)\s", re.I)
_TOKEN = re.compile(r"[^\s,;:?!()\"“”]+|[,;:?!()\"“”]")
#: A parenthetical qualifier closing a name ("North Marion High School (Oregon)").
_QUALIFIER = re.compile(r"\s*\([^()]{1,40}\)\s*$")
_PARTICLES = frozenset(["of", "the", "de", "del", "la", "le", "du", "da", "von", "van", "y", "&"])


def _name_side(segment: str, *, before: bool) -> list[str]:
    """Up to five words of the name next to a connector: capitalised words (and particles
    inside a name), read away from the connector up to punctuation or a plain word."""
    tokens = _TOKEN.findall(_QUALIFIER.sub("", segment) if before else segment)
    if before:
        tokens.reverse()
    out: list[str] = []
    for tok in tokens:
        if len(tok) == 1 and not tok.isalnum():
            break
        if tok[:1].isupper() or tok[:1].isdigit():
            out.append(tok)
        elif tok.lower() in _PARTICLES and (out or not before):
            if out or tok.lower() != "the":
                out.append(tok)
        else:
            break
        if len(out) >= 5:
            break
    while out and out[-1].lower() in _PARTICLES:
        out.pop()
    if before:
        out.reverse()
    return out


def comparison_options(text: str) -> list[frozenset[str]]:
    """The options a comparison names: "X vs Y", "X or Y?", "compare X and Y", "Are X and
    Y both ...?". The names next to the connector are read by their capitals; without
    capitals, the two content words on each side."""
    m = _CHOICE.search(text)
    if m is None:
        for cand in _PAIR.finditer(text):
            m = cand
            break
    if m is None:
        return []
    left_name = _name_side(text[: m.start()], before=True)
    right_name = _name_side(text[m.end() :], before=False)
    if left_name and right_name:
        a = content_terms(" ".join(left_name))
        b = content_terms(" ".join(right_name))
    else:
        left = [w for w in words(text[: m.start()]) if w not in STOPWORDS and w not in _LEAD_WORDS]
        right = [w for w in words(text[m.end() :]) if w not in STOPWORDS and w not in _LEAD_WORDS]
        a, b = frozenset(left[-2:]), frozenset(right[:2])
    # Words both options share ("plan" in "Basic plan vs Pro plan") tell them apart from nothing.
    a, b = a - b, b - a
    if not a or not b:
        return []
    return [a, b]


_LEAD_WORDS = frozenset(
    [
        "compare",
        "comparing",
        "comparison",
        "difference",
        "differences",
        "between",
        "which",
        "better",
        "worse",
        "faster",
        "cheaper",
        "versus",
        "vs",
        # the comparatives of "Is A higher than B?" (the criterion, not a name)
        "higher",
        "taller",
        "longer",
        "older",
        "younger",
        "larger",
        "bigger",
        "smaller",
        "shorter",
        "heavier",
        "more",
    ]
)


_SIGNAL = re.compile(r"\b[a-z]*\d[\w.\-]*\b|\b0x[0-9a-f]+\b", re.I)
_ENVIRONMENT = frozenset(
    [
        "linux",
        "windows",
        "macos",
        "mac",
        "ubuntu",
        "debian",
        "centos",
        "rhel",
        "alpine",
        "android",
        "ios",
        "docker",
        "kubernetes",
        "k8s",
        "aws",
        "gcp",
        "azure",
        "chrome",
        "firefox",
        "safari",
        "python",
        "java",
        "node",
        "arm64",
        "x86",
        "amd64",
    ]
)


def troubleshooting_signals(text: str) -> frozenset[str]:
    """What a troubleshooting question gives a passage to match, lower-cased: tokens
    holding a digit (error codes, versions, hex values) and names of environments
    (systems, platforms, runtimes)."""
    found = {m.group(0).lower() for m in _SIGNAL.finditer(text)}
    found.update(w for w in words(text) if w in _ENVIRONMENT)
    return frozenset(found)
