"""Ordering of the admitted items (ctxbudget.order)."""

from __future__ import annotations

import pytest

from ctxbudget.order import edges


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (9, [1, 3, 5, 7, 9, 8, 6, 4, 2]),
        (10, [1, 3, 5, 7, 9, 10, 8, 6, 4, 2]),
        (1, [1]),
        (2, [1, 2]),
    ],
)
def test_edges_puts_the_strongest_at_both_ends(n: int, expected: list[int]) -> None:
    """Lost in the middle: rank 1 first, rank 2 last, both parities."""
    assert edges(list(range(1, n + 1))) == expected
