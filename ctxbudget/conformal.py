"""Split-conformal evidence filtering: calibrate a score threshold, then keep what falls under it.

The method (seed 002): a non-conformity score ``A(q, s)`` says how *un*-like a relevant passage
a candidate is (lower = more relevant). On labelled calibration queries we collect the scores of
the RELEVANT passages, ``s_1 <= ... <= s_n``, and take

    tau_alpha = s_(k),  k = ceil((n + 1) * (1 - alpha))

the k-th smallest. At serving time a candidate is kept when ``A(q, s) <= tau_alpha``. If the
calibration and test queries are exchangeable, a relevant test passage is then kept with
probability at least ``1 - alpha`` (and, for continuous scores without ties, at most
``1 - alpha + 1 / (n + 1)``). When ``k > n`` there are too few calibration passages for that
alpha: the threshold is ``+inf`` and the filter keeps everything (``finite=False``).

``k`` is computed exactly on the *decimal* value of alpha (``Fraction(repr(alpha))``), so that
``alpha=0.7, n=9`` gives ``k=3`` and not the ``k=4`` that binary floating point would produce.

Notes on the guarantee:

* It is marginal over relevant passages. Calibration pools every relevant passage of every
  query; when a query has several relevant passages they are not independent, so the bound is
  exact for "one relevant passage drawn per query" and holds approximately for the pooled
  fraction (the paper does the same). Splits are by query, never by passage.
* Mondrian (per query class) calibration gives the bound within each class; a class with fewer
  than ``min_per_class`` relevant passages falls back to the pooled threshold, and the file
  records which bin each class uses.
* A threshold is only meaningful for the scorer it was calibrated with: the file records the
  scorer, and a filter built with another scorer is refused.

This module is pure: no clock, no environment, no I/O except ``load_calibration`` and
``save_calibration``.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Literal, NamedTuple, Protocol, runtime_checkable

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ctxbudget.errors import ConfigError
from ctxbudget.schemas import Candidate, CandidateBatch, Coverage, Query

CALIBRATION_SCHEMA = "ctx.calibration.v1"
POOLED = "pooled"
#: Below this many relevant passages a query class is not given its own (Mondrian) bin.
#: A class needs at least 1/alpha - 1 passages for a finite threshold at all (19 at alpha 0.05);
#: 50 also keeps the spread of the realised coverage, about sqrt(alpha(1-alpha)/(n+2)), near 0.04.
DEFAULT_MIN_PER_CLASS = 50
SCORER_NAMES: tuple[str, ...] = ("auto", "rerank", "retrieval", "embedding")
QUANTILE_RULE = (
    "tau = ceil((n+1)(1-alpha))-th smallest non-conformity score of the relevant calibration "
    "passages; +inf (keep all) when that rank exceeds n; keep a candidate when score <= tau"
)


class CalibrationError(ConfigError):
    """A calibration file is missing, unreadable or invalid, or does not fit its use."""


# ---------------------------------------------------------------- the finite-sample quantile


def _check_alpha(alpha: float) -> Fraction:
    """Validate alpha and return its exact decimal value."""
    if isinstance(alpha, bool) or not isinstance(alpha, int | float):
        raise ValueError(f"alpha must be a number strictly between 0 and 1, got {alpha!r}")
    if not math.isfinite(alpha) or not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    return Fraction(repr(float(alpha)))


def conformal_rank(n: int, alpha: float) -> int:
    """The 1-based order statistic ``ceil((n + 1)(1 - alpha))``; it may exceed ``n``."""
    a = _check_alpha(alpha)
    if n < 1:
        raise ValueError(f"need at least one calibration score (n >= 1), got n={n}")
    return math.ceil((n + 1) * (1 - a))


def min_calibration_size(alpha: float) -> int:
    """The smallest n for which the threshold at ``alpha`` is finite: ``ceil(1/alpha - 1)``."""
    a = _check_alpha(alpha)
    return max(1, math.ceil((1 - a) / a))


@dataclass(frozen=True, slots=True)
class ThresholdResult:
    """A calibrated threshold: ``threshold`` is ``math.inf`` exactly when ``finite`` is False."""

    alpha: float
    n: int
    rank: int
    threshold: float
    finite: bool


def conformal_threshold(scores: Iterable[float], alpha: float) -> ThresholdResult:
    """The split-conformal threshold of the relevant calibration scores at level ``alpha``."""
    values = sorted(float(s) for s in scores)
    if any(math.isnan(v) for v in values):
        raise ValueError("calibration scores must not contain NaN")
    n = len(values)
    if n < 1:
        raise ValueError("need at least one calibration score (n >= 1), got none")
    k = conformal_rank(n, alpha)
    if k > n:
        return ThresholdResult(alpha=float(alpha), n=n, rank=k, threshold=math.inf, finite=False)
    return ThresholdResult(alpha=float(alpha), n=n, rank=k, threshold=values[k - 1], finite=True)


def alpha_key(alpha: float) -> str:
    """The canonical key of an alpha in a calibration file (shortest round-trip repr)."""
    _check_alpha(alpha)
    return repr(float(alpha))


# ---------------------------------------------------------------- non-conformity scorers


class NonconformityScorer(Protocol):
    """Maps a (query, candidate) pair to a non-conformity score; lower = more relevant.

    ``None`` means "no score for this candidate" (e.g. the field is missing); a filter keeps
    such a candidate and counts it, it never drops it silently.
    """

    @property
    def name(self) -> str: ...

    def score(self, query: Query, candidate: Candidate) -> float | None: ...


@runtime_checkable
class BatchBoundScorer(Protocol):
    """A scorer that needs the whole batch (the query embedding, the auto choice) first."""

    def bind(self, batch: CandidateBatch) -> NonconformityScorer: ...


def bind_scorer(scorer: NonconformityScorer, batch: CandidateBatch) -> NonconformityScorer:
    """The scorer to use on this batch: ``scorer.bind(batch)`` when it has one, else itself."""
    if isinstance(scorer, BatchBoundScorer):
        return scorer.bind(batch)
    return scorer


@dataclass(frozen=True, slots=True)
class RerankScorer:
    """``-rerank_score``."""

    @property
    def name(self) -> str:
        return "rerank"

    def score(self, query: Query, candidate: Candidate) -> float | None:
        s = candidate.rerank_score
        return None if s is None else -s


@dataclass(frozen=True, slots=True)
class RetrievalScorer:
    """``-retrieval_score``."""

    @property
    def name(self) -> str:
        return "retrieval"

    def score(self, query: Query, candidate: Candidate) -> float | None:
        s = candidate.retrieval_score
        return None if s is None else -s


def query_embedding_of(batch: CandidateBatch) -> tuple[float, ...] | None:
    """The query embedding carried in ``metadata["query_embedding"]`` of the first candidate
    that has a usable one (the v1 contract has no query embedding field), else None."""
    for candidate in batch.candidates:
        raw = candidate.metadata.get("query_embedding")
        if not isinstance(raw, list | tuple) or not raw:
            continue
        if all(isinstance(x, int | float) and not isinstance(x, bool) for x in raw):
            vec = tuple(float(x) for x in raw)
            if all(math.isfinite(x) for x in vec):
                return vec
    return None


@dataclass(frozen=True, slots=True)
class EmbeddingScorer:
    """``1 - cos(query_embedding, candidate.embedding)``; None when either vector is missing,
    zero or of another dimension. Bind it to a batch to pick up the query embedding."""

    query_embedding: tuple[float, ...] | None = None

    @property
    def name(self) -> str:
        return "embedding"

    def bind(self, batch: CandidateBatch) -> NonconformityScorer:
        return EmbeddingScorer(query_embedding_of(batch))

    def score(self, query: Query, candidate: Candidate) -> float | None:
        q, c = self.query_embedding, candidate.embedding
        if q is None or c is None or len(q) != len(c) or not q:
            return None
        qn = math.sqrt(math.fsum(x * x for x in q))
        cn = math.sqrt(math.fsum(x * x for x in c))
        if qn == 0.0 or cn == 0.0 or not math.isfinite(qn * cn):
            return None
        cos = math.fsum(x * y for x, y in zip(q, c, strict=True)) / (qn * cn)
        return 1.0 - max(-1.0, min(1.0, cos))


@dataclass(frozen=True, slots=True)
class AutoScorer:
    """Rerank when the batch has rerank scores, else retrieval. Calibration resolves it once
    for the whole data set (see ``resolve_scorer``); unbound it scores like ``RerankScorer``."""

    @property
    def name(self) -> str:
        return "auto"

    def bind(self, batch: CandidateBatch) -> NonconformityScorer:
        if any(c.rerank_score is not None for c in batch.candidates):
            return RerankScorer()
        return RetrievalScorer()

    def score(self, query: Query, candidate: Candidate) -> float | None:
        return RerankScorer().score(query, candidate)


def scorer_from_name(name: str) -> NonconformityScorer:
    """The built-in scorer called ``name`` (one of ``SCORER_NAMES``)."""
    scorers: dict[str, NonconformityScorer] = {
        "auto": AutoScorer(),
        "rerank": RerankScorer(),
        "retrieval": RetrievalScorer(),
        "embedding": EmbeddingScorer(),
    }
    try:
        return scorers[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r}; expected one of {SCORER_NAMES}") from None


def resolve_scorer(
    scorer: NonconformityScorer, batches: Sequence[CandidateBatch]
) -> NonconformityScorer:
    """Turn ``auto`` into one concrete scorer for a whole calibration set.

    A threshold mixes nothing: if some batches have rerank scores and others do not, ``auto``
    is ambiguous and we refuse rather than pool two score scales into one quantile.
    """
    if scorer.name != "auto":
        return scorer
    with_candidates = [b for b in batches if b.candidates]
    with_rerank = sum(
        1 for b in with_candidates if any(c.rerank_score is not None for c in b.candidates)
    )
    if with_rerank == len(with_candidates):
        return RerankScorer()
    if with_rerank == 0:
        return RetrievalScorer()
    raise ValueError(
        f"scorer 'auto' is ambiguous: {with_rerank} of {len(with_candidates)} batches have "
        "rerank scores; choose the scorer explicitly (rerank or retrieval)"
    )


# ---------------------------------------------------------------- split by query


@dataclass(frozen=True, slots=True)
class QuerySplit:
    """Calibration and held-out batches; no request_id is in both."""

    calibration: tuple[CandidateBatch, ...]
    test: tuple[CandidateBatch, ...]


def split_by_query(
    batches: Iterable[CandidateBatch], *, calib_fraction: float, seed: int
) -> QuerySplit:
    """Split by request (query), never by passage: sort the request ids, shuffle them with
    ``random.Random(seed)``, give the first ``round(n * calib_fraction)`` to calibration.

    The result does not depend on the input order (batches sharing a request_id stay together
    in their input order), and each side is returned sorted by request_id.
    """
    if isinstance(calib_fraction, bool) or not 0.0 < calib_fraction <= 1.0:
        raise ValueError(f"calib_fraction must be in (0, 1], got {calib_fraction!r}")
    groups: dict[str, list[CandidateBatch]] = defaultdict(list)
    for batch in batches:
        groups[batch.request_id].append(batch)
    ids = sorted(groups)
    random.Random(seed).shuffle(ids)
    exact = len(ids) * Fraction(repr(float(calib_fraction)))
    n_calib = min(len(ids), max(1 if ids else 0, math.floor(exact + Fraction(1, 2))))
    calib_ids, test_ids = sorted(ids[:n_calib]), sorted(ids[n_calib:])
    return QuerySplit(
        calibration=tuple(b for rid in calib_ids for b in groups[rid]),
        test=tuple(b for rid in test_ids for b in groups[rid]),
    )


def batches_sha256(batches: Iterable[CandidateBatch]) -> str:
    """A content hash of a set of batches, independent of their order."""
    lines = sorted(b.model_dump_json(by_alias=True) for b in batches)
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


# ---------------------------------------------------------------- the calibration file


class _FileModel(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True, extra="ignore", populate_by_name=True)


NonNeg = Annotated[int, Field(ge=0)]


class ThresholdEntry(_FileModel):
    """One threshold; ``threshold`` is null (JSON has no infinity) exactly when not finite."""

    threshold: float | None
    n: NonNeg
    finite: bool
    rank: int | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ThresholdEntry:
        if self.finite != (self.threshold is not None):
            raise ValueError("'finite' must be true exactly when 'threshold' is a number")
        if self.threshold is not None and not math.isfinite(self.threshold):
            raise ValueError("a finite threshold must be a finite number")
        return self

    @classmethod
    def of(cls, result: ThresholdResult) -> ThresholdEntry:
        return cls(
            threshold=result.threshold if result.finite else None,
            n=result.n,
            finite=result.finite,
            rank=result.rank,
        )


class ClassThresholdEntry(ThresholdEntry):
    """A class's threshold and the bin it came from: the class itself, or ``pooled``."""

    bin: str
    n_class: NonNeg = 0


