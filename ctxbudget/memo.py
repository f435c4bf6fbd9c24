"""A bounded, thread-safe memo for pure functions of a passage (owned by a stage object).

Values must be immutable and a pure function of the key, so a memo can never change a
result, only skip recomputing one. It is bounded both in entries and in an estimate of the
bytes it holds (the caller says what an entry weighs); when either bound is reached the
oldest quarter of the entries goes. Stage objects own their memos (no module state), so a
benchmark or test that builds a new stage starts cold.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from itertools import islice
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    """``key -> value`` for at most ``max_entries`` entries and about ``max_bytes`` bytes."""

    def __init__(self, *, max_entries: int = 32768, max_bytes: int = 64 * 1024 * 1024) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("a memo needs room for at least one entry")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._data: dict[K, tuple[V, int]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    @property
    def bytes(self) -> int:
        """The estimated bytes held."""
        return self._bytes

    def get_or_make(self, key: K, make: Callable[[], V], weight: Callable[[V], int]) -> V:
        """The value for ``key``, made (and remembered unless it alone is over the byte
        bound) when absent."""
        found = self._data.get(key)
        if found is not None:
            return found[0]
        value = make()
        size = max(1, weight(value))
        if size > self.max_bytes:
            return value
        with self._lock:
            if key in self._data:
                return value
            while self._data and (
                len(self._data) >= self.max_entries or self._bytes + size > self.max_bytes
            ):
                for old in list(islice(self._data, max(1, len(self._data) // 4))):
                    self._bytes -= self._data.pop(old)[1]
            self._data[key] = (value, size)
            self._bytes += size
        return value

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._data.clear()
            self._bytes = 0
