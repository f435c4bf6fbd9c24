"""Checking what a model did with a pack: answers, their citations and verdicts.

:class:`AnswerVerifier` reads an :class:`Answer` (prose with inline citations, or typed
claims) against the :class:`~ctxbudget.schemas.Pack` it was written from and gives a
:class:`Verdict`: per claim, whether its cited ids exist and its numbers, dates and names are
in the cited text; per answer, citation precision and completeness and the abstention check;
with relevance labels, what became of every expected passage. Deterministic and pure.
"""

from ctxbudget.verification.diagnosis import (
    RequestFacts,
    diagnose,
    facts_from_batch,
    facts_from_traces,
    fates_of,
)
from ctxbudget.verification.models import (
    CLAIM_STATUSES,
    OUTCOMES,
    Answer,
    AnswerClaim,
    ClaimStatus,
    ClaimVerdict,
    ExpectedEvidence,
    Outcome,
    Verdict,
)
from ctxbudget.verification.verifier import AnswerVerifier, VerifyError, says_insufficient

__all__ = [
    "CLAIM_STATUSES",
    "OUTCOMES",
    "Answer",
    "AnswerClaim",
    "AnswerVerifier",
    "ClaimStatus",
    "ClaimVerdict",
    "ExpectedEvidence",
    "Outcome",
    "RequestFacts",
    "Verdict",
    "VerifyError",
    "diagnose",
    "facts_from_batch",
    "facts_from_traces",
    "fates_of",
    "says_insufficient",
]
