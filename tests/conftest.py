"""Shared fixtures: the shipped policies, one tokenizer registry, batch factories."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Candidate, CandidateBatch
from ctxbudget.tokens import TokenizerRegistry

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """The labelled data sets: $CTXBUDGET_DATA_DIR, else ../shared/data beside the repo."""
    env = os.environ.get("CTXBUDGET_DATA_DIR")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def store() -> PolicyStore:
    return PolicyStore.load(REPO / "policies")


@pytest.fixture(scope="session")
def tokenizers() -> TokenizerRegistry:
    return TokenizerRegistry()


@pytest.fixture(scope="session")
def pipeline(store: PolicyStore, tokenizers: TokenizerRegistry) -> Pipeline:
    return Pipeline.from_store(store, "default@1", tokenizers=tokenizers)


def candidate(chunk_id: str, text: str, score: float = 1.0, **kw: Any) -> Candidate:
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


@pytest.fixture
def make_batch() -> Callable[..., CandidateBatch]:
    return batch


@pytest.fixture
def make_candidate() -> Callable[..., Candidate]:
    return candidate
