"""How candidates rank: the batch's primary score, the rank key, and a family's best-ranked copy.

Shared by consolidation (which picks a family's representative) and selection (which reads a
family's best-ranked copy): best first means scored before unscored, a higher score, a higher
source authority, then the chunk id, so every tie is broken the same way in every process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ctxbudget.policy import Policy
from ctxbudget.schemas import Candidate, ConsolidatedItem


def primary_score_field(cands: Iterable[Candidate]) -> str:
    """Rerank scores when the batch has any, else retrieval scores."""
    return "rerank_score" if any(c.rerank_score is not None for c in cands) else "retrieval_score"


def candidate_score(c: Candidate, score_field: str) -> float | None:
    """``c``'s score in ``score_field`` (the batch's :func:`primary_score_field`)."""
    v: float | None = getattr(c, score_field)
    return v


def rank_key(score: float | None, authority: float, ident: str) -> tuple[int, float, float, str]:
    """Best first: scored before unscored, higher score, higher authority, then the id."""
    return (0 if score is not None else 1, -(score or 0.0), -authority, ident)


def best_ranked_member(
    item: ConsolidatedItem, cands: Sequence[Candidate], score_field: str, policy: Policy
) -> Candidate:
    """The copy of ``item``'s family that retrieval ranked best (the canonical copy that
    represents it may rank lower); ``score_field`` is the batch's :func:`primary_score_field`."""
    return cands[
        min(
            item.members,
            key=lambda m: rank_key(
                candidate_score(cands[m], score_field),
                policy.authority_of(cands[m].source_id, cands[m].authority),
                cands[m].chunk_id,
            ),
        )
    ]