class ClassInfo(_FileModel):
    n_queries: NonNeg
    n_relevant: NonNeg
    bin: str
    reason: str | None = None


class Baselines(_FileModel):
    """Heuristic filters tuned on the same calibration split, for the evaluation's comparison."""

    top_k: dict[str, Annotated[int, Field(ge=1)]]
    top_k_calibration_coverage: dict[str, float]
    top_k_rule: str = "smallest k whose coverage on the calibration split reaches 1 - alpha"
    fixed_threshold: float | None
    fixed_threshold_calibration_coverage: float | None = None
    fixed_threshold_rule: str = (
        "one score threshold for every alpha: the cutoff that maximises F1 of "
        "'score <= t' against the relevance labels on the calibration split"
    )


class CalibrationFile(_FileModel):
    """``ctx.calibration.v1``: conformal thresholds for one scorer, per alpha, pooled and
    optionally per query class, with the counts needed to judge them."""

    schema_: Literal["ctx.calibration.v1"] = Field(default="ctx.calibration.v1", alias="schema")
    name: Annotated[str, Field(min_length=1)]
    version: Annotated[str, Field(min_length=1)]
    method: str = "split_conformal"
    quantile: str = QUANTILE_RULE
    scorer: Annotated[str, Field(min_length=1)]
    scorer_requested: str | None = None
    alphas: tuple[float, ...]
    pooled: dict[str, ThresholdEntry]
    by_class: dict[str, dict[str, ClassThresholdEntry]] = Field(default_factory=dict)
    class_info: dict[str, ClassInfo] = Field(default_factory=dict)
    min_per_class: Annotated[int, Field(ge=1)] | None = None
    n_queries: NonNeg
    n_queries_unlabelled: NonNeg = 0
    n_queries_without_relevant: NonNeg
    n_relevant: NonNeg
    n_relevant_unscored: NonNeg = 0
    n_relevant_not_retrieved: NonNeg = 0
    n_candidates: NonNeg = 0
    data_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    created: str
    baselines: Baselines | None = None

    @field_validator("created")
    @classmethod
    def _iso_date(cls, v: str) -> str:
        try:
            date.fromisoformat(v)
        except ValueError:
            raise ValueError(f"'created' must be an ISO date (YYYY-MM-DD), got {v!r}") from None
        return v

    @model_validator(mode="after")
    def _alphas_match(self) -> CalibrationFile:
        if not self.alphas:
            raise ValueError("'alphas' must not be empty")
        for a in self.alphas:
            if not 0.0 < a < 1.0:
                raise ValueError(f"alpha {a!r} is not strictly between 0 and 1")
        if list(self.alphas) != sorted(set(self.alphas)):
            raise ValueError("'alphas' must be sorted and distinct")
        keys = {alpha_key(a) for a in self.alphas}
        if set(self.pooled) != keys:
            raise ValueError(
                f"'pooled' keys {sorted(self.pooled)} do not match alphas {sorted(keys)}"
            )
        for cls, entries in self.by_class.items():
            if set(entries) != keys:
                raise ValueError(f"'by_class.{cls}' keys {sorted(entries)} do not match alphas")
        return self

    def key_for(self, alpha: float) -> str:
        """The key of ``alpha`` in this file, or a CalibrationError listing the alphas it has."""
        for a in self.alphas:
            if math.isclose(a, alpha, rel_tol=1e-9, abs_tol=0.0):
                return alpha_key(a)
        raise CalibrationError(
            f"calibration {self.name}@{self.version} has no threshold for alpha={alpha!r}; "
            f"it was calibrated for alpha in {list(self.alphas)}"
        )


