"""Text helpers (ctxbudget.text): the shingle and word-id memos stay bounded and belong to the
stages that use them."""

from __future__ import annotations

from ctxbudget.text import ShingleCache, _WordIds


def test_the_shingle_memo_is_bounded_in_bytes() -> None:
    """Long texts fill the byte bound, not the count; one huge text is not remembered."""
    cache = ShingleCache(max_sets=2048, max_bytes=1_000_000)
    memo = cache.sets
    for i in range(200):
        text = f"text {i} " + "word " * 2000
        cache.text_shingles(text, 3)
        assert memo.bytes <= memo.max_bytes
    assert 0 < len(memo) < 200
    huge = "x" * 200_000
    cache.text_shingles(huge, 3)
    assert memo.get((huge, 3)) is None
    memo.clear()
    assert memo.bytes == 0 and len(memo) == 0


def test_long_words_are_hashed_but_not_remembered() -> None:
    """Encoded blobs (one long 'word') cannot fill the word-id memo."""
    ids = _WordIds()
    assert ids["a" * 10_000] == ids["a" * 10_000]
    assert ids["short"] >= 0
    assert list(ids) == ["short"]


def test_shingling_keeps_no_state_between_pipelines() -> None:
    """Shingle sets and word ids live in a cache the stages own: one pipeline's traffic leaves
    nothing behind in another's, and the results do not depend on the cache."""
    from ctxbudget.text import shingles, words

    text = "the quick brown fox jumps over the lazy dog " * 8
    a, b = ShingleCache(), ShingleCache()
    first = a.text_shingles(text, 3)
    assert len(a.sets) == 1 and len(b.sets) == 0 and not b.word_ids
    assert b.text_shingles(text, 3) == first == shingles(words(text), 3)
    assert a.text_overlaps([text], 3).sets == [first]
