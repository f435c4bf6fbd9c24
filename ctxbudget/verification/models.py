"""Wire models of answers and their verdicts: ``ctx.answer.v1`` in, ``ctx.verdict.v1`` out.

An Answer is what a generator wrote for one request and lane, either as prose with inline
citations (``text``) or as typed claims (``claims``). A Verdict is what the deterministic
checks found: one entry per claim in answer order, the citation precision and completeness
proxies, the abstention check and, when the request carried relevance labels, the outcome of
every expected passage (the four-way diagnosis).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ctxbudget.models import NonNegInt, WireModel
from ctxbudget.schemas import Answerability, DropReason, Lane, PolicyRef, QueryClass

#: What an answer says of its own evidence: answered in full, in part, or not at all.
AnswerStance = Literal["ok", "partial", "no_evidence"]

#: The verdict of one claim.
#:
#: * ``supported``: every cited id is in the pack and every value of the claim is in the cited
#:   text (a cited claim without values is supported: nothing deterministic contradicts it);
#: * ``fabricated_id``: a cited id is not an evidence id of the pack (``unknown_ids``);
#: * ``unsupported_value``: a number, date, unit, percentage or name of the claim is not in
#:   the cited text (``missing``);
#: * ``uncited``: a claim carrying such values cites nothing (``missing`` lists them);
#: * ``uncheckable``: no citation and no value to check (a greeting, a hedge).
ClaimStatus = Literal["supported", "fabricated_id", "unsupported_value", "uncited", "uncheckable"]
CLAIM_STATUSES: tuple[ClaimStatus, ...] = (
    "supported",
    "fabricated_id",
    "unsupported_value",
    "uncited",
    "uncheckable",
)

#: The abstention check: the answer's stance against the pack's answerability.
AbstentionCheck = Literal["consistent", "abstained_with_evidence", "answered_without_evidence"]

#: What became of one expected passage.
Outcome = Literal["retrieval_miss", "packing_drop", "ignored", "unsupported", "used"]
OUTCOMES: tuple[Outcome, ...] = ("retrieval_miss", "packing_drop", "ignored", "unsupported", "used")


class AnswerClaim(WireModel):
    """One claim of a structured answer and the evidence ids it cites."""

    text: str
    evidence_ids: tuple[str, ...] = ()


class Answer(WireModel):
    """``ctx.answer.v1``: a generator's answer to one request, prose or typed claims."""

    schema_: Literal["ctx.answer.v1"] = Field(default="ctx.answer.v1", alias="schema")
    request_id: Annotated[str, Field(min_length=1)]
    lane: Lane = "live"
    #: Prose with inline citations: ``[id]`` or ``[id1, id2]`` at the end of a sentence,
    #: before or after its final punctuation.
    text: str | None = None
    #: Typed claims, each with the evidence ids it rests on.
    claims: tuple[AnswerClaim, ...] | None = None
    answerability: AnswerStance | None = None
    missing_information: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _one_form(self) -> Answer:
        """Exactly one of ``text`` and ``claims``."""
        if (self.text is None) == (self.claims is None):
            raise ValueError("an answer holds exactly one of text and claims")
        return self


class ClaimVerdict(WireModel):
    """The verdict of one claim, in answer order."""

    index: NonNegInt
    text: str
    evidence_ids: tuple[str, ...]
    status: ClaimStatus
    #: The claim's values the cited text does not hold (as the claim writes them).
    missing: tuple[str, ...] = ()
    #: Cited ids that are not evidence ids of the pack.
    unknown_ids: tuple[str, ...] = ()


class ExpectedEvidence(WireModel):
    """What became of one labelled relevant chunk on its way to the answer."""

    chunk_id: str
    outcome: Outcome
    #: The pack's evidence id holding the chunk (its text or a merged copy), when admitted.
    evidence_id: str | None = None
    #: Why a candidate was not admitted (``packing_drop``); ``None`` when no trace said.
    drop_reason: DropReason | None = None
    detail: str | None = None


class Verdict(WireModel):
    """``ctx.verdict.v1``: the deterministic checks of one answer against its pack."""

    schema_: Literal["ctx.verdict.v1"] = Field(default="ctx.verdict.v1", alias="schema")
    request_id: str
    lane: Lane
    cohort: str
    policy: PolicyRef
    query_class: QueryClass
    form: Literal["text", "claims"]
    claims: tuple[ClaimVerdict, ...]
    #: Per status, the number of claims (every status present, zeros included).
    counts: dict[str, int]
    #: Citations (claim, id) and those that support their claim.
    citations: NonNegInt
    citations_supporting: NonNegInt
    #: ``citations_supporting / citations``; ``None`` without citations.
    citation_precision: float | None
    #: Claims needing evidence (cited, or carrying values) and those supported.
    claims_needing_evidence: NonNegInt
    claims_supported: NonNegInt
    #: ``claims_supported / claims_needing_evidence``; ``None`` when no claim needs evidence.
    citation_completeness: float | None
    abstained: bool
    pack_answerability: Answerability
    abstention: AbstentionCheck
    #: Per labelled relevant chunk, in label order; ``None`` when the request had no labels.
    expected: tuple[ExpectedEvidence, ...] | None = None


class ClaimOutcome(WireModel):
    """A claim's verdict without its text (what the audit topic keeps)."""

    index: NonNegInt
    status: ClaimStatus
    evidence_ids: tuple[str, ...]
    missing: NonNegInt = 0


class VerdictEvent(WireModel):
    """``ctx.verdict_event.v1``: the verify stage's audit record of one answer, without the
    answer's text: the statuses, the figures and the diagnosis."""

    schema_: Literal["ctx.verdict_event.v1"] = Field(default="ctx.verdict_event.v1", alias="schema")
    request_id: str
    stage: Literal["verify"] = "verify"
    lane: Lane
    cohort: str
    policy: PolicyRef
    query_class: QueryClass
    form: Literal["text", "claims"]
    claims: tuple[ClaimOutcome, ...]
    counts: dict[str, int]
    citations: NonNegInt
    citations_supporting: NonNegInt
    citation_precision: float | None
    claims_needing_evidence: NonNegInt
    claims_supported: NonNegInt
    citation_completeness: float | None
    abstained: bool
    pack_answerability: Answerability
    abstention: AbstentionCheck
    expected: tuple[ExpectedEvidence, ...] | None = None

    @classmethod
    def of(cls, verdict: Verdict) -> VerdictEvent:
        """The audit record of ``verdict`` (claim texts and missing values left out)."""
        data = verdict.model_dump(exclude={"schema_", "claims"})
        claims = tuple(
            ClaimOutcome(
                index=c.index, status=c.status, evidence_ids=c.evidence_ids, missing=len(c.missing)
            )
            for c in verdict.claims
        )
        return cls.model_validate({**data, "claims": claims})
