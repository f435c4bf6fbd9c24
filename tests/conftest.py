"""Shared fixtures: the shipped policies, one tokenizer registry, the batch factories of
:mod:`ctxbudget.testing` as fixtures."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import Candidate, CandidateBatch
from ctxbudget.testing import batch, candidate
from ctxbudget.tokens import TokenizerRegistry
from tests.paths import REPO


@pytest.fixture(scope="session")
def store() -> PolicyStore:
    return PolicyStore.load(REPO / "policies")


@pytest.fixture(scope="session")
def tokenizers() -> TokenizerRegistry:
    return TokenizerRegistry()


@pytest.fixture(scope="session")
def pipeline(store: PolicyStore, tokenizers: TokenizerRegistry) -> Pipeline:
    return Pipeline.from_store(store, "default@1", tokenizers=tokenizers)


@pytest.fixture
def make_batch() -> Callable[..., CandidateBatch]:
    return batch


@pytest.fixture
def make_candidate() -> Callable[..., Candidate]:
    return candidate
