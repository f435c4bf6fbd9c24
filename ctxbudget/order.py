"""Ordering policies for the admitted items (ranks are admission order, best first)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from ctxbudget.policy import Ordering
from ctxbudget.schemas import ConsolidatedItem

T = TypeVar("T")


def edges(ranked: Sequence[T]) -> list[T]:
    """Strongest at the edges: ranks 1, 3, 5, ... from the front, 2, 4, ... back from the end.

    9 items give 1,3,5,7,9,8,6,4,2; 10 give 1,3,5,7,9,10,8,6,4,2.
    """
    front = list(ranked[0::2])
    back = list(ranked[1::2])
    back.reverse()
    return front + back


def order_items(
    ranked: Sequence[int],
    items: Sequence[ConsolidatedItem],
    ordering: Ordering,
    *,
    versions_adjacent: bool,
) -> list[int]:
    """The rendering order of ``ranked`` (indices into ``items``, best first)."""
    rank = {it: r for r, it in enumerate(ranked)}
    if ordering == "edges":
        out = edges(ranked)
    elif ordering == "document":
        # Documents in the order of their best item; inside one, by position in the document.
        doc_rank: dict[str, int] = {}
        for it in ranked:
            doc_rank.setdefault(items[it].doc_id, rank[it])
        out = sorted(
            ranked,
            key=lambda it: (
                doc_rank[items[it].doc_id],
                items[it].span_start if items[it].span_start is not None else 1 << 62,
                rank[it],
            ),
        )
    elif ordering == "chronological":
        out = sorted(
            ranked,
            key=lambda it: (items[it].published_at is None, items[it].published_at or "", rank[it]),
        )
    else:
        out = list(ranked)
    return _versions_adjacent(out, items) if versions_adjacent else out


def _versions_adjacent(order: list[int], items: Sequence[ConsolidatedItem]) -> list[int]:
    """Keep every version of one document next to the first one placed (older first)."""
    placed: set[int] = set()
    out: list[int] = []
    for it in order:
        if it in placed:
            continue
        same = [o for o in order if items[o].doc_id == items[it].doc_id and o not in placed]
        if len(same) > 1 and len({items[o].version for o in same}) > 1:
            same.sort(key=lambda o: (items[o].published_at or "", items[o].version or "", o))
        else:
            same = [it]
        out.extend(same)
        placed.update(same)
    return out
