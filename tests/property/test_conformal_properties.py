"""Property tests of split-conformal calibration: quantile, guarantee, monotonicity, split."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.conformal import (
    ConformalFilter,
    RerankScorer,
    calibrate,
    conformal_rank,
    conformal_threshold,
    split_by_query,
)
from ctxbudget.schemas import (
    AnswerContract,
    Candidate,
    CandidateBatch,
    Labels,
    ModelSpec,
    Principal,
    Query,
)

#: alphas as exact decimals p/1000, like the ones people type (0.05, 0.1, 0.333 ...).
alphas = st.integers(min_value=1, max_value=999).map(lambda p: p / 1000)
finite_scores = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(st.lists(finite_scores, min_size=1, max_size=200), st.integers(1, 999))
def test_threshold_is_the_exact_order_statistic(scores: list[float], permille: int) -> None:
    """The threshold is sorted(scores)[k-1] with k = ceil((n+1)(1000-p)/1000) in integers."""
    n, alpha = len(scores), permille / 1000
    k = -((-(n + 1) * (1000 - permille)) // 1000)  # integer ceil, no floating point at all
    r = conformal_threshold(scores, alpha)
    assert r.rank == k
    if k > n:
        assert not r.finite and math.isinf(r.threshold)
    else:
        assert r.finite and r.threshold == sorted(scores)[k - 1]


@given(st.lists(finite_scores, min_size=1, max_size=200), alphas)
def test_threshold_against_numpy_and_mapies_formula(scores: list[float], alpha: float) -> None:
    """Cross-check with np.quantile at q = (n+1)(1-alpha)/n (MAPIE's formula).

    "inverted_cdf" is the same order statistic except where q*n is an integer that floating
    point rounds up; MAPIE's method="higher" indexes ceil(q(n-1)), which is ours or the next
    order statistic: never less conservative, at most one rank more.
    """
    n = len(scores)
    r = conformal_threshold(scores, alpha)
    if not r.finite:
        return
    srt = np.sort(np.asarray(scores))
    q = min(1.0, (n + 1) * (1 - alpha) / n)
    nxt = srt[min(r.rank, n - 1)]
    inverted = float(np.quantile(srt, q, method="inverted_cdf"))
    higher = float(np.quantile(srt, q, method="higher"))
    assert r.threshold <= inverted <= nxt
    if abs((n + 1) * (1 - alpha) - round((n + 1) * (1 - alpha))) > 1e-6:
        assert r.threshold == inverted
    assert r.threshold <= higher <= nxt


@given(st.lists(finite_scores, min_size=1, max_size=100), alphas, alphas)
def test_threshold_is_monotone_in_alpha(scores: list[float], a1: float, a2: float) -> None:
    """A smaller alpha never gives a smaller threshold (so never keeps less)."""
    lo, hi = sorted((a1, a2))
    assert conformal_threshold(scores, lo).threshold >= conformal_threshold(scores, hi).threshold


TRIALS = 200
TEST_POINTS = 50


def _tolerance(n: int, alpha: float) -> float:
    """Four standard errors of the mean coverage over TRIALS splits.

    One split's coverage C = mean of TEST_POINTS indicators 1[score <= tau]. Given tau,
    E[C] = F(tau) ~ Beta(k, n + 1 - k) with mean p = k/(n+1), so
    Var(C) <= p(1-p)/(n+2) + p(1-p)/TEST_POINTS, and the mean of TRIALS independent splits has
    variance Var(C)/TRIALS. Four standard errors leave a one-sided false alarm of about 3e-5 per
    example (and the examples are derandomized, so a run is reproducible).
    """
    p = min(1.0, conformal_rank(n, alpha) / (n + 1))
    var = p * (1 - p) * (1 / (n + 2) + 1 / TEST_POINTS)
    return 4 * math.sqrt(var / TRIALS) + 1e-9


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    n=st.integers(min_value=1, max_value=300),
    alpha=st.sampled_from([0.05, 0.1, 0.2, 0.3, 0.4, 0.5]),
    dist=st.sampled_from(["normal", "exponential", "uniform"]),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_average_coverage_on_exchangeable_data_is_at_least_one_minus_alpha(
    n: int, alpha: float, dist: str, seed: int
) -> None:
    """i.i.d. continuous scores: mean coverage over many splits is k/(n+1) >= 1 - alpha."""
    rng = np.random.default_rng(seed)

    def draw(size: int) -> np.ndarray:
        if dist == "normal":
            return rng.normal(size=size)
        if dist == "exponential":
            return rng.exponential(size=size)
        return rng.uniform(size=size)

    covered = []
    for _ in range(TRIALS):
        calib = draw(n)
        test = draw(TEST_POINTS)
        tau = conformal_threshold(calib.tolist(), alpha).threshold
        covered.append(float(np.mean(test <= tau)))
    mean = float(np.mean(covered))
    k = conformal_rank(n, alpha)
    tol = _tolerance(n, alpha)
    assert mean >= 1 - alpha - tol
    if k <= n:  # continuous scores: the expectation is exactly k/(n+1) < 1 - alpha + 1/(n+1)
        assert abs(mean - k / (n + 1)) <= tol
    else:
        assert mean == 1.0


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    n=st.integers(min_value=20, max_value=300),
    alpha=st.sampled_from([0.05, 0.1, 0.2, 0.4]),
    levels=st.integers(min_value=2, max_value=6),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_coverage_holds_with_ties(n: int, alpha: float, levels: int, seed: int) -> None:
    """Discrete (tied) scores: keeping every tie makes coverage at least 1 - alpha."""
    rng = np.random.default_rng(seed)
    covered = []
    for _ in range(TRIALS):
        tau = conformal_threshold(rng.integers(0, levels, size=n).tolist(), alpha).threshold
        covered.append(float(np.mean(rng.integers(0, levels, size=TEST_POINTS) <= tau)))
    assert float(np.mean(covered)) >= 1 - alpha - _tolerance(n, alpha)


def _batch(rid: str, scores: list[float], relevant: list[int]) -> CandidateBatch:
    return CandidateBatch(
        request_id=rid,
        tenant_id="t",
        principal=Principal(tenant_id="t"),
        query=Query(text="q"),
        model=ModelSpec(name="m", input_limit=1000),
        answer_contract=AnswerContract(kind="short_fact"),
        candidates=tuple(
            Candidate(chunk_id=f"{rid}-{i}", doc_id="d", source_id="s", text="t", rerank_score=s)
            for i, s in enumerate(scores)
        ),
        labels=Labels(relevant_chunk_ids=tuple(f"{rid}-{i}" for i in relevant)),
    )


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.lists(finite_scores, min_size=1, max_size=8).flatmap(
            lambda s: st.tuples(st.just(s), st.lists(st.integers(0, len(s) - 1), max_size=3))
        ),
        min_size=1,
        max_size=40,
    ),
    st.lists(alphas, min_size=2, max_size=5, unique=True),
)
def test_filter_keeps_a_superset_as_alpha_shrinks(
    queries: list[tuple[list[float], list[int]]], alpha_list: list[float]
) -> None:
    """Coverage is monotone in alpha: every candidate kept at alpha is kept at any smaller one."""
    batches = [_batch(f"q{i}", s, sorted(set(r))) for i, (s, r) in enumerate(queries)]
    if not any(r for _, r in queries):
        return
    cal = calibrate(
        batches, alphas=alpha_list, scorer=RerankScorer(), data_hash="0" * 64, created="2025-01-01"
    )
    kept = {
        a: {cid for b in batches for cid in ConformalFilter(cal, alpha=a).apply(b, None).kept}
        for a in cal.alphas
    }
    ordered = sorted(cal.alphas)
    for smaller, larger in itertools.pairwise(ordered):
        assert kept[smaller] >= kept[larger]


@given(
    st.lists(st.text(alphabet="abcdef0123", min_size=1, max_size=6), min_size=1, max_size=60),
    st.floats(min_value=0.01, max_value=1.0),
    st.integers(min_value=0, max_value=10_000),
    st.randoms(use_true_random=False),
)
def test_split_is_by_query_complete_and_reproducible(
    ids: list[str], fraction: float, seed: int, shuffler: random.Random
) -> None:
    """Each request id lands on one side only, all batches are kept, and the input order and a
    re-run do not change the split."""
    batches = [_batch(rid, [1.0], [0]) for rid in ids]
    first = split_by_query(batches, calib_fraction=fraction, seed=seed)
    shuffled = list(batches)
    shuffler.shuffle(shuffled)
    second = split_by_query(shuffled, calib_fraction=fraction, seed=seed)
    calib = {b.request_id for b in first.calibration}
    test = {b.request_id for b in first.test}
    assert not calib & test
    assert calib | test == set(ids)
    assert len(first.calibration) + len(first.test) == len(batches)
    assert calib == {b.request_id for b in second.calibration}
    assert [b.request_id for b in first.test] == [b.request_id for b in second.test]
