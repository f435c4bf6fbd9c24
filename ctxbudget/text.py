"""Small, deterministic text helpers shared by the stages (no randomness, no hashing seeds)."""

from __future__ import annotations

import re
import sys
import unicodedata
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import cast

import numpy as np

from ctxbudget.memo import BoundedMemo
from ctxbudget.native import NATIVE

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "being",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "done",
        "for",
        "from",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "me",
        "my",
        "no",
        "nor",
        "not",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "any",
        "because",
        "before",
        "below",
        "between",
        "both",
        "during",
        "each",
        "few",
        "more",
        "most",
        "further",
        "here",
        "just",
        "s",
        "t",
        "don",
        "now",
        "also",
        "may",
        "might",
        "must",
        "shall",
        "get",
        "got",
    ]
)


#: ASCII bytes: letters and digits stay, everything else becomes a space. On ASCII text
#: ``[^\W_]`` is exactly ``[A-Za-z0-9]``, so translating and splitting gives the same words as
#: the regex, about three times faster.
_ASCII_WORD_BYTES = bytes(b if chr(b).isalnum() else 0x20 for b in range(128)) + b" " * 128


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits), in order. On the compiled path, Latin
    text beyond ASCII is split natively (:data:`LATIN_TABLE`); :func:`words_reference` gives
    the same words."""
    flat = word_skeleton(text)
    if flat is not None:
        return flat.split()
    if _WORDS is not None:
        found = _WORDS.words(text)
        if found is not None:
            return found
    return _WORD.findall(text.lower())


def words_reference(text: str) -> list[str]:
    """:func:`words` in pure Python: the reference. A change here needs the same change in
    ``native/src/latin.rs``; ``tests/property/test_native_paths.py`` compares the two."""
    flat = word_skeleton(text)
    return flat.split() if flat is not None else _WORD.findall(text.lower())


def word_skeleton(text: str) -> str | None:
    """For ASCII text, the text lower-cased with every character but letters and digits made
    a space: the same length, so ``words(text[s:e]) == word_skeleton(text)[s:e].split()``
    for any offsets. None for other text."""
    if not text.isascii():
        return None
    return text.lower().encode("ascii").translate(_ASCII_WORD_BYTES).decode("ascii")


#: Stopwords and the one-letter ASCII words: what is never a term in ASCII text.
NOT_TERMS = STOPWORDS | frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def terms_of(tokens: Iterable[str]) -> frozenset[str]:
    """The distinct non-stopword terms among ``tokens`` (the output of :func:`words`):
    words of two characters or more, and single digits."""
    distinct = frozenset(tokens).difference(NOT_TERMS)
    if "".join(distinct).isascii():
        # ASCII words are letters and digits: the one-character words left are digits.
        return distinct
    return frozenset(w for w in distinct if len(w) > 1 or w.isdigit())


def content_terms(text: str) -> frozenset[str]:
    """The distinct non-stopword terms of a text (used for query coverage)."""
    return terms_of(words(text))


def normalize(text: str, tokens: Sequence[str] | None = None) -> str:
    """Canonical form for exact-duplicate detection: NFKC, case-folded, words only.

    ``tokens`` may pass ``words(text)`` when the caller has it: on ASCII text (and on any
    text NFKC leaves as it is and whose case fold lower-cases as it does) the canonical form
    is those words joined.
    """
    if text.isascii():
        return " ".join(words(text) if tokens is None else tokens)
    if (
        tokens is not None
        and unicodedata.is_normalized("NFKC", text)
        and text.casefold().lower() == text.lower()
    ):
        # NFKC leaves the text as it is and case folding then lower-casing gives what
        # lower-casing gives: the canonical words are ``words(text)``, already at hand
        return " ".join(tokens)
    return " ".join(words(unicodedata.normalize("NFKC", text).casefold()))


_SHINGLE_MULT = 1_000_003
_SHINGLE_MASK = 0xFFFFFFFFFFFF


class _WordIds(dict[str, int]):
    """crc32 of each word's UTF-8 bytes, remembered (a lookup is cheaper than encoding and
    hashing again); emptied when it grows past a vocabulary's worth of words. Words over
    ``longest`` characters (tokens, hashes, encoded blobs: rarely seen twice) are hashed
    each time instead, so the memo stays under about 40 MB whatever the words."""

    limit = 1 << 18
    longest = 32

    def __missing__(self, word: str) -> int:
        value = zlib.crc32(word.encode("utf-8"))
        if len(word) <= self.longest:
            if len(self) >= self.limit:
                self.clear()
            self[word] = value
        return value


def _word_ids(tokens: Sequence[str], ids: _WordIds) -> list[int]:
    return list(map(ids.__getitem__, tokens))


def _fold(ids: np.ndarray, size: int) -> np.ndarray:
    """The shingle id of every window of ``size`` consecutive word ids.

    The id of ``w_0 .. w_{k-1}`` is the fold ``h = (h * 1000003 + crc32(w_j)) mod 2**48``;
    numpy's wrapping uint64 arithmetic is exact modulo 2**48 (a divisor of 2**64), so the
    fold can be taken once over a whole array of ids.
    """
    m = len(ids) - size + 1
    acc = ids[:m].copy()
    for j in range(1, size):
        acc *= np.uint64(_SHINGLE_MULT)
        acc += ids[j : j + m]
    acc &= np.uint64(_SHINGLE_MASK)
    return acc


def _small_shingles(ids: Sequence[int], size: int) -> frozenset[int]:
    """The same ids as :func:`_fold`, in plain Python (cheaper for a few dozen words)."""
    if size == 1:
        return frozenset(ids)
    if size == 3:
        k1, k2 = _SHINGLE_MULT, _SHINGLE_MULT * _SHINGLE_MULT
        triples = zip(ids, ids[1:], ids[2:], strict=False)
        return frozenset([(a * k2 + b * k1 + c) & _SHINGLE_MASK for a, b, c in triples])
    out = set()
    for i in range(len(ids) - size + 1):
        h = 0
        for j in range(size):
            h = (h * _SHINGLE_MULT + ids[i + j]) & _SHINGLE_MASK
        out.add(h)
    return frozenset(out)


def shingles(tokens: Sequence[str], size: int, cache: ShingleCache | None = None) -> frozenset[int]:
    """Stable integer ids of the word ``size``-grams of ``tokens`` (crc32-based, seed-free).

    A text shorter than ``size`` words yields its single whole-text shingle. ``cache``
    remembers word ids across calls (the result is the same with or without it).
    """
    ids = cache.word_ids if cache is not None else _WordIds()
    n = len(tokens)
    if not n:
        return frozenset()
    size = min(size, n)
    if n < 48 or size == 1:
        return _small_shingles(_word_ids(tokens, ids), size)
    arr = np.fromiter(map(ids.__getitem__, tokens), dtype=np.uint64, count=n)
    return frozenset(_fold(arr, size).tolist())


def shingles_of_many(
    token_lists: Sequence[Sequence[str]], size: int, cache: ShingleCache | None = None
) -> list[frozenset[int]]:
    """``[shingles(t, size) for t in token_lists]``, with one numpy fold for all of them."""
    cache = cache if cache is not None else ShingleCache.throwaway()
    lens = [len(t) for t in token_lists]
    if sum(lens) < size or size == 1:
        return [shingles(t, size, cache) for t in token_lists]
    return _fold_many(token_lists, lens, size, cache)[0]


def _fold_many(
    token_lists: Sequence[Sequence[str]], lens: list[int], size: int, cache: ShingleCache
) -> tuple[list[frozenset[int]], np.ndarray]:
    """The shingle sets, and the folded windows of all the words.

    One fold over all the words: the windows that straddle two texts are computed and never
    used in a set. Needs ``sum(lens) >= size``.
    """
    if NATIVE is not None and all(type(t) is list for t in token_lists):
        folded = np.frombuffer(NATIVE.fold_windows(token_lists, size), dtype=np.uint64)
    else:
        flat = chain.from_iterable(token_lists)
        ids = np.fromiter(map(cache.word_ids.__getitem__, flat), dtype=np.uint64, count=sum(lens))
        folded = _fold(ids, size)
    values = folded.tolist()
    sets: list[frozenset[int]] = []
    at = 0
    for tokens, n in zip(token_lists, lens, strict=True):
        if n >= size:
            sets.append(frozenset(values[at : at + n - size + 1]))
        else:
            sets.append(shingles(tokens, size, cache))
        at += n
    return sets, folded


def _set_incidence(
    sets: Sequence[frozenset[int]], which: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """The shingles of ``sets[u]`` for each ``u`` of ``which`` (uint64), with ``u`` (intp)."""
    lens = [len(sets[u]) for u in which]
    grams = np.fromiter(
        chain.from_iterable(sets[u] for u in which), dtype=np.uint64, count=sum(lens)
    )
    return grams, np.repeat(np.asarray(which, dtype=np.intp), lens)


@dataclass(frozen=True, slots=True)
class ShingleIndex:
    """The shingle sets of several texts, and which shingles more than one of them holds."""

    sets: list[frozenset[int]]
    #: shingle -> how many of the texts hold it, for the shingles two texts or more hold
    repeated: dict[int, int]
    #: per text, its shingles that another text holds too
    shared: list[set[int]]


def index_sets(sets: list[frozenset[int]]) -> ShingleIndex:
    """The :class:`ShingleIndex` of shingle sets already made (set operations only)."""
    seen: set[int] = set()
    again: set[int] = set()
    for s in sets:
        again |= seen & s
        seen |= s
    shared = [set(s & again) for s in sets]
    repeated: dict[int, int] = {}
    for m in shared:
        for g in m:
            repeated[g] = repeated.get(g, 0) + 1
    return ShingleIndex(sets, repeated, shared)


#: The dense table of shared shingles is made for at most this many texts, and when the
#: texts times their shingles stay within :data:`DENSE_CELLS` (a table of 512 KB at most).
DENSE_TEXTS = 256
DENSE_CELLS = 1 << 16


def common_shingles(sets: Sequence[frozenset[int]]) -> np.ndarray | None:
    """How many shingles each two of ``sets`` share: ``out[a, b] == len(sets[a] & sets[b])``
    (float64, exact; the diagonal holds the set sizes), or None when the sets are too many
    or too large for a dense table (see :data:`DENSE_TEXTS` and :data:`DENSE_CELLS`)."""
    if len(sets) > DENSE_TEXTS:
        return None
    return _common_counts(*_set_incidence(sets, range(len(sets))), len(sets))


def _common_counts(grams: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray | None:
    """:func:`common_shingles` of ``n`` texts from their (shingle, text) incidences, which
    may repeat: one 0/1 matrix of texts by distinct shingles times its transpose. A row of
    ``n`` marks a shingle of no text (it counts for none)."""
    total = len(grams)
    if n > DENSE_TEXTS or n * total > DENSE_CELLS:
        return None
    if not total:
        return np.zeros((n, n))
    order = grams.argsort()
    grams = grams[order]
    new = np.empty(total, dtype=bool)
    new[0] = False
    np.not_equal(grams[1:], grams[:-1], out=new[1:])
    column = np.cumsum(new)
    held = np.zeros((n + 1, int(column[-1]) + 1))
    held[rows[order], column] = 1.0
    texts = held[:n]
    out: np.ndarray = texts @ texts.T
    return out


def _window_rows(
    folded: np.ndarray, lens: list[int], size: int, rows_of: np.ndarray | None, n: int
) -> np.ndarray:
    """The row of each window :func:`_fold_many` folded, for :func:`_common_counts`: its
    text's row (``rows_of[text]``, or the text's position without ``rows_of``), or ``n``
    for a window that straddles two texts (as every window of a text shorter than ``size``
    words does)."""
    owner = np.repeat(np.arange(len(lens), dtype=np.intp), lens)
    first = owner[: len(folded)]
    inside = first == owner[size - 1 :]
    return np.where(inside, first if rows_of is None else rows_of[first], n)


@dataclass(frozen=True, slots=True)
class TextOverlaps:
    """What finding copies among texts needs: their shingle sets, their :func:`normalize`
    forms, and :func:`common_shingles` of the sets."""

    sets: list[frozenset[int]]
    norms: list[str]
    common: np.ndarray | None


def _weight(text: str, value: frozenset[int]) -> int:
    """Bytes an entry keeps alive: the text, the set's table and its ints (up to 2**48,
    32 bytes each), and the entry itself."""
    return sys.getsizeof(text) + sys.getsizeof(value) + 32 * len(value) + 200


class ShingleCache:
    """What shingling remembers, owned by the stages that shingle (one per pipeline; the
    consolidator and the selector of a fused pipeline share it): the word ids and the shingle
    sets of the last couple of thousand texts. Both are pure functions of their keys and
    bounded, so a cache can only skip work, never change a result.

    Consolidation shingles every passage (and records the sets here) and selection shingles
    the survivors again: in one process the second time is a lookup.
    """

    #: 2,048 sets or 32 MiB, whichever is reached first (ordinary passages: about 18 MB when
    #: full, so the count bounds them; the bytes bound long ones).
    MAX_SETS = 2048
    MAX_BYTES = 32 * 1024 * 1024

    def __init__(self, *, max_sets: int = MAX_SETS, max_bytes: int = MAX_BYTES) -> None:
        self.word_ids = _WordIds()
        #: ``(text, size) -> shingle set``; an entry over an eighth of the byte bound (what
        #: :func:`_weight` counts: the text and the set) is not remembered.
        self.sets: BoundedMemo[tuple[str, int], frozenset[int]] = BoundedMemo(
            max_entries=max_sets, max_bytes=max_bytes, max_entry_bytes=max_bytes // 8
        )

    @classmethod
    def throwaway(cls) -> ShingleCache:
        """A cache for one call (no sets remembered)."""
        return cls(max_sets=1, max_bytes=1)

    def _remember(
        self, texts: Sequence[str], at: Sequence[int], size: int, sets: Sequence[frozenset[int]]
    ) -> None:
        """Remember the shingle sets ``sets`` of ``texts[i]`` for each ``i`` in ``at``."""
        keys = [(texts[i], size) for i in at]
        self.sets.put_many(keys, sets, [_weight(k[0], v) for k, v in zip(keys, sets, strict=True)])

    def text_shingles(self, text: str, size: int) -> frozenset[int]:
        """``shingles(words(text), size)``, remembered."""
        found = self.sets.get((text, size))
        if found is None:
            found = shingles(words(text), size, self)
            self.sets.put((text, size), found, _weight(text, found))
        return found

    def text_shingles_many(self, texts: Sequence[str], size: int) -> list[frozenset[int]]:
        """``[self.text_shingles(t, size) for t in texts]``; the ones not remembered are
        shingled together."""
        found = [self.sets.get((t, size)) for t in texts]
        missing = [i for i, f in enumerate(found) if f is None]
        if missing:
            fresh = shingles_of_many([words(texts[i]) for i in missing], size, self)
            self._remember(texts, missing, size, fresh)
            for i, f in zip(missing, fresh, strict=True):
                found[i] = f
        return [f for f in found if f is not None]

    def text_overlaps(self, texts: Sequence[str], size: int) -> TextOverlaps:
        """Shingle sets, :func:`normalize` forms and :func:`common_shingles` of ``texts``.

        A text whose set is remembered is not shingled again; the sets made are remembered.
        On the compiled path the ASCII texts are split, shingled and normalised natively and
        the table is counted there; :meth:`text_overlaps_reference` gives the same values
        and remembers the same sets."""
        if NATIVE is None or size < 1:
            return self.text_overlaps_reference(texts, size)
        n = len(texts)
        found = [self.sets.get((t, size)) for t in texts]
        tokens = [None if t.isascii() else words(t) for t in texts]
        norms, _, made, table = NATIVE.overlaps(
            list(texts), found, tokens, size, DENSE_TEXTS, DENSE_CELLS
        )
        for i, tok in enumerate(tokens):
            if tok is not None:
                norms[i] = normalize(texts[i], tok)
        # every text has its set: remembered, or made natively
        pairs = zip(found, made, strict=True)
        sets = cast(list[frozenset[int]], [m if f is None else f for f, m in pairs])
        missing = [i for i, f in enumerate(found) if f is None]
        if missing:
            self._remember(texts, missing, size, [sets[i] for i in missing])
        common = None if table is None else np.frombuffer(table, np.float64).reshape(n, n)
        return TextOverlaps(sets, cast(list[str], norms), common)

    def text_overlaps_reference(self, texts: Sequence[str], size: int) -> TextOverlaps:
        """:meth:`text_overlaps` in pure Python: the reference. A change here needs the same
        change in ``native/src/overlaps.rs``; ``tests/property/test_native_paths.py``
        compares the two.

        A text whose set is remembered is not shingled again (nor split into words, unless
        its normal form needs them: ASCII text); the sets made are remembered."""
        n = len(texts)
        found = [self.sets.get((t, size)) for t in texts]
        tokens: list[list[str] | None] = [
            words(t) if f is None or t.isascii() else None
            for t, f in zip(texts, found, strict=True)
        ]
        missing = [i for i, f in enumerate(found) if f is None]
        dense = n <= DENSE_TEXTS
        # (shingle, row) incidences for the table: every window folded now, and the sets of
        # the other texts (remembered, or too short to fold)
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        from_sets = [i for i, f in enumerate(found) if f is not None]
        if missing:
            lists = [tokens[i] or [] for i in missing]
            lens = [len(t) for t in lists]
            if sum(lens) >= size > 1:
                fresh, folded = _fold_many(lists, lens, size, self)
                if dense:
                    rows_of = np.asarray(missing, dtype=np.intp) if from_sets else None
                    parts.append((folded, _window_rows(folded, lens, size, rows_of, n)))
                    from_sets.extend(i for i, k in zip(missing, lens, strict=True) if 0 < k < size)
            else:
                fresh = [shingles(t, size, self) for t in lists]
                from_sets = list(range(n))
            self._remember(texts, missing, size, fresh)
            for i, f in zip(missing, fresh, strict=True):
                found[i] = f
        sets = [f for f in found if f is not None]
        norms = [normalize(t, tok) for t, tok in zip(texts, tokens, strict=True)]
        if not dense:
            return TextOverlaps(sets, norms, None)
        if from_sets or not parts:
            parts.append(_set_incidence(sets, from_sets))
        if len(parts) == 1:
            grams, rows = parts[0]
        else:
            grams = np.concatenate([g for g, _ in parts])
            rows = np.concatenate([r for _, r in parts])
        return TextOverlaps(sets, norms, _common_counts(grams, rows, n))


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    """Jaccard overlap of two shingle sets; 0.0 when either is empty."""
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def containment(a: frozenset[int], b: frozenset[int]) -> float:
    """Share of the smaller set found in the larger one."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


