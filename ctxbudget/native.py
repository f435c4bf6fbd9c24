"""The optional compiled hot path: the ``ctxbudget_native`` extension (``native/``, Rust).

It computes a few leaf functions on ASCII text exactly as the pure-Python code does:
sentence bounds, proper names, the shingle fold, and the words, normal forms, shingle sets
and shared-shingle table of consolidation's overlaps (:mod:`ctxbudget.text`), and the
sentence analysis of :mod:`ctxbudget.extractive`; on any text, the sentence ranking of
excerpts (:func:`ctxbudget.extractive.rank_stemmed`), the hop-sentence scans of the select
stage's entity links (:mod:`ctxbudget.hops`), the table of shingles each two options of an
admission share (:func:`ctxbudget.admission.shared_shingles`) and the rough sentence count
of excerpt sizes (:func:`ctxbudget.excerpts.rough_sentence_count`); word splitting,
sentence bounds, proper names and the sentence analysis also on Latin text beyond ASCII
(every character in the table :func:`ctxbudget.text.latin_table` reads from Python's own
Unicode database; other text runs on the Python code), and whether a one-word name is only
a modifier (:func:`ctxbudget.entities.modifier_only`); a single scan of a decoded batch's bytes
for repeated keys and long integers (``scan_json``, :mod:`ctxbudget.codec`; a build without
it leaves the codec on its Python checks); exact ``cl100k_base`` token counts of ASCII and Latin
text (``PieceCounter``, for :class:`ctxbudget.tokens.TiktokenCounter`: tiktoken counts the
rest); and, on any text, the injection gate's cue words
and rule gates and its sentence model's scores (:mod:`ctxbudget.safety`, with the tables and
weights the Python side loaded). That code stays the reference and runs
whenever the extension is absent, is of another interface version, or is switched off with
``CTXBUDGET_NATIVE=0``. Either way the packs and traces are the same bytes
(``tests/e2e/test_native_fidelity.py`` packs every test set both ways,
``tests/e2e/test_native_gate_fidelity.py`` compares every gate verdict on the development
data). A missing or unusable extension is logged once, as a warning, when this module is
first imported.

The switch is read once, at import, like ``CTXBUDGET_BLAS_THREADS`` (:mod:`ctxbudget.blas`):
a process runs one path from start to end.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol, cast

#: ``0`` forces the pure-Python path; anything else (or unset) uses the extension if present.
NATIVE_ENV = "CTXBUDGET_NATIVE"
#: The interface version this code expects of the extension (its ``API_VERSION``).
API_VERSION = 8
MODULE = "ctxbudget_native"

_log = logging.getLogger("ctxbudget.native")


#: A character table of the Latin text the compiled path reads beyond ASCII
#: (:func:`ctxbudget.text.latin_table`): ``(code point, flags, code point of its lower case)``.
LatinTable = Sequence[tuple[int, int, int]]
#: A sentence analysis: per sentence its stemmed terms, whether it holds a protected fact,
#: and its words space-padded.
Analysis = tuple[tuple[frozenset[str], ...], tuple[bool, ...], tuple[str, ...]]


class SentenceSplitter(Protocol):
    def split(self, text: str) -> list[tuple[int, int]]: ...

    def split_latin(self, text: str) -> list[tuple[int, int]] | None: ...


class NameFinder(Protocol):
    def names(self, text: str) -> frozenset[str]: ...

    def names_latin(self, text: str) -> frozenset[str] | None: ...

    def modifier_only(self, cap: str, text: str) -> bool | None: ...


class SentenceAnalyser(Protocol):
    def analyse(self, text: str, bounds: Sequence[tuple[int, int]]) -> Analysis: ...

    def analyse_latin(self, text: str, bounds: Sequence[tuple[int, int]]) -> Analysis | None: ...


class SentenceRanker(Protocol):
    def rank(
        self,
        stems: Sequence[frozenset[str]],
        protected: Sequence[bool],
        padded: Sequence[str],
        qstems: frozenset[str],
        lead: bool,
        links: Sequence[str],
    ) -> tuple[list[int], list[int]] | None: ...

    def hop_sentences(
        self,
        stems: Sequence[frozenset[str]],
        padded: Sequence[str],
        qstems: frozenset[str],
        keys: Sequence[str],
    ) -> list[str] | None: ...

    def names_beside_query(
        self,
        stems: Sequence[frozenset[str]],
        padded: Sequence[str],
        qstems: frozenset[str],
        key: str,
    ) -> bool | None: ...


class WordSplitter(Protocol):
    def words(self, text: str) -> list[str] | None: ...


class RuleGates(Protocol):
    def read(self, t: str, other_scripts: bool) -> tuple[frozenset[str], list[int]]: ...


class SentenceScorer(Protocol):
    def best(self, t: str) -> int | None: ...

    def weak_best(self, t: str) -> int | None: ...


class PieceCounter(Protocol):
    def count(self, text: str) -> int | None: ...


class NativeModule(Protocol):
    """What :mod:`ctxbudget.text` uses of the extension (ASCII input only)."""

    API_VERSION: int

    def fold_windows(self, token_lists: Sequence[Sequence[str]], size: int) -> bytes: ...

    def overlaps(
        self,
        texts: list[str],
        known: list[frozenset[int] | None],
        tokens: list[list[str] | None],
        size: int,
        dense_texts: int,
        dense_cells: int,
    ) -> tuple[list[str | None], list[int], list[frozenset[int] | None], bytearray | None]: ...

    def SentenceSplitter(
        self, abbreviations: list[str], table: LatinTable = ()
    ) -> SentenceSplitter: ...

    def SentenceAnalyser(
        self,
        not_terms: list[str],
        protected_words: list[str],
        contractions: list[str],
        table: LatinTable = (),
    ) -> SentenceAnalyser: ...

    def NameFinder(
        self, stopwords: list[str], min_chars: int, scan_chars: int, table: LatinTable = ()
    ) -> NameFinder: ...

    def WordSplitter(self, table: LatinTable) -> WordSplitter: ...

    def rough_sentence_count(self, text: str) -> int | None: ...

    def shared_shingles(self, sets: list[frozenset[int]]) -> list[list[int]] | None: ...

    def SentenceRanker(
        self, protected_bonus: float, lead_bonus: float, link_bonus: float, coverage_picks: int
    ) -> SentenceRanker: ...

    def PieceCounter(self, ranks: dict[bytes, int]) -> PieceCounter: ...


def _load() -> tuple[NativeModule | None, str]:
    """The extension and why, or None and why not."""
    if os.environ.get(NATIVE_ENV, "").strip() == "0":
        return None, f"{NATIVE_ENV}=0"
    try:
        module = cast(NativeModule, importlib.import_module(MODULE))
    except ImportError as e:
        _log.warning(
            "ctxbudget: the compiled hot path (%s) is not installed (%s); packing runs on the "
            "pure-Python path: the same packs, slower. Install it with `pip install ./native` "
            "(Rust and cargo needed; ./dev does it), or set %s=0 to choose the fallback.",
            MODULE,
            e,
            NATIVE_ENV,
        )
        return None, "not installed"
    found = getattr(module, "API_VERSION", None)
    if found != API_VERSION:
        _log.warning(
            "ctxbudget: %s has interface version %s, this ctxbudget needs %s; packing runs on "
            "the pure-Python path (rebuild it: `pip install ./native`).",
            MODULE,
            found,
            API_VERSION,
        )
        return None, f"interface version {found}, {API_VERSION} needed"
    return module, "loaded"


NATIVE, NATIVE_STATUS = _load()


def native_path() -> str:
    """``native`` or ``python``: the path this process packs on (for benchmarks and logs)."""
    return "native" if NATIVE is not None else "python"


#: tiktoken's pre-tokenizer of ``cl100k_base``, the one the compiled counter reproduces on
#: the characters it knows (an encoding with any other expression is counted by tiktoken alone).
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
    r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

_piece_counters: dict[str, PieceCounter] = {}
_piece_lock = threading.Lock()


def piece_counter(encoding: Any) -> PieceCounter | None:
    """The compiled exact counter of a tiktoken ``encoding`` (its ``count`` answers None for
    text it leaves to tiktoken), or None: no extension, or an encoding of another pre-tokenizer.
    The rank table is copied once per encoding name and process (it is the encoding's own
    data, the same for every text); counts themselves are never kept here."""
    if NATIVE is None or getattr(encoding, "_pat_str", None) != CL100K_PATTERN:
        return None
    name = str(encoding.name)
    with _piece_lock:
        found = _piece_counters.get(name)
        if found is None:
            found = NATIVE.PieceCounter(dict(encoding._mergeable_ranks))
            _piece_counters[name] = found
    return found
