"""Split-conformal evidence filtering: calibrate a score threshold, then keep what falls under it.

The method (split conformal prediction, as in "Principled Context Engineering for RAG:
Statistical Guarantees via Conformal Prediction"): a non-conformity score ``A(q, s)`` says how
*un*-like a relevant passage a candidate is (lower = more relevant). On labelled calibration
queries we collect the scores of the RELEVANT passages, ``s_1 <= ... <= s_n``, and take

    tau_alpha = s_(k),  k = ceil((n + 1) * (1 - alpha))

the k-th smallest. At serving time a candidate is kept when ``A(q, s) <= tau_alpha``. If the
calibration and test queries are exchangeable, a relevant test passage is then kept with
probability at least ``1 - alpha`` (and, for continuous scores without ties, at most
``1 - alpha + 1 / (n + 1)``). When ``k > n`` there are too few calibration passages for that
alpha: the threshold is ``+inf`` and the filter keeps everything (``finite=False``).

``k`` is computed exactly on the *decimal* value of alpha (``Fraction(repr(alpha))``), so that
``alpha=0.7, n=9`` gives ``k=3`` and not the ``k=4`` that binary floating point would produce.

Notes on the guarantee:

* It is marginal over relevant passages. Calibration pools every relevant passage of every
  query; when a query has several relevant passages they are not independent, so the bound is
  exact for "one relevant passage drawn per query" and holds approximately for the pooled
  fraction (the paper does the same). Splits are by query, never by passage.
* Mondrian (per query class) calibration gives the bound within each class; a class with fewer
  than ``min_per_class`` relevant passages falls back to the pooled threshold, and the file
  records which bin each class uses.
* A threshold is only meaningful for the scorer it was calibrated with: the file records the
  scorer, and a filter built with another scorer is refused.

The package is pure: no clock, no environment, no I/O except ``load_calibration`` and
``save_calibration``.
"""

from __future__ import annotations

from ctxbudget.conformal._common import (
    CALIBRATION_SCHEMA,
    DEFAULT_MIN_PER_CLASS,
    POOLED,
    QUANTILE_RULE,
    SCORER_NAMES,
    CalibrationError,
)
from ctxbudget.conformal.calibrate import (
    calibrate,
    recalibrate,
)
from ctxbudget.conformal.calibration_file import (
    Baselines,
    CalibrationFile,
    ClassInfo,
    ClassThresholdEntry,
    NonNeg,
    ThresholdEntry,
    load_calibration,
    save_calibration,
)
from ctxbudget.conformal.filter import (
    ConformalFilter,
    Decision,
    FilterOutcome,
    ThresholdChoice,
)
from ctxbudget.conformal.quantile import (
    ThresholdResult,
    alpha_key,
    conformal_rank,
    conformal_threshold,
    min_calibration_size,
)
from ctxbudget.conformal.scorers import (
    AutoScorer,
    BatchBoundScorer,
    EmbeddingScorer,
    NonconformityScorer,
    RerankScorer,
    RetrievalScorer,
    bind_scorer,
    query_embedding_of,
    resolve_scorer,
    scorer_from_name,
)
from ctxbudget.conformal.split import (
    QuerySplit,
    batches_sha256,
    split_by_query,
)

__all__ = [
    "CALIBRATION_SCHEMA",
    "DEFAULT_MIN_PER_CLASS",
    "POOLED",
    "QUANTILE_RULE",
    "SCORER_NAMES",
    "AutoScorer",
    "Baselines",
    "BatchBoundScorer",
    "CalibrationError",
    "CalibrationFile",
    "ClassInfo",
    "ClassThresholdEntry",
    "ConformalFilter",
    "Decision",
    "EmbeddingScorer",
    "FilterOutcome",
    "NonNeg",
    "NonconformityScorer",
    "QuerySplit",
    "RerankScorer",
    "RetrievalScorer",
    "ThresholdChoice",
    "ThresholdEntry",
    "ThresholdResult",
    "alpha_key",
    "batches_sha256",
    "bind_scorer",
    "calibrate",
    "conformal_rank",
    "conformal_threshold",
    "load_calibration",
    "min_calibration_size",
    "query_embedding_of",
    "recalibrate",
    "resolve_scorer",
    "save_calibration",
    "scorer_from_name",
    "split_by_query",
]
