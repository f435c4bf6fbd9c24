"""BoundedMemo filled from outside (put, put_many), as the shingle cache fills it: the same
bounds as get_or_make, an entry bound of its own, and a put that replaces."""

from __future__ import annotations

from ctxbudget.memo import BoundedMemo
from ctxbudget.text import ShingleCache, shingles, words


def test_put_many_keeps_both_bounds_and_drops_the_oldest_quarter() -> None:
    """Twenty puts into room for eight: never over either bound, the newest ones kept."""
    memo: BoundedMemo[int, str] = BoundedMemo(max_entries=8, max_bytes=1000)
    for i in range(20):
        memo.put_many([i], [str(i)], [100])
        assert len(memo) <= 8 and memo.bytes <= 1000
    assert memo.get(19) == "19" and memo.get(0) is None


def test_an_entry_over_the_entry_bound_is_not_remembered() -> None:
    """max_entry_bytes refuses one heavy entry, by put and by get_or_make alike."""
    memo: BoundedMemo[str, str] = BoundedMemo(max_entries=8, max_bytes=1000, max_entry_bytes=125)
    memo.put("heavy", "v", 126)
    assert memo.get("heavy") is None and len(memo) == 0
    assert memo.get_or_make("made", lambda: "w" * 200, len) == "w" * 200
    assert memo.get("made") is None
    memo.put("light", "v", 125)
    assert memo.get("light") == "v" and memo.bytes == 125


def test_a_put_replaces_the_entry_and_its_weight() -> None:
    """Putting a key again holds one entry, weighed as the new one."""
    memo: BoundedMemo[str, str] = BoundedMemo(max_entries=8, max_bytes=1000)
    memo.put("k", "old", 300)
    memo.put("k", "new", 40)
    assert (len(memo), memo.bytes, memo.get("k")) == (1, 40, "new")


def test_the_shingle_cache_keeps_its_sets_in_a_bounded_memo() -> None:
    """ShingleCache.sets is a BoundedMemo holding each text's set, equal to a fresh one."""
    cache = ShingleCache(max_sets=4, max_bytes=1_000_000)
    texts = [f"the gateway rotates key number {i} every ninety days" for i in range(6)]
    got = cache.text_shingles_many(texts, 3)
    assert isinstance(cache.sets, BoundedMemo)
    assert got == [shingles(words(t), 3) for t in texts]
    assert len(cache.sets) <= 4 and cache.sets.get((texts[-1], 3)) == got[-1]
