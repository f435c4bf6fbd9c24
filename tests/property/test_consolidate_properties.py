"""The consolidation stage (ctxbudget.stages.consolidate): the copy that represents a family is
the same whatever the input order, one of the family, and never one that lost much of the
best-ranked copy's text; the family keeps its best score."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.policy import PolicyStore, default_policies_dir
from ctxbudget.schemas import Candidate, ConsolidatedItem
from ctxbudget.stages.consolidate import CANONICAL_KEEP, Consolidator
from ctxbudget.stages.route import QueryRouter
from ctxbudget.testing import batch, candidate
from ctxbudget.text import ShingleCache, words
from ctxbudget.tokens import TokenizerRegistry

STORE = PolicyStore.load(default_policies_dir())
POLICY, RULES = STORE.get("default@1")
BASE = (
    "The river rises in the northern hills and flows south for two hundred kilometres, "
    "passing three market towns before it reaches the sea at the old harbour. Its valley "
    "was settled early, and the first bridge was built of timber in the twelfth century."
)
PREFIXES = ("", "Reposted from wire.example: ", "[Syndicated] ", "Via the county gazette - ")
SUFFIXES = ("", " Read more at wire.example.", " (Republished with permission.)")


@st.composite
def families(draw: st.DrawFn) -> tuple[list[tuple[str, float]], list[int]]:
    n = draw(st.integers(2, 5))
    texts = []
    for _ in range(n):
        text = draw(st.sampled_from(PREFIXES)) + BASE + draw(st.sampled_from(SUFFIXES))
        if draw(st.booleans()):
            text = text.replace(". ", ".  ")
        if draw(st.booleans()):
            text = text[: len(text) // 2]  # a truncated copy
        texts.append(text)
    scores = draw(st.lists(st.floats(0.0, 10.0), min_size=n, max_size=n, unique=True))
    order = draw(st.permutations(list(range(n))))
    return list(zip(texts, scores, strict=True)), order


@settings(max_examples=60, deadline=None)
@given(families())
def test_the_canonical_copy_is_order_free_and_keeps_the_best_copys_text(
    drawn: tuple[list[tuple[str, float]], list[int]],
) -> None:
    """Any order gives the same representative, keeping the best copy's text and score."""
    copies, order = drawn
    cands = [candidate(f"c{i}", text, score) for i, (text, score) in enumerate(copies)]
    router = QueryRouter(policy=POLICY, rules=RULES, tokenizers=TokenizerRegistry())

    def items(cs: list[Candidate]) -> list[ConsolidatedItem]:
        routed = router.run(batch(cs, query="where does the river reach the sea?"))
        return list(Consolidator(policy=POLICY).run(routed).items)

    first = items(cands)
    again = items([cands[i] for i in order])
    assert [(it.item_id, it.text, it.score, it.chunk_ids) for it in first] == [
        (it.item_id, it.text, it.score, it.chunk_ids) for it in again
    ]
    by_id = {c.chunk_id: c for c in cands}
    cache = ShingleCache()
    size = POLICY.near_duplicate.shingle_words
    for it in first:
        members = [by_id[c] for c in it.chunk_ids]
        assert it.item_id in it.chunk_ids and it.text == by_id[it.item_id].text
        best = max(members, key=lambda c: c.retrieval_score or 0.0)
        assert it.score == best.retrieval_score
        kept = cache.text_shingles(it.text, size) & cache.text_shingles(best.text, size)
        assert len(kept) >= CANONICAL_KEEP * len(cache.text_shingles(best.text, size))
        assert words(it.text)  # never an empty representative
