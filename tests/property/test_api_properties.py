"""Invariants of the Python API on generated candidates (Hypothesis): within budget, and
one Pack whichever way the same request reaches the packer."""

from __future__ import annotations

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import Packer
from ctxbudget.codec import encode
from ctxbudget.integrations.langchain import CtxBudgetCompressor
from tests.paths import REPO

PACKER = Packer("default@1", REPO / "policies")
COMPRESSOR = CtxBudgetCompressor(input_limit=600, policies=str(REPO / "policies"))
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
WORDS = ["keys", "expire", "after", "90", "days", "rotate", "gateway", "region", "error", "the"]

sentences = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(
    lambda ws: " ".join(ws) + "."
)
mapping = st.fixed_dictionaries(
    {"text": sentences},
    optional={
        "id": st.text("abc123", min_size=1, max_size=4),
        "score": st.one_of(st.integers(-5, 50), st.floats(-5, 50, allow_nan=False)),
        "title": st.sampled_from(["Keys", "Gateway", "Errors"]),
        "source": st.sampled_from(["kb", "forum", "blog"]),
    },
)
candidates = st.lists(st.one_of(sentences, mapping), max_size=12)


@SETTINGS
@given(cands=candidates, limit=st.integers(300, 3000), query=sentences)
def test_api_packs_within_budget_and_like_its_wire_batch(
    cands: list[object], limit: int, query: str
) -> None:
    """The pack fits its evidence budget and equals the pack of its CandidateBatch as a
    model, as a JSON mapping and as JSON text."""
    pack = PACKER.pack(query, cands, input_limit=limit)  # type: ignore[arg-type]
    assert pack.evidence_tokens <= pack.budget.evidence_budget
    batch = PACKER.batch(query, cands, input_limit=limit)  # type: ignore[arg-type]
    expected = encode(pack)
    assert encode(PACKER.pack_batch(batch)) == expected
    assert encode(PACKER.pack_batch(orjson.loads(encode(batch)))) == expected
    assert encode(PACKER.pack_batch(encode(batch).decode())) == expected


@SETTINGS
@given(texts=st.lists(sentences, max_size=10), query=sentences)
def test_the_langchain_component_packs_what_the_api_packs(texts: list[str], query: str) -> None:
    """The same texts as LangChain Documents give the API's Pack bytes, and every returned
    document's chunk ids name input positions."""
    from langchain_core.documents import Document

    docs = [Document(page_content=t, metadata={"score": float(i)}) for i, t in enumerate(texts)]
    out = COMPRESSOR.compress_documents(docs, query)
    api = PACKER.pack(
        query, [{"text": t, "score": float(i)} for i, t in enumerate(texts)], input_limit=600
    )
    assert encode(out.pack) == encode(api)
    known = {f"c{i + 1}" for i in range(len(texts))}
    assert all(set(d.metadata["chunk_ids"]) <= known for d in out)
