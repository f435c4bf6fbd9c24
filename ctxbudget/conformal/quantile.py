"""The finite-sample conformal quantile: the rank, the threshold, the minimum sample."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

# ---------------------------------------------------------------- the finite-sample quantile


def _check_alpha(alpha: float) -> Fraction:
    """Validate alpha and return its exact decimal value."""
    if isinstance(alpha, bool) or not isinstance(alpha, int | float):
        raise ValueError(f"alpha must be a number strictly between 0 and 1, got {alpha!r}")
    if not math.isfinite(alpha) or not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    return Fraction(repr(float(alpha)))


def conformal_rank(n: int, alpha: float) -> int:
    """The 1-based order statistic ``ceil((n + 1)(1 - alpha))``; it may exceed ``n``."""
    a = _check_alpha(alpha)
    if n < 1:
        raise ValueError(f"need at least one calibration score (n >= 1), got n={n}")
    return math.ceil((n + 1) * (1 - a))


def min_calibration_size(alpha: float) -> int:
    """The smallest n for which the threshold at ``alpha`` is finite: ``ceil(1/alpha - 1)``."""
    a = _check_alpha(alpha)
    return max(1, math.ceil((1 - a) / a))


@dataclass(frozen=True, slots=True)
class ThresholdResult:
    """A calibrated threshold: ``threshold`` is ``math.inf`` exactly when ``finite`` is False."""

    alpha: float
    n: int
    rank: int
    threshold: float
    finite: bool


def conformal_threshold(scores: Iterable[float], alpha: float) -> ThresholdResult:
    """The split-conformal threshold of the relevant calibration scores at level ``alpha``."""
    values = sorted(float(s) for s in scores)
    if any(math.isnan(v) for v in values):
        raise ValueError("calibration scores must not contain NaN")
    n = len(values)
    if n < 1:
        raise ValueError("need at least one calibration score (n >= 1), got none")
    k = conformal_rank(n, alpha)
    if k > n:
        return ThresholdResult(alpha=float(alpha), n=n, rank=k, threshold=math.inf, finite=False)
    return ThresholdResult(alpha=float(alpha), n=n, rank=k, threshold=values[k - 1], finite=True)


def alpha_key(alpha: float) -> str:
    """The canonical key of an alpha in a calibration file (shortest round-trip repr)."""
    _check_alpha(alpha)
    return repr(float(alpha))