#: Where a sentence may end: ``[.!?]`` then closing quotes or brackets then spaces, or a run
#: of line breaks. The pattern opens with one character class, which the regex engine scans
#: for (a pattern opening with a look-behind is tried at every position).
_SENTENCE_END = re.compile(r"[.!?\n](?:(?<=\n)\n*|[\"')\]]*\s+)")
#: A period after one of these words (or after a single letter: an initial) ends no sentence.
_ABBREVIATIONS = frozenset(
    [
        "c",
        "ca",
        "cf",
        "co",
        "corp",
        "dr",
        "e.g",
        "etc",
        "gen",
        "gov",
        "i.e",
        "inc",
        "jr",
        "lit",
        "lt",
        "ltd",
        "mr",
        "mrs",
        "ms",
        "mt",
        "no",
        "nos",
        "op",
        "prof",
        "rev",
        "sr",
        "st",
        "sgt",
        "vol",
        "vols",
        "vs",
        "u.s",
        "u.k",
        "fl",
        "b",
        "d",
    ]
)
_LAST_WORD = re.compile(r"(?:^|[\s(\[\"'/\u2013-])([A-Za-z](?:\.[A-Za-z])*|[A-Za-z]{2,5})\.$")


def _abbreviated(piece: str) -> bool:
    m = _LAST_WORD.search(piece[-12:])
    if m is None:
        return False
    word = m.group(1)
    return len(word) == 1 or "." in word or word.lower() in _ABBREVIATIONS


