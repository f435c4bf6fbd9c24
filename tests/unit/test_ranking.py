"""How candidates rank (ctxbudget.ranking): the primary score, the rank key that breaks every
tie the same way, and a family's best-ranked copy."""

from __future__ import annotations

from ctxbudget.policy import PolicyStore
from ctxbudget.ranking import best_ranked_member, primary_score_field, rank_key
from ctxbudget.schemas import ConsolidatedItem
from ctxbudget.stages.consolidate import Consolidator
from ctxbudget.stages.route import QueryRouter
from ctxbudget.testing import batch, candidate
from ctxbudget.tokens import TokenizerRegistry


def test_rerank_scores_rank_the_batch_when_any_is_given() -> None:
    """One reranked candidate makes rerank scores the batch's primary score."""
    plain = [candidate("a", "one", 2.0), candidate("b", "two", 1.0)]
    assert primary_score_field(plain) == "retrieval_score"
    assert primary_score_field([*plain, candidate("c", "three", rerank_score=0.5)]) == (
        "rerank_score"
    )


def test_the_rank_key_orders_scored_first_then_score_authority_and_id() -> None:
    """Unscored last; among equals a higher authority, then the smaller id, wins."""
    keys = {
        "unscored": rank_key(None, 1.0, "a"),
        "low": rank_key(0.5, 1.0, "a"),
        "high-weak": rank_key(2.0, 0.3, "a"),
        "high-strong-b": rank_key(2.0, 0.9, "b"),
        "high-strong-a": rank_key(2.0, 0.9, "a"),
    }
    assert sorted(keys, key=keys.__getitem__) == [
        "high-strong-a",
        "high-strong-b",
        "high-weak",
        "low",
        "unscored",
    ]


def test_best_ranked_member_is_the_family_copy_retrieval_ranked_first(
    store: PolicyStore,
) -> None:
    """The copy with the higher score is the family's best-ranked one, whichever represents it."""
    text = "The gateway rotates API keys every ninety days and keeps the old key for a day."
    policy, rules = store.get("default@1")
    b = batch([candidate("low", text, 1.0), candidate("high", text, 3.0)])
    routed = QueryRouter(policy=policy, rules=rules, tokenizers=TokenizerRegistry()).run(b)
    out = Consolidator(policy=policy).run(routed)
    (item,) = out.items
    assert isinstance(item, ConsolidatedItem)
    cands = b.candidates
    field = primary_score_field(cands)
    assert best_ranked_member(item, cands, field, policy).chunk_id == "high"
