"""Token counting (ctxbudget.tokens): exact offline counts, a cache by content, and clear errors
that leave nothing of a request behind."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from ctxbudget.errors import TokenizerError
from ctxbudget.tokens import TiktokenCounter, TokenizerRegistry


def test_cl100k_base_counts_offline_and_exactly() -> None:
    """cl100k_base loads from the offline package and gives the known count."""
    counter = TiktokenCounter("cl100k_base")
    assert counter.count("hello world") == 2
    assert counter.count("") == 0


def test_counts_are_cached_by_content() -> None:
    """The second count of the same text is a cache hit with the same answer."""
    counter = TiktokenCounter("cl100k_base", cache_size=4)
    text = "The quick brown fox jumps over the lazy dog."
    assert counter.count(text) == counter.count(str(text))
    assert len(counter._cache) == 1


def test_special_token_text_is_counted_as_plain_text() -> None:
    """Evidence may contain '<|endoftext|>'; it must not raise or be treated as special."""
    assert TiktokenCounter("cl100k_base").count("<|endoftext|>") > 1


def test_an_unknown_tokenizer_is_a_clear_error() -> None:
    """The message names the tokenizer; the registry remembers the failure."""
    reg = TokenizerRegistry()
    with pytest.raises(TokenizerError, match="no_such_encoding"):
        reg.get("no_such_encoding")
    with pytest.raises(TokenizerError):
        reg.get("no_such_encoding")


def test_an_encoding_missing_offline_names_the_cache_dir(
    tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """o200k_base is not shipped: the error says where to put it instead of downloading."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(TokenizerError, match="TIKTOKEN_CACHE_DIR"):
        TiktokenCounter("o200k_base")


def _depth(tb: Any) -> int:
    n = 0
    while tb is not None:
        n, tb = n + 1, tb.tb_next
    return n


def test_an_unavailable_tokenizer_raises_a_fresh_error_each_time() -> None:
    """The registry keeps the message, not the exception: no traceback grows or outlives a
    request (a re-raised cached exception gathers every request's frames)."""
    registry = TokenizerRegistry()
    errors = []
    for _ in range(4):
        with pytest.raises(TokenizerError) as info:
            registry.get("no-such-tokenizer")
        errors.append(info.value)
    assert len({id(e) for e in errors}) == 4
    assert len({_depth(e.__traceback__) for e in errors}) == 1
    assert all(str(e) == str(errors[0]) for e in errors)
    assert all(isinstance(v, str) for v in registry._failures.values())


def test_failing_tokenizer_names_are_remembered_within_a_bound() -> None:
    """Names chosen by senders cannot grow the registry."""
    registry = TokenizerRegistry(max_failures=8)
    for i in range(100):
        with pytest.raises(TokenizerError):
            registry.get(f"nope-{i}")
    with pytest.raises(TokenizerError):
        registry.get("x" * 10_000)
    assert len(registry._failures) == 8


def test_a_failed_request_leaves_nothing_of_itself_behind() -> None:
    """What the frames of a failed request held (the batch, the bytes) is freed with it."""
    import weakref

    class Payload:
        pass

    registry = TokenizerRegistry()
    refs: list[weakref.ref[Payload]] = []

    def request() -> None:
        payload = Payload()
        refs.append(weakref.ref(payload))
        registry.get("no-such-tokenizer")

    for _ in range(3):
        with pytest.raises(TokenizerError):
            request()
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


@pytest.mark.parametrize(
    "text",
    [
        "Plain ASCII, with 12345 digits and they'll contractions.\n\n",
        "Café, naïve and 東京 are counted by tiktoken itself.",
        "a" * 250,
        "<ev id=abc excerpt>x &lt; y</ev>\n",
        "a lone surrogate \ud800 in text",
    ],
)
def test_counts_equal_tiktokens_whichever_path_counts(text: str) -> None:
    """The counter's answer is tiktoken's own, whether the compiled counter or tiktoken
    counted the text (CJK, lone surrogates and very long pieces go to tiktoken)."""
    counter = TiktokenCounter("cl100k_base", cache_size=0)
    assert counter.count(text) == len(counter._encoding.encode_ordinary(text))
