"""Evaluate a conformal calibration on held-out labelled batches, beside two heuristic baselines.

For every alpha, and per query class when the calibration has Mondrian bins, it reports:

* coverage: the fraction of relevant passages (present among the candidates) that is kept,
  micro-averaged over queries; the target is ``1 - alpha``;
* removal: the fraction of candidates removed;
* se: the binomial standard error of a coverage estimate at the target, ``sqrt(t(1-t)/n_rel)``,
  to read small groups (a class with 14 relevant passages moves 7 points per passage);
* tokens saved: the tokens of the removed candidates, from ``candidate.tokens`` when given,
  else the estimate ``ceil(len(text) / 4.4)`` (:func:`~ctxbudget.tokens.estimate_tokens`; the
  report says which);

for these filters:

* ``conformal``: the calibrated threshold (Mondrian bin when the calibration has one);
* ``conformal_pooled``: the pooled threshold, shown only when the calibration has classes;
* ``top_k``: keep the k best-scored candidates, k = the smallest whose coverage on the
  CALIBRATION split reaches ``1 - alpha`` (tuned per alpha, stored in the calibration file);
* ``fixed_threshold``: ONE score cutoff reused for every alpha, the one that maximised F1 of
  relevant-vs-not on the CALIBRATION split (the usual "tuned relevance cutoff").

Candidates without a score are kept by ``conformal`` and ``fixed_threshold`` and ranked last by
``top_k``. Everything here is pure and deterministic.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from ctxbudget.conformal import (
    POOLED,
    CalibrationFile,
    ConformalFilter,
    alpha_key,
    bind_scorer,
    scorer_from_name,
)
from ctxbudget.models import ReportModel
from ctxbudget.schemas import CandidateBatch
from ctxbudget.tokens import CHARS_PER_TOKEN, estimate_tokens

Method = Literal["conformal", "conformal_pooled", "top_k", "fixed_threshold"]
ALL = "all"
DEFAULT_TOLERANCE = 0.03

METHOD_NOTES: dict[str, str] = {
    "conformal": "split-conformal threshold from the calibration file "
    "(the class's Mondrian bin when calibrated by class)",
    "conformal_pooled": "the pooled conformal threshold applied to every class",
    "top_k": "keep the k best-scored candidates; k = smallest whose coverage on the "
    "calibration split reaches 1 - alpha",
    "fixed_threshold": "one score cutoff for every alpha: the F1-optimal cutoff on the "
    "calibration split",
}


class EvalRow(ReportModel):
    """One filter at one alpha on one group of queries."""

    alpha: float
    target: float
    group: str
    method: Method
    parameter: str
    threshold: float | None = None
    k: int | None = None
    n_queries: int
    n_candidates: int
    n_removed: int
    n_relevant: int
    n_relevant_kept: int
    coverage: float | None
    gap: float | None
    se: float | None
    removal: float
    tokens_total: int
    tokens_saved: int
    tokens_saved_fraction: float
    below_target: bool


class EvaluationReport(ReportModel):
    """``ctx.conformal_evaluation.v1``: the rows and the counts needed to read them."""

    schema_: Literal["ctx.conformal_evaluation.v1"] = Field(
        default="ctx.conformal_evaluation.v1", alias="schema"
    )
    calibration: str
    scorer: str
    token_estimate: str
    tolerance: float
    n_queries: int
    n_queries_unlabelled: int
    n_queries_without_relevant: int
    n_candidates: int
    n_unscored_candidates: int
    n_relevant: int
    n_relevant_not_retrieved: int
    groups: tuple[str, ...]
    methods: dict[str, str]
    rows: tuple[EvalRow, ...]


@dataclass(frozen=True, slots=True)
class _Item:
    """One candidate, reduced to what the filters need."""

    score: float | None
    rank: int  # 1-based rank by score within its batch, unscored last
    relevant: bool
    tokens: int


@dataclass(frozen=True, slots=True)
class _Query:
    group: str
    items: tuple[_Item, ...]


def _prepare(
    batches: Iterable[CandidateBatch],
    calibration: CalibrationFile,
    classify: Callable[[CandidateBatch], str],
) -> tuple[list[_Query], dict[str, int]]:
    scorer = scorer_from_name(calibration.scorer)
    counts: dict[str, int] = defaultdict(int)
    queries: list[_Query] = []
    for batch in batches:
        bound = bind_scorer(scorer, batch)
        relevant = set(batch.labels.relevant_chunk_ids) if batch.labels is not None else set()
        present = {c.chunk_id for c in batch.candidates}
        counts["queries"] += 1
        counts["unlabelled"] += batch.labels is None
        counts["without_relevant"] += batch.labels is not None and not relevant & present
        counts["not_retrieved"] += len(relevant - present)
        scores = [bound.score(batch.query, c) for c in batch.candidates]
        order = sorted(
            range(len(scores)),
            key=lambda i: (math.inf if scores[i] is None else scores[i], i),
        )
        ranks = {i: r for r, i in enumerate(order, start=1)}
        items = []
        for i, c in enumerate(batch.candidates):
            given = c.tokens is not None
            counts["tokens_given"] += given
            counts["candidates"] += 1
            counts["unscored"] += scores[i] is None
            items.append(
                _Item(
                    score=scores[i],
                    rank=ranks[i],
                    relevant=c.chunk_id in relevant,
                    tokens=c.tokens if c.tokens is not None else estimate_tokens(c.text),
                )
            )
        counts["relevant"] += sum(1 for it in items if it.relevant)
        queries.append(_Query(group=classify(batch), items=tuple(items)))
    return queries, counts


def _token_estimate(counts: dict[str, int]) -> str:
    estimate = f"ceil(len(text)/{CHARS_PER_TOKEN:g})"
    if counts["candidates"] and counts["tokens_given"] == counts["candidates"]:
        return "candidate.tokens"
    if counts["tokens_given"] == 0:
        return estimate
    return f"candidate.tokens where given ({counts['tokens_given']}), else {estimate}"


def _row(
    *,
    alpha: float,
    group: str,
    method: Method,
    parameter: str,
    queries: Sequence[_Query],
    keep: Callable[[_Query, _Item], bool],
    tolerance: float,
    threshold: float | None = None,
    k: int | None = None,
) -> EvalRow:
    n_cand = n_removed = n_rel = n_rel_kept = tok_total = tok_saved = 0
    for q in queries:
        for it in q.items:
            kept = keep(q, it)
            n_cand += 1
            tok_total += it.tokens
            if not kept:
                n_removed += 1
                tok_saved += it.tokens
            if it.relevant:
                n_rel += 1
                n_rel_kept += kept
    target = 1.0 - alpha
    coverage = n_rel_kept / n_rel if n_rel else None
    gap = coverage - target if coverage is not None else None
    return EvalRow(
        alpha=alpha,
        target=round(target, 12),
        group=group,
        method=method,
        parameter=parameter,
        threshold=threshold,
        k=k,
        n_queries=len(queries),
        n_candidates=n_cand,
        n_removed=n_removed,
        n_relevant=n_rel,
        n_relevant_kept=n_rel_kept,
        coverage=coverage,
        gap=gap,
        se=math.sqrt(target * (1.0 - target) / n_rel) if n_rel else None,
        removal=n_removed / n_cand if n_cand else 0.0,
        tokens_total=tok_total,
        tokens_saved=tok_saved,
        tokens_saved_fraction=tok_saved / tok_total if tok_total else 0.0,
        below_target=gap is not None and gap < -tolerance,
    )


def _fmt_threshold(t: float) -> str:
    return "tau=inf" if math.isinf(t) else f"tau={t + 0.0:.4g}"  # + 0.0 turns -0.0 into 0.0


def _rows_for_alpha(
    alpha: float,
    calibration: CalibrationFile,
    groups: dict[str, list[_Query]],
    tolerance: float,
) -> list[EvalRow]:
    filt = ConformalFilter(calibration, alpha=alpha)
    pooled = filt.threshold_for(None)
    base = calibration.baselines
    top_k = base.top_k.get(alpha_key(alpha)) if base is not None else None
    fixed = base.fixed_threshold if base is not None else None

    def conformal(q: _Query, it: _Item) -> bool:
        return it.score is None or it.score <= filt.threshold_for(q.group).threshold

    def conformal_pooled(q: _Query, it: _Item) -> bool:
        return it.score is None or it.score <= pooled.threshold

    def in_top_k(q: _Query, it: _Item) -> bool:
        return top_k is not None and it.rank <= top_k

    def under_fixed(q: _Query, it: _Item) -> bool:
        return it.score is None or (fixed is not None and it.score <= fixed)

    rows: list[EvalRow] = []

    def emit(
        group: str,
        method: Method,
        parameter: str,
        keep: Callable[[_Query, _Item], bool],
        *,
        threshold: float | None = None,
        k: int | None = None,
    ) -> None:
        rows.append(
            _row(
                alpha=alpha,
                group=group,
                method=method,
                parameter=parameter,
                queries=groups[group],
                keep=keep,
                tolerance=tolerance,
                threshold=threshold,
                k=k,
            )
        )

    for group in groups:
        if group == ALL and calibration.by_class:
            emit(group, "conformal", "per-class bins", conformal)
        else:
            choice = filt.threshold_for(None if group == ALL else group)
            label = f"{_fmt_threshold(choice.threshold)} ({choice.bin}, n={choice.n})"
            thr = choice.threshold if choice.finite else None
            emit(group, "conformal", label, conformal, threshold=thr)
        if calibration.by_class:
            label = f"{_fmt_threshold(pooled.threshold)} ({POOLED}, n={pooled.n})"
            thr = pooled.threshold if pooled.finite else None
            emit(group, "conformal_pooled", label, conformal_pooled, threshold=thr)
        if top_k is not None:
            emit(group, "top_k", f"k={top_k}", in_top_k, k=top_k)
        if fixed is not None:
            label = f"{_fmt_threshold(fixed)} (all alphas)"
            emit(group, "fixed_threshold", label, under_fixed, threshold=fixed)
    return rows


def evaluate(
    test_batches: Iterable[CandidateBatch],
    calibration: CalibrationFile,
    *,
    classify: Callable[[CandidateBatch], str],
    alphas: Sequence[float] | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> EvaluationReport:
    """Coverage, removal and tokens saved per alpha (default: every alpha of the calibration),
    for the conformal filter and the baselines; per class too when the calibration has classes.
    ``below_target`` marks rows whose coverage is more than ``tolerance`` under ``1 - alpha``."""
    chosen = list(calibration.alphas) if alphas is None else [float(a) for a in alphas]
    for a in chosen:
        calibration.key_for(a)  # raises CalibrationError for an alpha the file lacks
    if not 0.0 <= tolerance < 1.0:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance!r}")
    queries, counts = _prepare(test_batches, calibration, classify)
    groups: dict[str, list[_Query]] = {ALL: queries}
    if calibration.by_class:
        for q in sorted(queries, key=lambda q: q.group):
            groups.setdefault(q.group, []).append(q)
    rows = [row for a in chosen for row in _rows_for_alpha(a, calibration, groups, tolerance)]
    methods = sorted({r.method for r in rows})
    return EvaluationReport(
        calibration=f"{calibration.name}@{calibration.version}",
        scorer=calibration.scorer,
        token_estimate=_token_estimate(counts),
        tolerance=tolerance,
        n_queries=counts["queries"],
        n_queries_unlabelled=counts["unlabelled"],
        n_queries_without_relevant=counts["without_relevant"],
        n_candidates=counts["candidates"],
        n_unscored_candidates=counts["unscored"],
        n_relevant=counts["relevant"],
        n_relevant_not_retrieved=counts["not_retrieved"],
        groups=tuple(groups),
        methods={m: METHOD_NOTES[m] for m in methods},
        rows=tuple(rows),
    )


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def render_table(report: EvaluationReport) -> str:
    """The report as a plain-text table (one line per alpha, group and method)."""
    head = [
        f"calibration {report.calibration}  scorer {report.scorer}  "
        f"tokens: {report.token_estimate}",
        f"{report.n_queries} queries ({report.n_queries_without_relevant} without a relevant "
        f"candidate, {report.n_queries_unlabelled} unlabelled), {report.n_candidates} candidates "
        f"({report.n_unscored_candidates} unscored), {report.n_relevant} relevant "
        f"({report.n_relevant_not_retrieved} relevant ids not among the candidates)",
    ]
    cols = (
        "alpha",
        "target",
        "group",
        "method",
        "parameter",
        "coverage",
        "gap",
        "se",
        "removed",
        "tokens saved",
        "n_rel",
        "flag",
    )
    body = [
        (
            f"{r.alpha:g}",
            _pct(r.target),
            r.group,
            r.method,
            r.parameter,
            _pct(r.coverage),
            "-" if r.gap is None else f"{100 * r.gap:+.1f}",
            "-" if r.se is None else f"{100 * r.se:.1f}",
            _pct(r.removal),
            f"{r.tokens_saved} ({_pct(r.tokens_saved_fraction)})",
            str(r.n_relevant),
            "BELOW" if r.below_target else "",
        )
        for r in report.rows
    ]
    widths = [max(len(c), *(len(row[i]) for row in body)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths).rstrip())
    lines += [
        "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in body
    ]
    notes = [f"  {m}: {note}" for m, note in report.methods.items()]
    tail = [
        f"BELOW = coverage more than {100 * report.tolerance:.1f} points under the target; gap and "
        "se (binomial standard error at the target, sqrt(t(1-t)/n_rel)) in points",
        "methods:",
        *notes,
    ]
    return "\n".join([*head, "", *lines, "", *tail]) + "\n"
