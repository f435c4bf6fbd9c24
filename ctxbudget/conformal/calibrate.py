"""Calibration: a threshold per alpha (pooled and Mondrian), with the baselines."""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from fractions import Fraction

from ctxbudget.conformal._common import DEFAULT_MIN_PER_CLASS, POOLED
from ctxbudget.conformal.calibration_file import (
    Baselines,
    CalibrationFile,
    ClassInfo,
    ClassThresholdEntry,
    ThresholdEntry,
)
from ctxbudget.conformal.quantile import _check_alpha, alpha_key, conformal_threshold
from ctxbudget.conformal.scorers import NonconformityScorer, bind_scorer, resolve_scorer
from ctxbudget.schemas import CandidateBatch

# ---------------------------------------------------------------- calibration


@dataclass(slots=True)
class _Tally:
    """What one pass over the calibration batches collects."""

    pooled: list[float]
    by_class: dict[str, list[float]]
    class_queries: dict[str, int]
    ranked: list[list[tuple[float, bool]]]  # per query: (score, relevant), unscored as +inf
    n_queries: int = 0
    n_unlabelled: int = 0
    n_without_relevant: int = 0
    n_unscored: int = 0
    n_not_retrieved: int = 0
    n_candidates: int = 0


def _tally(
    batches: Sequence[CandidateBatch],
    scorer: NonconformityScorer,
    classify: Callable[[CandidateBatch], str] | None,
) -> _Tally:
    t = _Tally(pooled=[], by_class=defaultdict(list), class_queries=defaultdict(int), ranked=[])
    for batch in batches:
        t.n_queries += 1
        t.n_candidates += len(batch.candidates)
        if batch.labels is None:
            t.n_unlabelled += 1
            continue
        relevant = set(batch.labels.relevant_chunk_ids)
        cls = classify(batch) if classify is not None else None
        if cls is not None:
            t.class_queries[cls] += 1
        bound = bind_scorer(scorer, batch)
        present = {c.chunk_id for c in batch.candidates}
        t.n_not_retrieved += len(relevant - present)
        if not relevant & present:
            t.n_without_relevant += 1
        ranked: list[tuple[float, bool]] = []
        for c in batch.candidates:
            s = bound.score(batch.query, c)
            is_rel = c.chunk_id in relevant
            ranked.append((math.inf if s is None else s, is_rel))
            if not is_rel:
                continue
            if s is None:
                t.n_unscored += 1
                continue
            t.pooled.append(s)
            if cls is not None:
                t.by_class[cls].append(s)
        t.ranked.append(ranked)
    return t


def _top_k_baseline(
    ranked: list[list[tuple[float, bool]]], alphas: Sequence[float]
) -> tuple[dict[str, int], dict[str, float]]:
    """Per alpha, the smallest k whose calibration coverage reaches 1 - alpha."""
    hits: dict[int, int] = defaultdict(int)  # rank (1-based) -> relevant passages at that rank
    total, max_len = 0, 1
    for rows in ranked:
        order = sorted(range(len(rows)), key=lambda i: (rows[i][0], i))
        max_len = max(max_len, len(rows))
        for pos, i in enumerate(order, start=1):
            if rows[i][1]:
                hits[pos] += 1
                total += 1
    top_k: dict[str, int] = {}
    cov: dict[str, float] = {}
    if total == 0:
        return top_k, cov
    cumulative = [0] * (max_len + 1)
    for k in range(1, max_len + 1):
        cumulative[k] = cumulative[k - 1] + hits.get(k, 0)
    for a in alphas:
        need = math.ceil(total * (1 - Fraction(repr(a))))
        k = next(k for k in range(1, max_len + 1) if cumulative[k] >= need)
        top_k[alpha_key(a)] = k
        cov[alpha_key(a)] = cumulative[k] / total
    return top_k, cov


def _f1_threshold(ranked: list[list[tuple[float, bool]]]) -> tuple[float | None, float | None]:
    """The score cutoff maximising F1 of 'score <= t' for relevance (scored candidates only)."""
    pairs = sorted((s, r) for rows in ranked for s, r in rows if math.isfinite(s))
    n_rel = sum(1 for _, r in pairs if r)
    if n_rel == 0:
        return None, None
    best_f1, best_t, best_cov = -1.0, pairs[0][0], 0.0
    kept = tp = 0
    for i, (s, r) in enumerate(pairs):
        kept += 1
        tp += r
        if i + 1 < len(pairs) and pairs[i + 1][0] == s:
            continue  # a threshold keeps every tie
        f1 = 2 * tp / (kept + n_rel)
        if f1 > best_f1:
            best_f1, best_t, best_cov = f1, s, tp / n_rel
    return best_t, best_cov


