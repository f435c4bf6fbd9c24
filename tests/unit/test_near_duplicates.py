"""Near-duplicate pairing (ctxbudget.near_duplicates): families joined with the best-ranked
unit as their root, and embedding pairs counted against the work budget."""

from __future__ import annotations

import pytest

from ctxbudget.errors import LimitError
from ctxbudget.near_duplicates import DisjointSets, cosine_pairs


def test_a_family_is_rooted_at_its_smallest_member() -> None:
    """Units are numbered best-ranked first, so whatever the order of the joins, a family's
    root is its best-ranked unit."""
    sets = DisjointSets(6)
    for a, b in [(5, 3), (3, 4), (4, 1), (2, 0)]:
        sets.union(a, b)
    assert [sets.find(x) for x in range(6)] == [0, 1, 0, 1, 1, 1]


def test_cosine_pairs_need_an_embedding_on_every_text_and_fit_the_budget() -> None:
    """Near-parallel embeddings pair; a missing embedding or mixed dimensions pair nothing,
    and more pairs than the budget raise before any are compared."""
    embs = [(1.0, 0.0), (0.99, 0.01), (0.0, 1.0)]
    assert cosine_pairs(embs, 0.98, max_checks=3) == [(0, 1)]
    assert cosine_pairs([*embs, None], 0.98, max_checks=6) == []
    assert cosine_pairs([*embs, (1.0, 0.0, 0.0)], 0.98, max_checks=6) == []
    with pytest.raises(LimitError):
        cosine_pairs(embs, 0.98, max_checks=2)
