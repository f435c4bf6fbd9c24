"""The near-duplicate join: which passages of a batch are copies of each other.

Texts are compared by their word-shingle sets (a Jaccard index or a containment reaching the
policy's thresholds), or by their embeddings when every one carries an embedding; the pairs
found are joined into families with :class:`DisjointSets`. The work a join would do is
counted before it is done and held to the consolidation work budget
(:func:`~ctxbudget.limits.check_pair_work`), so many near-identical passages fail fast
instead of running in quadratic time. Consolidation (:mod:`ctxbudget.stages.consolidate`)
runs the join; the functions here know nothing of candidates or policies.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from itertools import combinations

import numpy as np

from ctxbudget.limits import check_pair_work
from ctxbudget.text import ShingleIndex


class DisjointSets:
    """Union-find over ``0 .. n-1``; a set's root is always its smallest member."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # The smaller index stays the root (consolidation numbers units best-ranked first).
            self.parent[max(ra, rb)] = min(ra, rb)


def cosine_pairs(
    embeddings: Sequence[Sequence[float] | None], threshold: float, max_checks: int
) -> list[tuple[int, int]]:
    """Pairs ``(a, b)``, ``a < b``, whose embeddings are near-identical (cosine reaching
    ``threshold``); none unless every text has one, all of one dimension.

    Every pair is compared (one matrix product): more pairs than ``max_checks`` raise
    :class:`~ctxbudget.errors.LimitError` before the matrix is made.
    """
    embs = list(embeddings)
    if len(embs) < 2 or any(e is None for e in embs):
        return []
    dims = {len(e) for e in embs if e is not None}
    if len(dims) != 1:
        return []
    n = len(embs)
    check_pair_work(n * (n - 1) // 2, max_checks)
    m = np.asarray(embs, dtype=np.float64)
    norms = np.linalg.norm(m, axis=1)
    norms[norms == 0] = 1.0
    m = m / norms[:, None]
    sim = m @ m.T
    xs, ys = np.nonzero(np.triu(sim, k=1) >= threshold)
    return [(int(x), int(y)) for x, y in zip(xs, ys, strict=True)]


def pair_work_bound(sets: Sequence[frozenset[int]]) -> int:
    """An upper bound on the work :func:`near_duplicate_pairs` counts for ``sets``.

    A containment probe of a shingle meets at most ``n - 1`` other sets, and a set probes
    at most all its shingles; the sets whose Jaccard prefixes hold a shingle are at most
    ``n``, so their pairs are at most ``(n - 1) / 2`` per prefix entry. In all, at most
    ``3 / 2 * (n - 1)`` times the sets' total size."""
    return 3 * (len(sets) - 1) * sum(map(len, sets)) // 2


def table_pairs(
    common: np.ndarray, jaccard_min: float, containment_min: float
) -> list[tuple[int, int]]:
    """The pairs ``(a, b)``, ``a < b``, in ascending order, of the sets whose shared-shingle
    counts ``common`` (sizes on the diagonal, as :func:`~ctxbudget.text.common_shingles`
    gives) show a shingle in common and a Jaccard index reaching ``jaccard_min`` or a
    containment reaching ``containment_min``: the pairs :func:`near_duplicate_pairs` finds,
    tested with the same float64 arithmetic (the counts are exact integers)."""
    a, b = np.nonzero(np.triu(common, 1))
    if not len(a):
        return []
    inter = common[a, b]
    sizes = common.diagonal()
    size_a, size_b = sizes[a], sizes[b]
    keep = (inter / (size_a + size_b - inter) >= jaccard_min) | (
        inter / np.minimum(size_a, size_b) >= containment_min
    )
    return list(zip(a[keep].tolist(), b[keep].tolist(), strict=True))


def near_duplicate_pairs(
    index: ShingleIndex,
    jaccard_min: float,
    containment_min: float,
    *,
    max_checks: int | None = None,
) -> list[tuple[int, int]]:
    """The pairs ``(a, b)``, ``a < b``, of shingle sets that share a shingle and whose Jaccard
    index reaches ``jaccard_min`` or whose containment reaches ``containment_min`` (in no
    particular order: the caller sorts them).

    Exact, found with prefix filtering as in all-pairs similarity joins, so the work follows
    the copies there are rather than the square of the batch. Order the shingles by (number
    of sets holding them, value): rare first, and shingles of one set only before all others.
    A pair that passes shares at least ``need`` shingles, so it shares one of the first
    ``|s| - need + 1`` shingles of a set ``s`` (the others are too few to make ``need``):

    - containment (overlap >= c * |smaller|): the smaller set's prefix meets the other set,
      so each set probes an index of the sets holding its prefix shingles;
    - Jaccard (overlap >= t * |larger| >= t * |either|): the first common shingle lies in
      both prefixes (Chaudhuri et al.), so only sets whose prefixes meet are paired.

    Shingles no other set holds can never be common: a set whose prefix holds only those is
    skipped without a probe. Every candidate pair is tested with the same arithmetic as
    :func:`ctxbudget.text.jaccard` and :func:`ctxbudget.text.containment`.

    The work is the number of candidate pairs the probes make (with repeats), known from the
    prefixes before any pair is made: over ``max_checks`` it raises
    :class:`~ctxbudget.errors.LimitError` (many near-identical sets make it quadratic).
    """
    sets, freq, shared_of = index.sets, index.repeated, index.shared
    if not freq:
        return []
    n_cont = [_shared_prefix(sets[u], m, containment_min) for u, m in enumerate(shared_of)]
    n_jac = [_shared_prefix(sets[u], m, jaccard_min) for u, m in enumerate(shared_of)]
    # each set's shared shingles, rarest first (only for the sets that probe at all)
    ordered = _probe_order(shared_of, n_cont, n_jac, freq, max_checks)
    candidates: set[tuple[int, int]] = set()
    # containment: each set's prefix against every set holding those shingles
    probes = [ordered[u][:k] for u, k in enumerate(n_cont) if k > 0]
    wanted = set().union(*probes)
    if wanted:
        holders: dict[int, list[int]] = {g: [] for g in wanted}
        for u, m in enumerate(shared_of):
            for g in m & wanted:
                holders[g].append(u)
        for u, k in enumerate(n_cont):
            for g in ordered[u][:k]:
                candidates.update((u, v) if u < v else (v, u) for v in holders[g] if v != u)
    # Jaccard: sets whose prefixes meet
    by_prefix: dict[int, list[int]] = defaultdict(list)
    for u, k in enumerate(n_jac):
        for g in ordered[u][:k]:
            by_prefix[g].append(u)
    for members in by_prefix.values():
        candidates.update(combinations(members, 2))
    out = []
    for a, b in candidates:
        sa, sb = sets[a], sets[b]
        inter = len(sa & sb)
        if (
            inter / (len(sa) + len(sb) - inter) >= jaccard_min
            or inter / min(len(sa), len(sb)) >= containment_min
        ):
            out.append((a, b))
    return out


def _probe_order(
    shared_of: list[set[int]],
    n_cont: list[int],
    n_jac: list[int],
    freq: dict[int, int],
    max_checks: int | None,
) -> list[list[int]]:
    """Each set's shared shingles, rarest first (only for the sets that probe at all); the
    work they will make is held to ``max_checks`` first."""
    ordered = [
        sorted(sorted(m), key=freq.__getitem__) if max(c, j) > 0 else []
        for m, c, j in zip(shared_of, n_cont, n_jac, strict=True)
    ]
    if max_checks is not None:
        check_pair_work(_pair_work(ordered, n_cont, n_jac, freq), max_checks)
    return ordered


def _pair_work(
    ordered: list[list[int]], n_cont: list[int], n_jac: list[int], freq: dict[int, int]
) -> int:
    """The candidate pairs :func:`near_duplicate_pairs` makes, counted without making them:
    a containment probe of shingle ``g`` meets the other sets holding it (``freq[g] - 1``);
    the sets whose Jaccard prefixes hold ``g`` are paired with each other."""
    work = 0
    in_prefix: Counter[int] = Counter()
    for u, (k_cont, k_jac) in enumerate(zip(n_cont, n_jac, strict=True)):
        row = ordered[u]
        for g in row[:k_cont]:
            work += freq[g] - 1
        in_prefix.update(row[:k_jac])
    return work + sum(n * (n - 1) // 2 for n in in_prefix.values())


def _shared_prefix(s: frozenset[int], shared: set[int], threshold: float) -> int:
    """How many of ``s``'s shared shingles its prefix holds for an overlap of ``threshold``."""
    # The overlap a passing pair needs, lowered a hair against float error (a smaller need
    # only makes a longer prefix), and never below the one shingle every candidate shares.
    need = max(1, math.ceil(threshold * len(s) - 1e-6))
    return max(0, len(shared) - need + 1)
