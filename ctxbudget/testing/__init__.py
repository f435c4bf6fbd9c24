"""Test support: factories for a Candidate and a CandidateBatch with sensible defaults, and
(:mod:`ctxbudget.testing.traffic`) the generated and data-set traffic with its truth.

Shipped with the package so that tests of any layer, the benchmarks and users' own tests of
policies build batches the same way, without importing the benchmarks or a test module. Not
part of the packing core: the traffic generators may read ``CTXBUDGET_DATA_DIR`` and the
data folder beside the checkout.
"""

from __future__ import annotations

from typing import Any

from ctxbudget.schemas import Candidate, CandidateBatch

__all__ = ["batch", "candidate"]


def candidate(chunk_id: str, text: str, score: float = 1.0, **kw: Any) -> Candidate:
    """A candidate with its own document and source (``doc-<id>``, ``src-<id>``) unless given;
    any other Candidate field as a keyword."""
    fields: dict[str, Any] = {
        "chunk_id": chunk_id,
        "doc_id": kw.pop("doc_id", f"doc-{chunk_id}"),
        "source_id": kw.pop("source_id", f"src-{chunk_id}"),
        "text": text,
        "retrieval_score": score,
    }
    fields.update(kw)
    return Candidate.model_validate(fields)


def batch(
    candidates: list[Candidate] | tuple[Candidate, ...], query: str = "what is it?", **kw: Any
) -> CandidateBatch:
    """A batch for tenant ``acme`` (access label ``public``) on a 4,096-token cl100k_base model
    with a short-fact answer; ``class_hint``, ``sub_questions``, ``as_of``, ``input_limit``,
    ``tokenizer``, ``kind``, ``reserve_tokens`` and ``request_id`` as keywords, any other
    CandidateBatch field as itself."""
    fields: dict[str, Any] = {
        "request_id": kw.pop("request_id", "req-1"),
        "tenant_id": "acme",
        "principal": {"tenant_id": "acme", "access_labels": ("public",)},
        "query": {
            "text": query,
            "class_hint": kw.pop("class_hint", None),
            "sub_questions": kw.pop("sub_questions", None),
            "as_of": kw.pop("as_of", None),
        },
        "model": {
            "name": "m",
            "input_limit": kw.pop("input_limit", 4096),
            "tokenizer": kw.pop("tokenizer", "cl100k_base"),
        },
        "answer_contract": {
            "kind": kw.pop("kind", "short_fact"),
            "reserve_tokens": kw.pop("reserve_tokens", None),
        },
        "candidates": tuple(candidates),
    }
    fields.update(kw)
    return CandidateBatch.model_validate(fields)
