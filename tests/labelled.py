"""Labelled request streams for the coverage monitor's tests, unit and integration."""

from __future__ import annotations

import random

from ctxbudget.schemas import CandidateBatch
from ctxbudget.testing import batch, candidate


def labelled_stream(
    n: int,
    seed: int,
    *,
    start: int = 0,
    width: int = 8,
    scale: float = 1.0,
    shift: float = 0.0,
) -> list[CandidateBatch]:
    """n labelled requests q{start}..: in each, 2 relevant passages of ``width`` score higher
    on average (rerank ~ N(2, 1) against N(0, 1), times scale, plus shift); one seeded rng."""
    rng = random.Random(seed)
    out = []
    for i in range(start, start + n):
        cands = [
            candidate(
                f"q{i}-{j}",
                f"passage {i} {j}",
                rerank_score=scale * rng.gauss(2.0 if j < 2 else 0.0, 1.0) + shift,
            )
            for j in range(width)
        ]
        relevant = (f"q{i}-0", f"q{i}-1")
        out.append(batch(cands, request_id=f"q{i}", labels={"relevant_chunk_ids": relevant}))
    return out
