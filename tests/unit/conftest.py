"""Fixtures the unit tests of the traffic, the naive baseline and the quality report share."""

from __future__ import annotations

import pytest

from ctxbudget.testing import traffic
from ctxbudget.testing.traffic import AwkwardRates, GeneratedBatch


@pytest.fixture(scope="module")
def generated() -> list[GeneratedBatch]:
    """Sixty synthetic batches (seed 11), made once per test module."""
    return traffic.synthetic(60, seed=11)


@pytest.fixture(scope="module")
def every_case() -> list[GeneratedBatch]:
    """Twelve synthetic batches holding every awkward case (seed 5)."""
    return traffic.synthetic(12, seed=5, rates=AwkwardRates.all_cases())
