"""Non-conformity scorers: rerank, retrieval, embedding and auto (lower = more relevant)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ctxbudget.conformal._common import SCORER_NAMES
from ctxbudget.schemas import Candidate, CandidateBatch, Query

# ---------------------------------------------------------------- non-conformity scorers


class NonconformityScorer(Protocol):
    """Maps a (query, candidate) pair to a non-conformity score; lower = more relevant.

    ``None`` means "no score for this candidate" (e.g. the field is missing); a filter keeps
    such a candidate and counts it, it never drops it silently.
    """

    @property
    def name(self) -> str:
        """The scorer's name, as calibration files record it."""
        ...

    def score(self, query: Query, candidate: Candidate) -> float | None:
        """The score of ``candidate`` for ``query`` (lower = more
        relevant); None when it has none."""
        ...


@runtime_checkable
class BatchBoundScorer(Protocol):
    """A scorer that needs the whole batch (the query embedding, the auto choice) first."""

    def bind(self, batch: CandidateBatch) -> NonconformityScorer:
        """The scorer to use on ``batch``."""
        ...


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
        """``rerank``, as calibration files record it."""
        return "rerank"

    def score(self, query: Query, candidate: Candidate) -> float | None:
        """Minus the candidate's rerank score; None when it has none."""
        s = candidate.rerank_score
        return None if s is None else -s


@dataclass(frozen=True, slots=True)
class RetrievalScorer:
    """``-retrieval_score``."""

    @property
    def name(self) -> str:
        """``retrieval``, as calibration files record it."""
        return "retrieval"

    def score(self, query: Query, candidate: Candidate) -> float | None:
        """Minus the candidate's retrieval score; None when it has none."""
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
        """``embedding``, as calibration files record it."""
        return "embedding"

    def bind(self, batch: CandidateBatch) -> NonconformityScorer:
        """A scorer holding the batch's query embedding (None when no
        candidate carries a usable one)."""
        return EmbeddingScorer(query_embedding_of(batch))

    def score(self, query: Query, candidate: Candidate) -> float | None:
        """One minus the cosine of the query and candidate embeddings, in [0, 2]; None when
        either is missing, empty or zero, their dimensions differ, or the result is not finite."""
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
        """``auto``, as calibration files record it (a calibration
        resolves it to a concrete scorer)."""
        return "auto"

    def bind(self, batch: CandidateBatch) -> NonconformityScorer:
        """Rerank when any candidate of ``batch`` has a rerank score, else retrieval."""
        if any(c.rerank_score is not None for c in batch.candidates):
            return RerankScorer()
        return RetrievalScorer()

    def score(self, query: Query, candidate: Candidate) -> float | None:
        """Unbound, the score of :class:`RerankScorer`."""
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
