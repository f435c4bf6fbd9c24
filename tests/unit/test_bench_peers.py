"""`python -m bench peers` (bench/peers.py): the frameworks' assembly beside the ctxbudget
components, on HotpotQA from the shared data folder."""

from __future__ import annotations

import pytest

from bench import peers
from tests.paths import data_dir

pytestmark = pytest.mark.slow


def test_hashed_bag_of_words_is_deterministic_and_unit_length() -> None:
    """The offline embedding gives the same unit vector for the same words, any case."""
    emb = peers.HashedBagOfWords()
    one, two = emb.embed_documents(["Paris is in France", "paris IS in france"])
    assert one == two == emb.embed_query("Paris is in France")
    assert abs(sum(x * x for x in one) - 1.0) < 1e-9
    assert emb.embed_query("") == [0.0] * peers.EMBEDDING_DIM


@pytest.mark.skipif(
    not (data_dir() / "hotpotqa_train100").is_dir(),
    reason=f"HotpotQA sample not found under {data_dir()}",
)
def test_each_framework_with_ctxbudget_admits_what_ctxbudget_pack_admits_within_budget() -> None:
    """On the first 12 questions, every ctxbudget component row matches the `ctxbudget pack`
    row (needed passages within 0.01, the same tokens) and no pack is over budget."""
    results = peers.run(data_dir=data_dir(), limit=12)
    rows = {(r.framework, r.pipeline): r for r in results}
    reference = rows[("ctxbudget", "ctxbudget pack")]
    assert reference.over_budget == 0 and reference.batches == 12
    ours = [r for r in results if r.pipeline.startswith("CtxBudget")]
    assert {r.framework for r in ours} == {"LangChain", "LlamaIndex", "Haystack"}
    for r in ours:
        assert abs(r.needed_admitted - reference.needed_admitted) <= 0.01, r
        assert r.over_budget == 0 and r.mean_tokens == reference.mean_tokens, r
        assert r.unauthorized == 0, r
    peer_rows = [r for r in results if r.framework != "ctxbudget" and r not in ours]
    assert len(peer_rows) == 3
    assert "needed" in peers.render(results) and len(peers.as_json(results)) == 7
