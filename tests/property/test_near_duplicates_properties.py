"""Near-duplicate pairing (ctxbudget.near_duplicates): the prefix filter finds exactly the pairs
of the all-pairs definition, and the table of shared shingles finds the same ones within the
work bound."""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.near_duplicates import near_duplicate_pairs, pair_work_bound, table_pairs
from ctxbudget.text import common_shingles, containment, index_sets, jaccard

SETTINGS = settings(max_examples=300, deadline=None)


def _plain_pairs(
    sets: list[frozenset[int]], jaccard_min: float, containment_min: float
) -> list[tuple[int, int]]:
    postings: dict[int, list[int]] = defaultdict(list)
    for u, s in enumerate(sets):
        for g in s:
            postings[g].append(u)
    candidates = {pair for p in postings.values() for pair in combinations(p, 2)}
    return sorted(
        (a, b)
        for a, b in candidates
        if jaccard(sets[a], sets[b]) >= jaccard_min
        or containment(sets[a], sets[b]) >= containment_min
    )


#: Shingle sets and the two thresholds of near-duplicate pairing.
PAIR_CASES = (
    st.lists(st.frozensets(st.integers(0, 40), max_size=25), max_size=10),
    st.sampled_from([0.0, 0.3, 0.6, 0.8, 1.0]),
    st.sampled_from([0.0, 0.5, 0.8, 1.0]),
)


@SETTINGS
@given(*PAIR_CASES)
def test_prefix_filtering_finds_exactly_the_near_duplicate_pairs(
    sets: list[frozenset[int]], jaccard_min: float, containment_min: float
) -> None:
    """Prefix filtering is exact: the pairs of the all-pairs definition, no more, no less."""
    found = sorted(near_duplicate_pairs(index_sets(sets), jaccard_min, containment_min))
    assert found == _plain_pairs(sets, jaccard_min, containment_min)


@SETTINGS
@given(*PAIR_CASES)
def test_the_table_of_shared_shingles_finds_the_same_pairs_within_the_work_bound(
    sets: list[frozenset[int]], jaccard_min: float, containment_min: float
) -> None:
    """The dense table holds every pair's overlap; the pairs read from it are the pairs of the
    prefix filter, whose work never exceeds the bound that lets the table be used."""
    common = common_shingles(sets)
    assert common is not None and common.shape == (len(sets), len(sets))
    for a, sa in enumerate(sets):
        assert [common[a, b] for b in range(len(sets))] == [len(sa & sb) for sb in sets]
    found = near_duplicate_pairs(
        index_sets(sets), jaccard_min, containment_min, max_checks=pair_work_bound(sets)
    )
    assert table_pairs(common, jaccard_min, containment_min) == sorted(found)
