"""``python -m bench peers``: the frameworks' own context assembly beside the ctxbudget
component in the same pipeline, on the same labelled traffic and at the same budget.

Traffic: HotpotQA train (100 questions, :mod:`bench.hotpot`; ``moderate`` budget, clean
unless ``--awkward``). Every batch's candidates become the framework's documents (id = chunk
id, text, score = the BM25 retrieval score, metadata ``title``, ``source``, ``doc_id``,
``version``, ``access_label``, ``tenant_id``, ``published_at``, and the span where each
framework's text splitter records it), in the batch's order (best score first), and go
through, per framework:

* LangChain: a ``DocumentCompressorPipeline`` of ``EmbeddingsRedundantFilter`` and
  ``LongContextReorder`` (langchain-community). The filter needs embeddings; no model can be
  downloaded here, so :class:`HashedBagOfWords` stands in: a deterministic, offline hashed
  bag-of-words vector (1024 signed buckets of lower-cased words, L2-normalised);
* LlamaIndex: ``SimilarityPostprocessor`` (its default cutoff, 0.0) then
  ``LongContextReorder``, applied in order as a query engine applies its postprocessors;
* Haystack: a ``Pipeline`` of one ``LostInTheMiddleRanker`` with ``word_count_threshold`` set
  to the evidence budget (its only length knob counts words, not tokens);

and the same pipeline with the ctxbudget component in place of the assembly
(``CtxBudgetCompressor`` in the DocumentCompressorPipeline, ``CtxBudgetPostprocessor`` as the
postprocessor, ``CtxBudgetPacker`` in the Pipeline), built with the batch setting's budget
(input limit, system prompt, answer reserve, principal). ``ctxbudget pack`` on the wire
batches is the reference row.

Figures per pipeline: needed passages admitted (the share of each question's supporting
paragraphs in what the pipeline returns, averaged), the same counting only the prefix of the
output that fits the budget (what a prompt can hold), mean tokens (cl100k_base: the rendered
block for ctxbudget, the returned texts joined by blank lines otherwise), packs over the
evidence budget (the ctxbudget ledger's, the same for every pipeline), passages returned that
the principal may not see (``unauth``: another tenant's, or under an access label it lacks;
the awkward traffic holds some), and batches/s (wall clock over the whole traffic, pipeline
work only; best of ``--repeats``).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.hotpot import SYSTEM_PROMPT, from_hotpot
from ctxbudget.api import Packer
from ctxbudget.schemas import Candidate, CandidateBatch
from ctxbudget.stages.route import authorization_problem
from ctxbudget.testing.naive import default_counter

#: Separator between passages when a framework's output is joined into a prompt.
JOINER = "\n\n"
EMBEDDING_DIM = 1024
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Returned:
    """What one pipeline returned for one batch: the chunk ids (per passage) and its tokens."""

    ids: tuple[tuple[str, ...], ...]
    tokens: tuple[int, ...]
    total_tokens: int


@dataclass(frozen=True, slots=True)
class PeerResult:
    """The figures of one pipeline over the traffic."""

    framework: str
    pipeline: str
    batches: int
    needed_admitted: float
    needed_within_budget: float
    mean_tokens: float
    over_budget: int
    #: Passages returned that the batch's principal may not see (another tenant, or an
    #: access label it lacks), over the whole traffic.
    unauthorized: int
    batches_per_s: float


class HashedBagOfWords:
    """Deterministic offline embeddings for LangChain: hashed signed bag of words, unit length."""

    def __init__(self, dim: int = EMBEDDING_DIM) -> None:
        self.dim = dim

    def _vector(self, text: str) -> list[float]:
        v = [0.0] * self.dim
        for word in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            v[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in v))
        return [x / norm for x in v] if norm else v

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def _meta(c: Candidate) -> dict[str, Any]:
    fields = {
        "title": c.title,
        "source": c.source_id,
        "doc_id": c.doc_id,
        "version": c.version,
        "access_label": c.access_label,
        "tenant_id": c.tenant_id,
        "published_at": c.published_at,
    }
    return {k: v for k, v in fields.items() if v is not None}


def _start(c: Candidate, key: str) -> dict[str, int]:
    """The chunk's start offset under the key the framework's text splitter writes."""
    return {key: c.span.start} if c.span is not None else {}


def _budget_kwargs(batch: CandidateBatch) -> dict[str, Any]:
    return {
        "input_limit": batch.model.input_limit,
        "tokenizer": batch.model.tokenizer,
        "instructions": SYSTEM_PROMPT,
        "answer": {
            "kind": batch.answer_contract.kind,
            "reserve_tokens": batch.answer_contract.reserve_tokens,
        },
        "principal": batch.principal,
        "model": batch.model.name,
    }


def _returned(ids: Sequence[tuple[str, ...]], texts: Sequence[str]) -> Returned:
    counter = default_counter()
    tokens = tuple(counter.count(t) for t in texts)
    return Returned(tuple(ids), tokens, counter.count(JOINER.join(texts)) if texts else 0)


Runner = Callable[[CandidateBatch], Returned]


# ---------------------------------------------------------------- LangChain


def _langchain(kwargs: dict[str, Any]) -> dict[str, Runner]:
    from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline

    with warnings.catch_warnings():  # the package's own notice that it is being sunset
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.document_transformers import (
            EmbeddingsRedundantFilter,
            LongContextReorder,
        )
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings

    from ctxbudget.integrations.langchain import CtxBudgetCompressor

    class _Embeddings(HashedBagOfWords, Embeddings):
        pass

    def docs(batch: CandidateBatch) -> list[Document]:
        return [
            Document(
                id=c.chunk_id,
                page_content=c.text,
                metadata={
                    "id": c.chunk_id,
                    "score": c.retrieval_score,
                    **_meta(c),
                    **_start(c, "start_index"),
                },
            )
            for c in batch.candidates
        ]

    def runner(pipeline: Any, packed: bool) -> Runner:
        def run(batch: CandidateBatch) -> Returned:
            out = pipeline.compress_documents(docs(batch), batch.query.text)
            if packed:
                return _packed_returned([d.metadata["chunk_ids"] for d in out], out.pack)
            ids = [(d.id or d.metadata["id"],) for d in out]
            return _returned(ids, [d.page_content for d in out])

        return run

    peer = DocumentCompressorPipeline(
        transformers=[EmbeddingsRedundantFilter(embeddings=_Embeddings()), LongContextReorder()]
    )
    ours = DocumentCompressorPipeline(transformers=[CtxBudgetCompressor(**kwargs)])
    return {
        "EmbeddingsRedundantFilter + LongContextReorder": runner(peer, False),
        "CtxBudgetCompressor": runner(ours, True),
    }


def _packed_returned(ids: Sequence[Sequence[str]], pack: Any) -> Returned:
    return Returned(
        tuple(tuple(i) for i in ids),
        tuple(e.tokens for e in pack.evidence),
        pack.evidence_tokens,
    )


# ---------------------------------------------------------------- LlamaIndex


def _llama_index(kwargs: dict[str, Any]) -> dict[str, Runner]:
    from llama_index.core.postprocessor import LongContextReorder, SimilarityPostprocessor
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from ctxbudget.integrations.llama_index import CtxBudgetPostprocessor

    def nodes(batch: CandidateBatch) -> list[NodeWithScore]:
        return [
            NodeWithScore(
                node=TextNode(id_=c.chunk_id, text=c.text, metadata=_meta(c),
                              start_char_idx=c.span.start if c.span else None,
                              end_char_idx=c.span.end if c.span else None),
                score=c.retrieval_score,
            )
            for c in batch.candidates
        ]  # fmt: skip

    def runner(postprocessors: Sequence[Any], packed: bool) -> Runner:
        def run(batch: CandidateBatch) -> Returned:
            out: Any = nodes(batch)
            bundle = QueryBundle(batch.query.text)
            for p in postprocessors:
                out = p.postprocess_nodes(out, query_bundle=bundle)
            if packed:
                return _packed_returned([n.node.metadata["chunk_ids"] for n in out], out.pack)
            return _returned([(n.node.node_id,) for n in out], [n.node.get_content() for n in out])

        return run

    return {
        "SimilarityPostprocessor + LongContextReorder": runner(
            [SimilarityPostprocessor(), LongContextReorder()], False
        ),
        "CtxBudgetPostprocessor": runner([CtxBudgetPostprocessor(**kwargs)], True),
    }


# ---------------------------------------------------------------- Haystack


def _haystack(kwargs: dict[str, Any], budget: int) -> dict[str, Runner]:
    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
    from haystack import Document, Pipeline
    from haystack.components.rankers import LostInTheMiddleRanker

    from ctxbudget.integrations.haystack import CtxBudgetPacker

    def docs(batch: CandidateBatch) -> list[Document]:
        return [
            Document(
                id=c.chunk_id,
                content=c.text,
                score=c.retrieval_score,
                meta={**_meta(c), **_start(c, "split_idx_start")},
            )
            for c in batch.candidates
        ]

    peer = Pipeline()
    peer.add_component("ranker", LostInTheMiddleRanker(word_count_threshold=budget))
    ours = Pipeline()
    ours.add_component("packer", CtxBudgetPacker(**kwargs))

    def run_peer(batch: CandidateBatch) -> Returned:
        out = peer.run({"ranker": {"documents": docs(batch)}})["ranker"]["documents"]
        return _returned([(d.id,) for d in out], [d.content or "" for d in out])

    def run_ours(batch: CandidateBatch) -> Returned:
        result = ours.run({"packer": {"query": batch.query.text, "documents": docs(batch)}})
        out = result["packer"]
        return _packed_returned([d.meta["chunk_ids"] for d in out["documents"]], out["pack"])

    return {"LostInTheMiddleRanker": run_peer, "CtxBudgetPacker": run_ours}


# ---------------------------------------------------------------- figures


def _figures(
    framework: str,
    name: str,
    batches: Sequence[CandidateBatch],
    returned: Sequence[Returned],
    budgets: Sequence[int],
    seconds: float,
) -> PeerResult:
    needed, within, tokens = [], [], []
    over = unauthorized = 0
    for batch, r, budget in zip(batches, returned, budgets, strict=True):
        relevant = set(batch.labels.relevant_chunk_ids) if batch.labels else set()
        admitted = {cid for ids in r.ids for cid in ids}
        unauthorized += sum(1 for c in batch.candidates if c.chunk_id in admitted and
                            authorization_problem(batch, c) is not None)  # fmt: skip
        fitting: set[str] = set()
        used = 0
        for ids, t in zip(r.ids, r.tokens, strict=True):
            used += t
            if used > budget:
                break
            fitting.update(ids)
        if relevant:
            needed.append(len(relevant & admitted) / len(relevant))
            within.append(len(relevant & fitting) / len(relevant))
        tokens.append(r.total_tokens)
        over += r.total_tokens > budget
    return PeerResult(
        framework=framework,
        pipeline=name,
        batches=len(batches),
        needed_admitted=round(statistics.fmean(needed), 4) if needed else 0.0,
        needed_within_budget=round(statistics.fmean(within), 4) if within else 0.0,
        mean_tokens=round(statistics.fmean(tokens), 1) if tokens else 0.0,
        over_budget=over,
        unauthorized=unauthorized,
        batches_per_s=round(len(batches) / seconds, 1) if seconds > 0 else 0.0,
    )


def _timed(
    run: Runner, batches: Sequence[CandidateBatch], repeats: int
) -> tuple[list[Returned], float]:
    best = math.inf
    out: list[Returned] = []
    for _ in range(max(1, repeats)):
        started = time.perf_counter()
        out = [run(b) for b in batches]
        best = min(best, time.perf_counter() - started)
    return out, best


def run(
    *,
    data_dir: Path | None = None,
    budget: str = "moderate",
    awkward: bool = False,
    repeats: int = 1,
    frameworks: Sequence[str] = ("langchain", "llama-index", "haystack"),
    policy: str = "default@1",
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[PeerResult]:
    """Every pipeline over the HotpotQA traffic (its first ``limit`` questions when given);
    the reference row first."""
    generated = from_hotpot(data_dir, budget=budget, awkward=awkward)
    batches = [g.batch for g in generated[:limit]]
    packer = Packer(policy)
    reference = [packer.pack_batch(b) for b in batches]
    budgets = [p.budget.evidence_budget for p in reference]
    if len(set(budgets)) != 1 and "haystack" in frameworks and progress is not None:
        progress("peers: evidence budgets differ between batches; Haystack uses the first")

    def cli(batch: CandidateBatch) -> Returned:
        pack = packer.pack_batch(batch)
        return _packed_returned([e.chunk_ids for e in pack.evidence], pack)

    kwargs = {**_budget_kwargs(batches[0]), "policy": policy}
    plans: list[tuple[str, dict[str, Runner]]] = [("ctxbudget", {"ctxbudget pack": cli})]
    for fw in frameworks:
        if fw == "langchain":
            plans.append(("LangChain", _langchain(kwargs)))
        elif fw == "llama-index":
            plans.append(("LlamaIndex", _llama_index(kwargs)))
        elif fw == "haystack":
            plans.append(("Haystack", _haystack(kwargs, budgets[0])))
        else:
            raise ValueError(f"unknown framework {fw!r} (langchain, llama-index, haystack)")
    results = []
    for framework, runners in plans:
        for name, runner in runners.items():
            if progress is not None:
                progress(f"peers: {framework} {name} ...")
            returned, seconds = _timed(runner, batches, repeats)
            results.append(_figures(framework, name, batches, returned, budgets, seconds))
    return results


def render(results: Sequence[PeerResult]) -> str:
    """The side-by-side table."""
    head = (
        f"{'framework':<11} {'pipeline':<47} {'needed':>7} {'in budget':>9} "
        f"{'tokens':>7} {'over':>8} {'unauth':>6} {'batches/s':>10}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(
            f"{r.framework:<11} {r.pipeline:<47} {r.needed_admitted:>7.3f} "
            f"{r.needed_within_budget:>9.3f} {r.mean_tokens:>7.1f} "
            f"{f'{r.over_budget}/{r.batches}':>8} {r.unauthorized:>6} {r.batches_per_s:>10.1f}"
        )
    return "\n".join(lines)


def as_json(results: Sequence[PeerResult]) -> list[dict[str, Any]]:
    """The figures as plain mappings (``--json-out``)."""
    return [asdict(r) for r in results]
