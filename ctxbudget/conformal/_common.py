"""Shared names of the conformal package: the calibration schema, scorer names, the error."""

from __future__ import annotations

from ctxbudget.errors import ConfigError

CALIBRATION_SCHEMA = "ctx.calibration.v1"
POOLED = "pooled"
#: Below this many relevant passages a query class is not given its own (Mondrian) bin.
#: A class needs at least 1/alpha - 1 passages for a finite threshold at all (19 at alpha 0.05);
#: 50 also keeps the spread of the realised coverage, about sqrt(alpha(1-alpha)/(n+2)), near 0.04.
DEFAULT_MIN_PER_CLASS = 50
SCORER_NAMES: tuple[str, ...] = ("auto", "rerank", "retrieval", "embedding")
QUANTILE_RULE = (
    "tau = ceil((n+1)(1-alpha))-th smallest non-conformity score of the relevant calibration "
    "passages; +inf (keep all) when that rank exceeds n; keep a candidate when score <= tau"
)


class CalibrationError(ConfigError):
    """A calibration file is missing, unreadable or invalid, or does not fit its use."""
