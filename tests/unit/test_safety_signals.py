"""The decoding signals of the injection gate (ctxbudget.safety.signals)."""

from __future__ import annotations

import pytest

from ctxbudget.safety import (
    gate,
    rules,
    signals,
)


@pytest.mark.parametrize(
    ("text", "hints"),
    [
        ("rot13: uryyb", {"rot"}),
        ("ROT-13 it", {"rot"}),
        ("a caesar shift", {"caesar"}),
        ("decode this; decoding that", {"decode", "decoding"}),
        ("decipher (Reversed)", {"decipher", "reversed"}),
        ("read it backwards, in reverse", {"backwards", "reverse"}),
        ("«hex» or hexadecimal", {"hex", "hexadecimal"}),
        ("rotate the hexagon; decoder", set()),
    ],
)
def test_the_decoding_hints_are_words_of_the_passage(text: str, hints: set[str]) -> None:
    """Every match of a decoding hint holds one of the hint words as a whole word."""
    x = gate._Text(text)
    assert x.words & signals.HINT_WORDS == hints
    for rx in (signals._ROT13_HINT, signals._REVERSE_HINT, signals._HEX_HINT):
        for m in rx.finditer(x.t):
            assert set(rules._word_list(m.group(0))) & signals.HINT_WORDS
