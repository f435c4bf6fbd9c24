"""A bounded, thread-safe memo for pure functions of a passage (owned by a stage object).

Values must be immutable and a pure function of the key, so a memo can never change a
result, only skip recomputing one. It is bounded both in entries and in an estimate of the
bytes it holds (the caller says what an entry weighs); when either bound is reached the
oldest quarter of the entries goes, and an entry heavier than ``max_entry_bytes`` is not
remembered at all (so a few huge passages cannot push out everything else). Stage objects
own their memos (no module state), so a benchmark or test that builds a new stage starts
cold. Sentence analyses, gate verdicts, passage indexes and shingle sets
(:class:`~ctxbudget.text.ShingleCache`) are all held in one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from itertools import islice
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    """``key -> value`` for at most ``max_entries`` entries and about ``max_bytes`` bytes;
    an entry over ``max_entry_bytes`` (default ``max_bytes``) is returned, not kept."""

    def __init__(
        self,
        *,
        max_entries: int = 32768,
        max_bytes: int = 64 * 1024 * 1024,
        max_entry_bytes: int | None = None,
    ) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("a memo needs room for at least one entry")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_bytes if max_entry_bytes is None else max_entry_bytes
        self._data: dict[K, tuple[V, int]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    @property
    def bytes(self) -> int:
        """The estimated bytes held."""
        return self._bytes

    def get(self, key: K) -> V | None:
        """The value remembered for ``key``, or None."""
        found = self._data.get(key)
        return None if found is None else found[0]

    def get_or_make(self, key: K, make: Callable[[], V], weight: Callable[[V], int]) -> V:
        """The value for ``key``, made (and remembered unless it alone is over the entry
        bound) when absent."""
        found = self._data.get(key)
        if found is not None:
            return found[0]
        value = make()
        size = max(1, weight(value))
        if size > self.max_entry_bytes:
            return value
        with self._lock:
            if key in self._data:
                return value
            self._make_room(size)
            self._data[key] = (value, size)
            self._bytes += size
        return value

    def put(self, key: K, value: V, size: int) -> None:
        """Remember ``value`` for ``key``, an entry of ``size`` bytes (replacing one held)."""
        self.put_many([key], [value], [size])

    def put_many(self, keys: Sequence[K], values: Sequence[V], sizes: Sequence[int]) -> None:
        """:meth:`put` each key's value in turn, under one hold of the lock."""
        limit = self.max_entry_bytes
        with self._lock:
            data = self._data
            for key, value, size in zip(keys, values, sizes, strict=True):
                if size > limit:
                    continue
                old_entry = data.pop(key, None)
                if old_entry is not None:
                    self._bytes -= old_entry[1]
                self._make_room(size)
                data[key] = (value, size)
                self._bytes += size

    def _make_room(self, size: int) -> None:
        """Drop the oldest quarter of the entries until one of ``size`` bytes fits (the
        caller holds the lock)."""
        data = self._data
        while data and (len(data) >= self.max_entries or self._bytes + size > self.max_bytes):
            for old in list(islice(data, max(1, len(data) // 4))):
                self._bytes -= data.pop(old)[1]

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._data.clear()
            self._bytes = 0
