"""Labelled candidate batches and a small calibration, shared by the conformal filter's tests
and the evaluation's."""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget import schemas
from ctxbudget.conformal import CalibrationFile, RerankScorer, calibrate
from ctxbudget.schemas import CandidateBatch

HASH = "0" * 64


def batch(
    request_id: str,
    rerank: Sequence[float | None],
    relevant: Sequence[int] = (),
    *,
    retrieval: Sequence[float | None] | None = None,
    class_hint: str | None = None,
    labelled: bool = True,
    embeddings: Sequence[Sequence[float] | None] | None = None,
    query_embedding: Sequence[float] | None = None,
) -> CandidateBatch:
    """A small labelled batch: candidate i has rerank score rerank[i]."""
    candidates = []
    for i, score in enumerate(rerank):
        meta = {"query_embedding": list(query_embedding)} if query_embedding and i == 0 else {}
        emb = embeddings[i] if embeddings is not None else None
        candidates.append(
            schemas.Candidate(
                chunk_id=f"{request_id}-{i}",
                doc_id=f"d-{request_id}",
                source_id="s",
                text="x" * (8 * (i + 1)),
                rerank_score=score,
                retrieval_score=retrieval[i] if retrieval is not None else None,
                embedding=tuple(emb) if emb is not None else None,
                metadata=meta,
            )
        )
    return schemas.CandidateBatch(
        request_id=request_id,
        tenant_id="t",
        principal=schemas.Principal(tenant_id="t"),
        query=schemas.Query(text=f"question {request_id}", class_hint=class_hint),
        model=schemas.ModelSpec(name="m", input_limit=8192),
        answer_contract=schemas.AnswerContract(kind="short_fact"),
        candidates=tuple(candidates),
        labels=schemas.Labels(relevant_chunk_ids=tuple(f"{request_id}-{i}" for i in relevant))
        if labelled
        else None,
    )


def by_hint(b: CandidateBatch) -> str:
    return b.query.class_hint or "point_lookup"


def simple_calibration(**kwargs: object) -> CalibrationFile:
    """Ten queries; query i has one relevant passage with rerank score i (non-conformity -i)."""
    batches = [batch(f"q{i:02d}", [float(i), -100.0], [0]) for i in range(10)]
    args: dict[str, object] = {
        "alphas": (0.05, 0.5),
        "scorer": RerankScorer(),
        "data_hash": HASH,
        "created": "2025-01-01",
    }
    args.update(kwargs)
    return calibrate(batches, **args)  # type: ignore[arg-type]