def sentences(text: str) -> list[tuple[int, int]]:
    """Sentence boundaries as (start, end) character offsets covering the non-blank text.

    A period after an initial ("Florence M. Sterling") or a common abbreviation ("c.",
    "St.", "U.S.") does not end a sentence; a line break always does.
    """
    if _SPLITTER is not None:
        if text.isascii():
            return _SPLITTER.split(text)
        found = _SPLITTER.split_latin(text)
        if found is not None:
            return found
    return sentences_reference(text)


def sentences_reference(text: str) -> list[tuple[int, int]]:
    """:func:`sentences` in pure Python: the reference. A change here (or to the patterns
    and abbreviations it reads) needs the same change in ``native/src/lib.rs``;
    ``tests/property/test_native_paths.py`` compares the two."""
    out: list[tuple[int, int]] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        end = m.start()
        if text[end] != "\n":
            end += 1  # the sentence keeps its closing mark
            if "\n" not in m.group() and _abbreviated(text[start:end]):
                continue
        _append_trimmed(text, start, end, out)
        start = m.end()
    _append_trimmed(text, start, len(text), out)
    return out


#: The ranges of code points the compiled path reads beyond ASCII (:func:`latin_table`):
#: Latin-1, Latin Extended-A and -B, Latin Extended Additional, general punctuation and
#: currency signs.
LATIN_RANGES = ((0, 0x250), (0x1E00, 0x1F00), (0x2000, 0x2070), (0x20A0, 0x20D0))


