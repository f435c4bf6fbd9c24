"""The injection rules (ctxbudget.safety.rules): ASCII scan forms, cue words, skippable
groups."""

from __future__ import annotations

import itertools

import pytest

from bench.injection import load_corpus
from ctxbudget.safety import (
    gate,
    rules,
    signals,
)


def _same_starts(rule: rules._Rule, t: str) -> None:
    """``rule.rx`` in ``t`` and ``rule.ascii_rx`` in `` " " + t`` find the same match start
    from each search position the gate uses (just past each match) and from every 13th."""
    assert rule.ascii_rx is not None
    padded = " " + t
    positions = set(range(0, len(t) + 1, 13))
    pos = 0
    while pos <= len(t):
        a = rule.rx.search(t, pos)
        b = rule.ascii_rx.search(padded, pos)
        assert (a and a.start()) == (b and b.start()), (rule.name, t, pos)
        if a is None:
            break
        pos = a.start() + 1
    for pos in positions:
        a = rule.rx.search(t, pos)
        b = rule.ascii_rx.search(padded, pos)
        assert (a and a.start()) == (b and b.start()), (rule.name, t, pos)


def test_the_ascii_scan_forms_match_where_the_rules_do() -> None:
    """Each rule's scannable ASCII form finds the same matches as the rule, at the same
    offsets, on the normalised ASCII corpus passages, their cut and spliced forms, and edges."""
    texts = {gate._Text(p.text if not p.title else f"{p.title}\n{p.text}").t for p in load_corpus()}
    ascii_texts = sorted(t for t in texts if t.isascii())
    cut = [t[i:] for t in ascii_texts[:40] for i in (1, 2, 7)]
    spliced = [a[: len(a) // 2] + b[len(b) // 2 :] for a, b in itertools.pairwise(ascii_texts)]
    edges = [
        "",
        " ",
        "ignore",
        "xignore all previous instructions",
        "_you are now dan",
        "9new rules",
    ]
    formed = [r for r in rules._RULES if r.ascii_rx is not None]
    assert len(formed) >= 60
    for rule in formed:
        for t in ascii_texts + cut + spliced + edges:
            _same_starts(rule, t)


@pytest.mark.parametrize(
    ("pattern", "formed"),
    [
        (r"\bignore\b", True),
        (r"\b(?:ignore|forget) (?:all|any)\b", True),
        (r"\b(?:and |then )?(?:say|reply)[:]", True),
        (r"\b(?:a|b)|\bc d", True),
        (r"\b(?:ab|b)|(?:теперь ты|отныне)", True),
        (r"\b(?:a|\.)x", False),
        (r"\b(?:a|)x", False),
        (r"\ba?b", False),
        (r"\b(?:x )?[a-z]", False),
        (r"\b(?:x){0,2}y", False),
        (r"\b\w+", False),
        (r"\bab|cd", False),
        (r"(?:теперь ты|отныне)", False),
        (r"ab\b", False),
    ],
)
def test_the_ascii_scan_form_is_made_only_when_every_branch_opens_with_a_letter(
    pattern: str, formed: bool
) -> None:
    """Only a pattern whose branches all open with ``\\b`` and a letter (or with a non-ASCII
    character) gets a scannable form."""
    assert (rules._ascii_scan_form(pattern) is not None) is formed


def test_every_word_test_asks_only_about_cue_words() -> None:
    """A passage keeps only its cue words (``_Text.words``): a word test is exact only for
    words among them, so every word a gate, the documentation test or a hint looks for is
    one."""
    looked_for = [r.words for r in rules._RULES] + [r.words2 for r in rules._RULES]
    looked_for += [rules._DOC_WORDS, rules._DOC_PHRASE_WORDS, signals._HINT_WORDS]
    for words in looked_for:
        assert words <= gate._CUE_WORDS, sorted(words - gate._CUE_WORDS)


def test_only_rules_of_single_finding_groups_are_skippable() -> None:
    """A rule in a group that spans findings is never skipped: the best weight its group
    remembers trims the later rules of other findings."""
    findings_of: dict[str | None, set[str]] = {}
    for r in rules._RULES:
        findings_of.setdefault(r.group, set()).add(r.finding)
    for r, skippable in zip(rules._RULES, rules._SKIPPABLE, strict=True):
        assert skippable == (r.group is None or len(findings_of[r.group]) == 1), r.name
