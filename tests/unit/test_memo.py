"""The bounded memo stages own: bounded in entries and bytes, never changes a result."""

from __future__ import annotations

import pytest

from ctxbudget.extractive import analyse
from ctxbudget.memo import BoundedMemo


def test_the_memo_stays_within_its_bounds() -> None:
    """Entries and bytes stay within the bounds, and a hit does not make the value again."""
    memo: BoundedMemo[int, str] = BoundedMemo(max_entries=8, max_bytes=100)
    for i in range(50):
        assert memo.get_or_make(i, lambda i=i: str(i) * 10, lambda v: len(v)) == str(i) * 10
        assert len(memo) <= 8 and memo.bytes <= 100
    made = []
    memo.get_or_make(49, lambda: made.append(1) or "x", len)
    assert made == []  # a hit does not make again


def test_an_entry_over_the_byte_bound_is_returned_not_kept() -> None:
    """A value over the byte bound is returned to the caller but not kept."""
    memo: BoundedMemo[str, str] = BoundedMemo(max_entries=8, max_bytes=10)
    assert memo.get_or_make("k", lambda: "v" * 100, len) == "v" * 100
    assert len(memo) == 0


def test_bounds_must_leave_room() -> None:
    """A memo that could hold no entry is refused with a ValueError."""
    with pytest.raises(ValueError):
        BoundedMemo(max_entries=0)


def test_a_memoised_analysis_equals_a_fresh_one() -> None:
    """A memoised sentence analysis is kept on a hit and equals a fresh one."""
    text = "Florence M. Sterling founded it in 1923. It was not sold. Later it moved."
    memo: BoundedMemo[str, object] = BoundedMemo()
    first = memo.get_or_make(text, lambda: analyse(text), lambda a: a.weight)
    assert first == analyse(text) and memo.get_or_make(text, lambda: None, len) is first
    start, end = analyse(text).bounds[0]
    assert text[start:end] == "Florence M. Sterling founded it in 1923."
    assert analyse(text).protected == (True, True, False)