def latin_table() -> list[tuple[int, int, int]]:
    """What the reference's patterns and ``str`` methods see of each character of
    :data:`LATIN_RANGES`, read from this interpreter's own Unicode database, for the
    compiled path: ``(code point, flags, code point of its lower case)`` with flags 2
    (``\\w``), 4 (``\\d``), 8 (``\\s``, ``str.isspace``), 16 (``str.isdigit``) and 32
    (``str.islower``). A character whose lower case is not one character of the ranges is
    left out (text holding it runs on the reference)."""
    inside = {c for lo, hi in LATIN_RANGES for c in range(lo, hi)}
    word, digit, space = re.compile(r"\w"), re.compile(r"\d"), re.compile(r"\s")
    out = []
    for c in sorted(inside):
        ch = chr(c)
        low = ch.lower()
        if len(low) != 1 or ord(low) not in inside or ch.isspace() != bool(space.match(ch)):
            continue
        flags = (
            (2 if word.match(ch) else 0)
            | (4 if digit.match(ch) else 0)
            | (8 if ch.isspace() else 0)
            | (16 if ch.isdigit() else 0)
            | (32 if ch.islower() else 0)
        )
        out.append((c, flags, ord(low)))
    return out


#: The table the compiled path reads Latin text with (empty without the compiled path).
LATIN_TABLE = latin_table() if NATIVE is not None else []
_WORDS = NATIVE.WordSplitter(LATIN_TABLE) if NATIVE is not None else None
_SPLITTER = (
    NATIVE.SentenceSplitter(sorted(_ABBREVIATIONS), LATIN_TABLE) if NATIVE is not None else None
)


