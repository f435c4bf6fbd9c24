"""A scored batch for the naive baseline's and the quality report's tests: candidates
``c0``, ``c1``... with the given texts and rerank scores, 100 declared instruction tokens."""

from __future__ import annotations

from ctxbudget.schemas import (
    AnswerContract,
    Candidate,
    CandidateBatch,
    Instructions,
    ModelSpec,
    Principal,
    Query,
    Turn,
)


def scored_batch(
    texts: list[tuple[str, float]],
    *,
    input_limit: int,
    reserve: int | None = None,
    conversation: tuple[Turn, ...] = (),
) -> CandidateBatch:
    """Candidates ``c<i>`` of ``texts`` (text, rerank score) in order, in one batch."""
    candidates = tuple(
        Candidate(
            chunk_id=f"c{i}",
            doc_id=f"d{i}",
            source_id="s",
            text=text,
            rerank_score=score,
            retrieval_score=1.0,
        )
        for i, (text, score) in enumerate(texts)
    )
    return CandidateBatch(
        request_id="r1",
        tenant_id="acme",
        principal=Principal(tenant_id="acme", access_labels=("public",)),
        query=Query(text="q"),
        conversation=conversation,
        instructions=Instructions(text=None, tokens=100),
        model=ModelSpec(name="m", input_limit=input_limit),
        answer_contract=AnswerContract(kind="short_fact", reserve_tokens=reserve),
        candidates=candidates,
    )
