"""Seeded splits of labelled traffic by query (never by passage), and the data's digest."""

from __future__ import annotations

import hashlib
import math
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from ctxbudget.schemas import CandidateBatch

# ---------------------------------------------------------------- split by query


@dataclass(frozen=True, slots=True)
class QuerySplit:
    """Calibration and held-out batches; no request_id is in both."""

    calibration: tuple[CandidateBatch, ...]
    test: tuple[CandidateBatch, ...]


def split_by_query(
    batches: Iterable[CandidateBatch], *, calib_fraction: float, seed: int
) -> QuerySplit:
    """Split by request (query), never by passage: sort the request ids, shuffle them with
    ``random.Random(seed)``, give the first ``round(n * calib_fraction)`` to calibration.

    The result does not depend on the input order (batches sharing a request_id stay together
    in their input order), and each side is returned sorted by request_id.
    """
    if isinstance(calib_fraction, bool) or not 0.0 < calib_fraction <= 1.0:
        raise ValueError(f"calib_fraction must be in (0, 1], got {calib_fraction!r}")
    groups: dict[str, list[CandidateBatch]] = defaultdict(list)
    for batch in batches:
        groups[batch.request_id].append(batch)
    ids = sorted(groups)
    random.Random(seed).shuffle(ids)
    exact = len(ids) * Fraction(repr(float(calib_fraction)))
    n_calib = min(len(ids), max(1 if ids else 0, math.floor(exact + Fraction(1, 2))))
    calib_ids, test_ids = sorted(ids[:n_calib]), sorted(ids[n_calib:])
    return QuerySplit(
        calibration=tuple(b for rid in calib_ids for b in groups[rid]),
        test=tuple(b for rid in test_ids for b in groups[rid]),
    )


def batches_sha256(batches: Iterable[CandidateBatch]) -> str:
    """A content hash of a set of batches, independent of their order."""
    lines = sorted(b.model_dump_json(by_alias=True) for b in batches)
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()
