"""The compiled leaf functions give exactly what their pure-Python references give."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxbudget import extractive, text
from ctxbudget.native import NATIVE, NativeModule
from ctxbudget.text import ShingleCache, words

pytestmark = pytest.mark.skipif(
    NATIVE is None, reason="the compiled path is off or absent (tests/e2e checks it is built)"
)

#: ASCII text made of the pieces sentence and name rules look at, so that the examples hit
#: abbreviations, initials, closing quotes, particles and odd whitespace often.
_PIECES = st.sampled_from(
    [
        "Dr.",
        "St.",
        "U.S.",
        "e.g.",
        "i.e.",
        "M.",
        "Florence",
        "Sterling",
        "of",
        "the",
        "de",
        "del",
        "von",
        "van",
        "upon",
        "on",
        "y",
        "University",
        "McDonald's",
        "O'Neil",
        "Jean-Luc",
        "X",
        "AB",
        "ABCDEF",
        "abc.",
        "ab.c",
        "1990.",
        "42",
        "it",
        "And",
        "The",
        ".",
        "!",
        "?",
        '."',
        ".)",
        "']",
        "(",
        "[",
        '"',
        "'",
        "/",
        "-",
        "_",
        ":",
        ";",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\t",
        "\r",
        "\x0b",
        "\x0c",
        "\x1c",
        "\x1f",
    ]
)
_ASCII = st.lists(_PIECES, max_size=40).map("".join) | st.text(
    st.characters(min_codepoint=0, max_codepoint=127), max_size=200
)


def _native() -> NativeModule:
    assert NATIVE is not None
    return NATIVE


@settings(max_examples=600, deadline=None)
@given(_ASCII)
@example("He met Dr. Florence M. Sterling. Then U.S. troops left!\n\nEnd")
@example("x ab.c.d. Next")
def test_sentence_bounds_match_the_reference(sample: str) -> None:
    """The compiled sentence splitter cuts ASCII text where the regex reference cuts it."""
    assert text.sentences(sample) == text.sentences_reference(sample)


@settings(max_examples=600, deadline=None)
@given(_ASCII)
@example("After Hall, the University of Southern California met Jean-Luc de la Cruz.")
@example("McDonald's and O'Neil went to the Bank of  \n America; X Y Z")
def test_names_match_the_reference(sample: str) -> None:
    """The compiled name finder gives the reference's proper names of ASCII text."""
    got = text.name_phrases.__wrapped__(sample)
    assert isinstance(got, frozenset)
    assert got == text.name_phrases_reference(sample)


def test_names_read_only_the_scanned_head() -> None:
    """A name past the scanned head is not read by either path (the head bound is shared)."""
    sample = "x " * (text.NAME_SCAN_CHARS // 2) + "Natalie Wood"
    assert _native().NameFinder(sorted(text.STOPWORDS), 4, text.NAME_SCAN_CHARS).names(
        sample
    ) == text.name_phrases_reference(sample)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=120), min_size=1, max_size=6), st.integers(1, 5))
def test_shingle_windows_match_the_numpy_fold(texts: list[str], size: int) -> None:
    """The compiled fold gives the ids numpy's fold gives, on any words, ASCII or not."""
    lists = [words(t) for t in texts]
    total = sum(map(len, lists))
    if total < size:
        return
    ids = np.fromiter(
        (ShingleCache().word_ids[w] for t in lists for w in t), dtype=np.uint64, count=total
    )
    got = np.frombuffer(_native().fold_windows(lists, size), dtype=np.uint64)
    assert np.array_equal(got, text._fold(ids, size))


def test_non_ascii_text_is_refused_by_the_compiled_splitter() -> None:
    """Only ASCII reaches the compiled functions; anything else is an error, never a guess."""
    splitter = _native().SentenceSplitter([])
    with pytest.raises(ValueError, match="ASCII"):
        splitter.split("Café. Next")


def test_the_loaded_extension_has_this_interface_version() -> None:
    """The extension in use speaks the interface version the loader asks for."""
    module = importlib.import_module("ctxbudget_native")
    assert module.API_VERSION == importlib.import_module("ctxbudget.native").API_VERSION


_SENTENCE_WORDS = st.sampled_from(
    [
        "not",
        "only",
        "if",
        "at",
        "least",
        "most",
        "more",
        "than",
        "March",
        "mayor",
        "mar1",
        "Decembers",
        "directors",
        "writes",
        "founded",
        "rings",
        "kg",
        "the",
        "a",
        "B",
        "42",
        "x9",
        "50%",
        "can't",
        "DON'T",
        "isn't",
        "it's",
        "o'clock",
        ".",
        ", ",
        " ",
        "\n",
        "!",
    ]
)


@settings(max_examples=600, deadline=None)
@given(st.lists(_SENTENCE_WORDS, max_size=40).map(" ".join) | _ASCII)
@example("Not before 5 March. The directors met at least twice; it isn't 50% off.")
def test_sentence_analysis_matches_the_reference(sample: str) -> None:
    """The compiled analysis of ASCII text gives the reference's stems, facts and words."""
    bounds = text.sentences(sample)
    flat = text.word_skeleton(sample)
    assert flat is not None
    assert extractive.analyse(sample, bounds=bounds) == extractive._analyse_ascii(
        sample, bounds, flat, extractive.stem
    )
