"""The LangChain, LlamaIndex and Haystack components, each in its framework's own pipeline,
against the real libraries: pack order, the mapping back to the caller's ids, and Pack bytes
identical to the API's and `ctxbudget pack`'s for the same candidates."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxbudget import Packer, Principal
from ctxbudget.cli import main
from ctxbudget.codec import decode_batch, encode
from ctxbudget.schemas import CandidateBatch, Pack
from tests.paths import REPO

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

EXAMPLE = decode_batch((REPO / "examples" / "batches.jsonl").read_bytes().splitlines()[0])
PRINCIPAL = Principal(tenant_id="acme", access_labels=("public", "internal"))
BUDGET: dict[str, Any] = {"input_limit": 1200, "instructions": 350, "principal": PRINCIPAL}


def _meta(i: int) -> dict[str, Any]:
    c = EXAMPLE.candidates[i]
    fields = {
        "title": c.title,
        "source": c.source_id,
        "doc_id": c.doc_id,
        "version": c.version,
        "authority": c.authority,
        "access_label": c.access_label,
        "tenant_id": c.tenant_id,
        "page": i,  # a field the packer does not read: it stays with the caller's document
    }
    return {k: v for k, v in fields.items() if v is not None}


def _expected_candidates() -> list[dict[str, Any]]:
    """The candidate mappings every component must make of the example's documents."""
    out = []
    for i, c in enumerate(EXAMPLE.candidates):
        meta = {k: v for k, v in _meta(i).items() if k != "page"}
        out.append({"text": c.text, "id": c.chunk_id, "score": c.retrieval_score, **meta})
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The Pack bytes of the API for the example's candidates, checked against the CLI."""
    packer = Packer()
    query = EXAMPLE.query.text
    pack = packer.pack(query, _expected_candidates(), **BUDGET)
    folder = tmp_path_factory.mktemp("cli")
    batch: CandidateBatch = packer.batch(query, _expected_candidates(), **BUDGET)
    (folder / "in.jsonl").write_bytes(encode(batch) + b"\n")
    result = CliRunner().invoke(
        main, ["pack", str(folder / "in.jsonl"), "-o", str(folder / "out.jsonl"),
               "--policies", str(REPO / "policies"), "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (folder / "out.jsonl").read_bytes() == encode(pack) + b"\n"
    assert len(pack.evidence) >= 2 and pack.dropped  # copies folded, foreign passages dropped
    return encode(pack)


def _check_order_and_ids(returned: list[tuple[str, str, dict[str, Any]]], pack: Pack) -> None:
    """Each returned document is one evidence item, in pack order, carrying its ids."""
    assert [r[1] for r in returned] == [e.text for e in pack.evidence]
    for (doc_id, _, meta), item in zip(returned, pack.evidence, strict=True):
        assert meta["ctxbudget_id"] == item.evidence_id
        assert meta["chunk_ids"] == list(item.chunk_ids)
        assert doc_id == item.chunk_ids[0]
        assert meta["excerpt"] is item.compressed
        position = [c.chunk_id for c in EXAMPLE.candidates].index(item.chunk_ids[0])
        assert meta["page"] == position


# ---------------------------------------------------------------- LangChain


def test_langchain_compressor_in_a_contextual_compression_retriever_and_lcel(
    reference: bytes,
) -> None:
    """CtxBudgetCompressor is a BaseDocumentCompressor that a ContextualCompressionRetriever
    and an LCEL chain run; its Pack is the API's bytes."""
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda

    from ctxbudget.integrations.langchain import CtxBudgetCompressor, candidates_of

    docs = [
        Document(id=c.chunk_id, page_content=c.text,
                 metadata={"score": c.retrieval_score, **_meta(i)})
        for i, c in enumerate(EXAMPLE.candidates)
    ]  # fmt: skip

    class Fixed(BaseRetriever):
        """A retriever that returns the example's documents."""

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return list(docs)

    compressor = CtxBudgetCompressor(**BUDGET)
    assert isinstance(compressor, BaseDocumentCompressor)
    assert candidates_of(docs) == _expected_candidates()
    packed = compressor.compress_documents(docs, EXAMPLE.query.text)
    assert encode(packed.pack) == reference and packed.evidence == packed.pack.rendered
    _check_order_and_ids([(d.id or "", d.page_content, d.metadata) for d in packed], packed.pack)

    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=Fixed())
    chain = retriever | RunnableLambda(lambda ds: [d.metadata["ctxbudget_id"] for d in ds])
    assert chain.invoke(EXAMPLE.query.text) == [e.evidence_id for e in packed.pack.evidence]


def test_langchain_reads_the_id_from_metadata_else_the_position() -> None:
    """Without Document.id the id is metadata['id'], else c<n>."""
    from langchain_core.documents import Document

    from ctxbudget.integrations.langchain import candidates_of

    docs = [Document(page_content="a", metadata={"id": "m1"}), Document(page_content="b")]
    assert [c.get("id") for c in candidates_of(docs)] == ["m1", None]
    compressor_docs = Packer().batch("q", candidates_of(docs), input_limit=500).candidates
    assert [c.chunk_id for c in compressor_docs] == ["m1", "c2"]


# ---------------------------------------------------------------- LlamaIndex


def test_llama_index_postprocessor_in_a_retriever_query_engine(reference: bytes) -> None:
    """CtxBudgetPostprocessor is a BaseNodePostprocessor a RetrieverQueryEngine applies; the
    response's source nodes are the packed evidence and the Pack is the API's bytes."""
    from llama_index.core.llms import MockLLM
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from ctxbudget.integrations.llama_index import CtxBudgetPostprocessor, candidates_of

    nodes = [
        NodeWithScore(node=TextNode(id_=c.chunk_id, text=c.text, metadata=_meta(i)),
                      score=c.retrieval_score)
        for i, c in enumerate(EXAMPLE.candidates)
    ]  # fmt: skip

    class Fixed(BaseRetriever):
        """A retriever that returns the example's nodes."""

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return list(nodes)

    post = CtxBudgetPostprocessor(**BUDGET)
    assert isinstance(post, BaseNodePostprocessor)
    assert candidates_of(nodes) == _expected_candidates()
    packed = post.postprocess_nodes(nodes, query_str=EXAMPLE.query.text)
    assert encode(packed.pack) == reference
    _check_order_and_ids(
        [(n.node.node_id, n.node.get_content(), n.node.metadata) for n in packed], packed.pack
    )
    engine = RetrieverQueryEngine.from_args(Fixed(), llm=MockLLM(), node_postprocessors=[post])
    response = engine.query(EXAMPLE.query.text)
    assert [n.node.metadata["ctxbudget_id"] for n in response.source_nodes] == [
        e.evidence_id for e in packed.pack.evidence
    ]
    llm_view = response.source_nodes[0].node.get_content(metadata_mode="llm")  # type: ignore[arg-type]
    assert "ctxbudget_id" not in llm_view and "chunk_ids" not in llm_view


# ---------------------------------------------------------------- Haystack


def test_haystack_packer_in_a_pipeline_after_a_bm25_retriever(reference: bytes) -> None:
    """CtxBudgetPacker runs in a Haystack Pipeline fed by a retriever; its outputs are the
    packed documents, the rendered block and the Pack, the API's bytes for the same
    candidates."""
    from haystack import Document, Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack.document_stores.types import DuplicatePolicy

    from ctxbudget.integrations.haystack import CtxBudgetPacker, candidates_of

    docs = [
        Document(id=c.chunk_id, content=c.text, score=c.retrieval_score, meta=_meta(i))
        for i, c in enumerate(EXAMPLE.candidates)
    ]
    assert candidates_of(docs) == _expected_candidates()
    alone = Pipeline()
    alone.add_component("packer", CtxBudgetPacker(**BUDGET))
    out = alone.run({"packer": {"query": EXAMPLE.query.text, "documents": docs}})["packer"]
    assert encode(out["pack"]) == reference and out["evidence"] == out["pack"].rendered
    _check_order_and_ids([(d.id, d.content or "", d.meta) for d in out["documents"]], out["pack"])

    store = InMemoryDocumentStore()
    stored = [Document(id=d.id, content=d.content, meta=d.meta) for d in docs]
    store.write_documents(stored, policy=DuplicatePolicy.SKIP)  # the example repeats an id
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=20))
    pipe.add_component("packer", CtxBudgetPacker(**BUDGET))
    pipe.connect("retriever.documents", "packer.documents")
    query = EXAMPLE.query.text
    result = pipe.run({"retriever": {"query": query}, "packer": {"query": query}})["packer"]
    pack = result["pack"]
    assert pack.evidence_tokens <= pack.budget.evidence_budget
    assert [d.meta["ctxbudget_id"] for d in result["documents"]] == [
        e.evidence_id for e in pack.evidence
    ]