def _describe_validation(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:5]:
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        parts.append(f"{loc}: {e['msg']}")
    more = err.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def load_calibration(path: str | os.PathLike[str]) -> CalibrationFile:
    """Read and validate a calibration file; any problem is a CalibrationError naming the path."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise CalibrationError(f"{p}: calibration file not found") from None
    except IsADirectoryError:
        raise CalibrationError(f"{p}: is a directory, not a calibration file") from None
    except OSError as e:
        raise CalibrationError(f"{p}: cannot read calibration file: {e.strerror or e}") from e
    if not raw.strip():
        raise CalibrationError(f"{p}: calibration file is empty")
    try:
        return CalibrationFile.model_validate_json(raw)
    except ValidationError as e:
        raise CalibrationError(
            f"{p}: invalid calibration file ({CALIBRATION_SCHEMA}): {_describe_validation(e)}"
        ) from e


def save_calibration(calibration: CalibrationFile, path: str | os.PathLike[str]) -> Path:
    """Write the file atomically (temporary file, then rename); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(calibration.model_dump_json(by_alias=True, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, p)
    return p


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

    class_entries: dict[str, dict[str, ClassThresholdEntry]] = {}
    class_info: dict[str, ClassInfo] = {}
    if by_class:
        for cls in sorted(t.class_queries):
            scores = t.by_class.get(cls, [])
            own = len(scores) >= min_per_class
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
    )