def _append_trimmed(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        out.append((start, end))


#: A run of capitalised words ("Natalie Wood", "University of Southern California"): words
#: opening with an upper-case letter, joined by spaces and at most one name particle each.
_NAME_RUN = re.compile(
    r"[^\W\d_a-z](?<![\w'’][^\W\d_a-z])[\w'’\-]*"
    r"(?:\s+(?:(?:of|the|de|del|la|le|du|da|von|van|der|den|y|upon|on)\s+)?"
    r"[^\W\d_a-z][\w'’\-]*)*"
)
#: The same runs in ASCII text (the common case: a class the engine scans for quickly; the
#: look-behind follows the capital so the scan is not slowed by it at every position).
_NAME_RUN_ASCII = re.compile(
    r"[A-Z](?<![\w'][A-Z])[\w'\-]*"
    r"(?:\s+(?:(?:of|the|de|del|la|le|du|da|von|van|der|den|y|upon|on)\s+)?"
    r"[A-Z][\w'\-]*)*"
)
_ASCII_WORD = re.compile(r"[a-z0-9]+")
#: A capitalised word after one of these (spaces between) opens a sentence or a quotation.
_OPENERS = frozenset('.!?:;"“(\n')
#: Single names shorter than this are not names a passage can be linked by ("Al", "UK").
NAME_MIN_CHARS = 4
#: Names are read from the first this many characters of a text (bounded work per text).
NAME_SCAN_CHARS = 4000


@lru_cache(maxsize=8192)
def name_phrases(text: str) -> frozenset[str]:
    """The proper names of a text, as lower-cased words joined by single spaces: runs of
    capitalised words (name particles inside a run kept, leading and trailing stopwords
    dropped). A run that opens a sentence also gives the run without its first word ("After
    Hall" gives "hall"), and a one-word name of fewer than :data:`NAME_MIN_CHARS` letters,
    one that opens a sentence, or a stopword, is left out. Pure; memoised per text."""
    if _NAMES is not None:
        if text.isascii():
            return _NAMES.names(text)
        found = _NAMES.names_latin(text)
        if found is not None:
            return found
    return name_phrases_reference(text)


def name_phrases_reference(text: str) -> frozenset[str]:
    """:func:`name_phrases` in pure Python, not memoised: the reference. A change here (or
    to the patterns it reads) needs the same change in ``native/src/lib.rs``;
    ``tests/property/test_native_paths.py`` compares the two."""
    out: set[str] = set()
    head = text[:NAME_SCAN_CHARS]
    ascii_text = head.isascii()
    run = _NAME_RUN_ASCII if ascii_text else _NAME_RUN
    for m in run.finditer(head):
        j = m.start() - 1
        while j >= 0 and head[j] in " \t\r\f\v":
            j -= 1
        opens = j < 0 or head[j] in _OPENERS
        toks = _ASCII_WORD.findall(m.group().lower()) if ascii_text else words(m.group())
        if len(toks) > 1:
            if opens:
                _add_name(toks[1:], out, opens=False)
            _add_name(toks, out, opens=opens)
        elif toks and not opens:
            _add_name(toks, out, opens=False)
    return frozenset(out)


def _add_name(toks: Sequence[str], out: set[str], *, opens: bool) -> None:
    lo, hi = 0, len(toks)
    while lo < hi and toks[lo] in STOPWORDS:
        lo += 1
    while hi > lo and toks[hi - 1] in STOPWORDS:
        hi -= 1
    if hi - lo == 1:
        word = toks[lo]
        if opens or len(word) < NAME_MIN_CHARS or word.isdigit():
            return
        out.add(word)
    elif hi > lo:
        out.add(" ".join(toks[lo:hi]))


#: The compiled name finder (:func:`name_phrases`, and the modifiers of
#: :func:`ctxbudget.entities.modifier_only`), or None.
NAME_FINDER = _NAMES = (
    NATIVE.NameFinder(sorted(STOPWORDS), NAME_MIN_CHARS, NAME_SCAN_CHARS, LATIN_TABLE)
    if NATIVE is not None
    else None
)


def fold_accents(text: str) -> str:
    """``text`` without its combining marks ("Aschenbrödel" -> "Aschenbrodel", "Tekezé" ->
    "Tekeze"): how a question typed without accents still names an accented title. ASCII
    text is returned as it is."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))
