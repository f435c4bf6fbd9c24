"""The entity helpers' fast searches find exactly what their plain definitions match."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxbudget.entities import modifier_only, word_uses
from ctxbudget.text import STOPWORDS


def _plain_uses(word: str) -> re.Pattern[str]:
    """The definition: the capitalised word, no word character on either side, then the
    word that follows it on its line."""
    return re.compile(rf"(?<!\w){re.escape(word[:1].upper() + word[1:])}(?!\w)[ \t]*(\w*)")


def _plain_modifier_only(word: str, text: str) -> bool:
    uses = [m.group(1) for m in _plain_uses(word).finditer(text)]
    return bool(uses) and all(w[:1].islower() and w not in STOPWORDS for w in uses)


_WORDS = st.sampled_from(["canadian", "africa", "x", "é", "ß", "o'neil", "a.b", "ǆ", "_", ""])
_PIECES = st.sampled_from(
    [
        "Canadian",
        "canadian",
        "CANADIAN",
        "Africa",
        "Ǆ",
        "É",
        "SS",
        "Ss",
        "O'neil",
        "A.b",
        "X",
        "_",
        "author",
        "and",
        "the",
        " ",
        "\t",
        "\n",
        ",",
        ".",
        "-",
        "x",
        "1",
        "é",
    ]
)
_TEXTS = st.lists(_PIECES, max_size=30).map("".join)


@settings(max_examples=600, deadline=None)
@given(word=st.one_of(_WORDS, st.text(max_size=4)), text=st.one_of(_TEXTS, st.text(max_size=40)))
@example(word="canadian", text="xCanadian Canadian author")
@example(word="canadian", text="Canadian Canadian author")
@example(word="x", text="XX X y")
@example(word="", text="a  b\tc ")
@example(word="ab", text="Abab Ab\tAb_ Ab")
def test_word_uses_match_the_plain_pattern(word: str, text: str) -> None:
    """The uses found by searching for the word are the plain pattern's matches, in order."""
    assert word_uses(word, text) == [m.group(1) for m in _plain_uses(word).finditer(text)]
    assert modifier_only(word, text) == _plain_modifier_only(word, text)