def calibrate(
    batches: Sequence[CandidateBatch],
    *,
    alphas: Iterable[float],
    scorer: NonconformityScorer,
    by_class: bool = False,
    classify: Callable[[CandidateBatch], str] | None = None,
    min_per_class: int = DEFAULT_MIN_PER_CLASS,
    data_hash: str,
    created: str | date,
    name: str = "calibration",
    version: str = "1",
    baselines: bool = True,
) -> CalibrationFile:
    """Calibrate thresholds for every alpha on labelled batches (all of them are calibration data).

    Pooled thresholds always; with ``by_class`` also Mondrian thresholds per ``classify(batch)``,
    falling back to pooled for a class with fewer than ``min_per_class`` relevant passages.
    Queries without any relevant candidate are counted (``n_queries_without_relevant``), relevant
    passages with no score under the scorer are counted (``n_relevant_unscored``) and left out of
    the quantile: the filter keeps unscored candidates anyway.
    """
    alpha_list = sorted({float(a) for a in alphas})
    if not alpha_list:
        raise ValueError("at least one alpha is needed")
    for a in alpha_list:
        _check_alpha(a)
    if by_class and classify is None:
        raise ValueError("by_class=True needs a classify function")
    if isinstance(min_per_class, bool) or min_per_class < 1:
        raise ValueError(f"min_per_class must be >= 1, got {min_per_class!r}")
    batch_list = list(batches)
    resolved = resolve_scorer(scorer, batch_list)
    t = _tally(batch_list, resolved, classify if by_class else None)
    if not t.pooled:
        raise ValueError(
            f"no relevant passage with a {resolved.name!r} score in {t.n_queries} batches "
            f"({t.n_unlabelled} unlabelled, {t.n_without_relevant} without a relevant candidate, "
            f"{t.n_unscored} relevant but unscored): nothing to calibrate on"
        )
    pooled_results = {alpha_key(a): conformal_threshold(t.pooled, a) for a in alpha_list}
    pooled = {k: ThresholdEntry.of(r) for k, r in pooled_results.items()}

    stored: dict[str, tuple[float, ...]] = {POOLED: tuple(sorted(t.pooled))}
    class_entries: dict[str, dict[str, ClassThresholdEntry]] = {}
    class_info: dict[str, ClassInfo] = {}
    if by_class:
        for cls in sorted(t.class_queries):
            scores = t.by_class.get(cls, [])
            own = len(scores) >= min_per_class
            if own:
                stored[cls] = tuple(sorted(scores))
            entries: dict[str, ClassThresholdEntry] = {}
            for a in alpha_list:
                r = conformal_threshold(scores, a) if own else pooled_results[alpha_key(a)]
                entries[alpha_key(a)] = ClassThresholdEntry(
                    **ThresholdEntry.of(r).model_dump(),
                    bin=cls if own else POOLED,
                    n_class=len(scores),
                )
            class_entries[cls] = entries
            class_info[cls] = ClassInfo(
                n_queries=t.class_queries[cls],
                n_relevant=len(scores),
                bin=cls if own else POOLED,
                reason=None
                if own
                else f"{len(scores)} relevant passages < min_per_class {min_per_class}",
            )

    base: Baselines | None = None
    if baselines:
        top_k, top_k_cov = _top_k_baseline(t.ranked, alpha_list)
        fixed, fixed_cov = _f1_threshold(t.ranked)
        base = Baselines(
            top_k=top_k,
            top_k_calibration_coverage=top_k_cov,
            fixed_threshold=fixed,
            fixed_threshold_calibration_coverage=fixed_cov,
        )

    return CalibrationFile(
        name=name,
        version=version,
        scorer=resolved.name,
        scorer_requested=scorer.name,
        alphas=tuple(alpha_list),
        pooled=pooled,
        by_class=class_entries,
        class_info=class_info,
        min_per_class=min_per_class if by_class else None,
        n_queries=t.n_queries,
        n_queries_unlabelled=t.n_unlabelled,
        n_queries_without_relevant=t.n_without_relevant,
        n_relevant=len(t.pooled),
        n_relevant_unscored=t.n_unscored,
        n_relevant_not_retrieved=t.n_not_retrieved,
        n_candidates=t.n_candidates,
        data_sha256=data_hash,
        created=created.isoformat() if isinstance(created, date) else created,
        baselines=base,
        relevant_scores=stored,
    )


def recalibrate(
    base: CalibrationFile,
    scores: Sequence[float],
    *,
    version: str,
    created: str | date,
    n_queries: int,
) -> CalibrationFile:
    """A new version of ``base`` whose pooled thresholds come from ``scores`` (the relevant
    passages' non-conformity scores collected after drift), for the same scorer and alphas.

    Pooled only: a recalibration collects a few hundred passages, too few to give each query
    class its own bin. The data hash is the sha256 of the sorted scores' ``repr`` lines.
    """
    if not scores:
        raise ValueError("no scores to recalibrate on")
    ordered = tuple(sorted(float(s) for s in scores))
    digest = hashlib.sha256("\n".join(map(repr, ordered)).encode()).hexdigest()
    pooled = {alpha_key(a): ThresholdEntry.of(conformal_threshold(ordered, a)) for a in base.alphas}
    return CalibrationFile(
        name=base.name,
        version=version,
        method=base.method,
        scorer=base.scorer,
        scorer_requested=base.scorer_requested,
        alphas=base.alphas,
        pooled=pooled,
        n_queries=n_queries,
        n_queries_without_relevant=0,
        n_relevant=len(ordered),
        data_sha256=digest,
        created=created.isoformat() if isinstance(created, date) else created,
        relevant_scores={POOLED: ordered},
    )