# ---------------------------------------------------------------- missing extras


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("langchain", "langchain_core", "langchain"),
        ("llama_index", "llama_index", "llama-index"),
        ("haystack", "haystack", "haystack"),
    ],
)
def test_a_missing_framework_is_one_line_naming_the_extra(
    module: str, blocked: str, extra: str, tmp_path: Path
) -> None:
    """Without its framework, importing a component fails with MissingExtraError, whose
    one-line message names the pip command of the extra."""
    probe = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from ctxbudget.integrations import MissingExtraError\n"
        "try:\n"
        f"    import ctxbudget.integrations.{module}\n"
        "except MissingExtraError as e:\n"
        "    assert isinstance(e, ImportError)\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout
    assert out.count("\n") == 1 and out.strip().endswith(f"pip install 'ctxbudget[{extra}]'")


def test_haystack_pipeline_with_the_packer_dumps_and_loads(reference: bytes) -> None:
    """Pipeline.dumps writes the packer's keywords as plain data and Pipeline.loads gives a
    packer that makes the same Pack bytes."""
    from haystack import Document, Pipeline

    from ctxbudget.integrations.haystack import CtxBudgetPacker

    docs = [
        Document(id=c.chunk_id, content=c.text, score=c.retrieval_score, meta=_meta(i))
        for i, c in enumerate(EXAMPLE.candidates)
    ]
    pipe = Pipeline()
    pipe.add_component("packer", CtxBudgetPacker(**BUDGET, policies=REPO / "policies"))
    text = pipe.dumps()
    assert "tenant_id: acme" in text and "input_limit: 1200" in text
    loaded = Pipeline.loads(text, allowed_modules=["ctxbudget.integrations.haystack"])
    out = loaded.run({"packer": {"query": EXAMPLE.query.text, "documents": docs}})["packer"]
    assert encode(out["pack"]) == reference


def test_each_component_reads_the_span_its_frameworks_splitter_records() -> None:
    """LangChain's metadata['start_index'], Haystack's meta['split_idx_start'] and
    LlamaIndex's start/end_char_idx become the candidate's span; published_at is read too."""
    from haystack import Document as HaystackDocument
    from langchain_core.documents import Document as LangChainDocument
    from llama_index.core.schema import NodeWithScore, TextNode

    from ctxbudget.integrations import haystack, langchain, llama_index

    meta = {"published_at": "2025-01-01"}
    expected = {"start": 10, "end": 15}
    [lc] = langchain.candidates_of(
        [LangChainDocument(page_content="hello", metadata={"start_index": 10, **meta})]
    )
    [hs] = haystack.candidates_of(
        [HaystackDocument(content="hello", meta={"split_idx_start": 10, **meta})]
    )
    node = TextNode(text="hello", start_char_idx=10, end_char_idx=15, metadata=meta)
    [li] = llama_index.candidates_of([NodeWithScore(node=node)])
    for c in (lc, hs, li):
        assert c["span"] == expected and c["published_at"] == "2025-01-01"
    [none] = langchain.candidates_of([LangChainDocument(page_content="x", metadata={})])
    assert "span" not in none