# ---------------------------------------------------------------- the filter


class ThresholdChoice(NamedTuple):
    """The threshold that applies to one query class (``math.inf`` when not finite)."""

    threshold: float
    n: int
    bin: str
    finite: bool


@dataclass(frozen=True, slots=True)
class Decision:
    """Why one candidate was kept or not."""

    chunk_id: str
    kept: bool
    score: float | None
    threshold: float
    reason: Literal["within_threshold", "above_threshold", "unscored"]


@dataclass(frozen=True, slots=True)
class FilterOutcome:
    """The filter's verdict on one batch; ids in candidate order."""

    kept: tuple[str, ...]
    dropped: tuple[str, ...]
    unscored: tuple[str, ...]
    decisions: tuple[Decision, ...]
    coverage: Coverage


class ConformalFilter:
    """Keeps a candidate when its non-conformity score is at most the calibrated threshold.

    Built from a calibration file, one alpha and the scorer the file was calibrated with
    (``None`` or ``"auto"`` means "the file's scorer"; another scorer is a CalibrationError).
    A candidate without a score is kept and counted in ``n_unscored_kept``.
    """

    def __init__(
        self,
        calibration: CalibrationFile,
        *,
        alpha: float,
        scorer: NonconformityScorer | str | None = None,
    ) -> None:
        key = calibration.key_for(alpha)
        if scorer is None or scorer == "auto":
            scorer = scorer_from_name(calibration.scorer)
        elif isinstance(scorer, str):
            scorer = scorer_from_name(scorer)
        if scorer.name != calibration.scorer:
            raise CalibrationError(
                f"calibration {calibration.name}@{calibration.version} was made with scorer "
                f"{calibration.scorer!r}; its thresholds do not apply to scorer {scorer.name!r}"
            )
        self._calibration = calibration
        self._alpha = next(a for a in calibration.alphas if alpha_key(a) == key)
        self._scorer: NonconformityScorer = scorer
        self._pooled = calibration.pooled[key]
        self._by_class = {cls: entries[key] for cls, entries in calibration.by_class.items()}
        #: Candidates kept by ``keep`` because the scorer gave them no score (running count).
        self.n_unscored_kept = 0

    @property
    def alpha(self) -> float:
        return self._alpha

    @property
    def scorer(self) -> NonconformityScorer:
        return self._scorer

    @property
    def calibration(self) -> CalibrationFile:
        return self._calibration

    def for_batch(self, batch: CandidateBatch) -> ConformalFilter:
        """A filter whose scorer is bound to this batch (needed by the embedding scorer)."""
        bound = ConformalFilter.__new__(ConformalFilter)
        bound._calibration = self._calibration
        bound._alpha = self._alpha
        bound._scorer = bind_scorer(self._scorer, batch)
        bound._pooled = self._pooled
        bound._by_class = self._by_class
        bound.n_unscored_kept = 0
        return bound

    def threshold_for(self, query_class: str | None) -> ThresholdChoice:
        """The threshold for a class: its Mondrian bin when calibrated, else the pooled one."""
        entry = self._by_class.get(query_class) if query_class is not None else None
        if entry is not None:
            thr = entry.threshold if entry.threshold is not None else math.inf
            return ThresholdChoice(thr, entry.n, entry.bin, entry.finite)
        p = self._pooled
        return ThresholdChoice(
            p.threshold if p.threshold is not None else math.inf, p.n, POOLED, p.finite
        )

    def decide(self, query: Query, candidate: Candidate, query_class: str | None) -> Decision:
        """The decision for one candidate, without touching any counter."""
        choice = self.threshold_for(query_class)
        s = self._scorer.score(query, candidate)
        if s is None:
            return Decision(candidate.chunk_id, True, None, choice.threshold, "unscored")
        kept = s <= choice.threshold
        reason: Literal["within_threshold", "above_threshold"] = (
            "within_threshold" if kept else "above_threshold"
        )
        return Decision(candidate.chunk_id, kept, s, choice.threshold, reason)

    def keep(self, query: Query, candidate: Candidate, query_class: str | None) -> bool:
        """True when the candidate stays; an unscored candidate stays and is counted."""
        d = self.decide(query, candidate, query_class)
        if d.reason == "unscored":
            self.n_unscored_kept += 1
        return d.kept

    def coverage(self, query_class: str | None) -> Coverage:
        """The coverage statement for a pack; ``guaranteed`` only with a finite threshold."""
        choice = self.threshold_for(query_class)
        reasons: list[str] = []
        if not choice.finite:
            reasons.append(
                f"no finite threshold: {choice.n} relevant calibration passages < "
                f"{min_calibration_size(self._alpha)} needed at alpha={self._alpha}; "
                "every candidate kept"
            )
        if query_class is not None and self._by_class and choice.bin == POOLED:
            info = self._calibration.class_info.get(query_class)
            why = info.reason if info is not None and info.reason else "class not calibrated"
            reasons.append(f"class {query_class!r} uses the pooled threshold ({why})")
        return Coverage(
            alpha=self._alpha,
            threshold=choice.threshold if choice.finite else None,
            n_calibration=choice.n,
            bin=choice.bin,
            guaranteed=choice.finite,
            reason="; ".join(reasons) or None,
        )

    def apply(self, batch: CandidateBatch, query_class: str | None) -> FilterOutcome:
        """Decide every candidate of a batch (binding the scorer to it first)."""
        bound = self.for_batch(batch)
        decisions = tuple(bound.decide(batch.query, c, query_class) for c in batch.candidates)
        return FilterOutcome(
            kept=tuple(d.chunk_id for d in decisions if d.kept),
            dropped=tuple(d.chunk_id for d in decisions if not d.kept),
            unscored=tuple(d.chunk_id for d in decisions if d.reason == "unscored"),
            decisions=decisions,
            coverage=self.coverage(query_class),
        )
