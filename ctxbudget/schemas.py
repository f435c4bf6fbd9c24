"""Wire models of the v1 contract (``ctxbudget schema <name>`` prints each one's JSON Schema).

Every message is a frozen pydantic v2 model. Inputs are validated strictly (a string is
never coerced into a number, nor the reverse) and unknown fields are ignored so that
producers may add fields without breaking consumers. Field names are fixed: add, never
rename. Every top-level message carries ``"schema": "<name>.v1"``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ctxbudget.models import NonNegInt as NonNegInt
from ctxbudget.models import Unit as Unit
from ctxbudget.models import WireModel as WireModel

QueryClass = Literal["point_lookup", "how_to", "comparison", "aggregation", "troubleshooting"]
QUERY_CLASSES: tuple[QueryClass, ...] = (
    "point_lookup",
    "how_to",
    "comparison",
    "aggregation",
    "troubleshooting",
)
Lane = Literal["live", "shadow"]
Trust = Literal["high", "normal", "low", "quarantined"]
Answerability = Literal["ok", "partial", "no_evidence", "insufficient_budget"]

#: The drop reasons a candidate can carry; each non-admitted candidate has exactly one.
DropReason = Literal[
    "unauthorized",
    "quarantined",
    "duplicate",
    "near_duplicate",
    "stale_version",
    "conformal",
    "relevance",
    "novelty",
    "source_cap",
    "item_cap",
    "budget",
]

# ---------------------------------------------------------------- candidate batch


class Principal(WireModel):
    """Who asks: the tenant, and the access labels whose passages may be shown."""

    tenant_id: str
    access_labels: tuple[str, ...] = ()
    #: Optional end-user id; used as the cohort key when the rollout asks for "user".
    user_id: str | None = None


class Query(WireModel):
    """The question, with an optional class hint, ``as_of`` date and sub-questions."""

    text: str
    class_hint: str | None = None
    as_of: str | None = None
    sub_questions: tuple[str, ...] | None = None


class Turn(WireModel):
    """One turn of the conversation: the speaker's role and the text."""

    role: str
    text: str


class Instructions(WireModel):
    """The system instructions: their text, or their token count when the sender states it."""

    text: str | None = None
    tokens: NonNegInt | None = None


class ModelSpec(WireModel):
    """The model the prompt is for: its name, input limit in tokens, and tokenizer."""

    name: str
    input_limit: Annotated[int, Field(gt=0)]
    tokenizer: str = "cl100k_base"


class AnswerContract(WireModel):
    """The answer expected: its kind, and the tokens to reserve for it (else the policy's)."""

    kind: str
    reserve_tokens: NonNegInt | None = None


class Span(WireModel):
    """Where a chunk sits in its document: character offsets, ``end`` not before ``start``."""

    start: NonNegInt
    end: NonNegInt

    @model_validator(mode="after")
    def _ordered(self) -> Span:
        if self.end < self.start:
            raise ValueError(f"span end {self.end} is before start {self.start}")
        return self


class Candidate(WireModel):
    """One retrieved chunk: ids, text, provenance, scores, and the fields authorization checks."""

    chunk_id: Annotated[str, Field(min_length=1)]
    doc_id: Annotated[str, Field(min_length=1)]
    source_id: Annotated[str, Field(min_length=1)]
    parent_id: str | None = None
    title: str | None = None
    text: str
    version: str | None = None
    published_at: str | None = None
    span: Span | None = None
    retrieval_score: float | None = None
    rerank_score: float | None = None
    authority: Unit | None = None
    access_label: str | None = None
    tenant_id: str | None = None
    tokens: NonNegInt | None = None
    embedding: tuple[float, ...] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("retrieval_score", "rerank_score")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("score must be a finite number")
        return v


class Labels(WireModel):
    """The chunk ids relevant to the query (replay and evaluation traffic only)."""

    relevant_chunk_ids: tuple[str, ...] = ()


class ReplayInfo(WireModel):
    """Marks a replayed request and names its run; replay is packed in the shadow lane only."""

    run_id: Annotated[str, Field(min_length=1)]


class CandidateBatch(WireModel):
    """``ctx.candidate_batch.v1``: one request and its retrieved candidates (the packer's input)."""

    schema_: Literal["ctx.candidate_batch.v1"] = Field(
        default="ctx.candidate_batch.v1", alias="schema"
    )
    request_id: Annotated[str, Field(min_length=1)]
    tenant_id: str
    principal: Principal
    query: Query
    conversation: tuple[Turn, ...] = ()
    instructions: Instructions = Instructions()
    model: ModelSpec
    answer_contract: AnswerContract
    candidates: tuple[Candidate, ...] = ()
    labels: Labels | None = None
    replay: ReplayInfo | None = None

    @model_validator(mode="after")
    def _one_tenant(self) -> CandidateBatch:
        """The batch is for its principal's tenant: the two ids must agree."""
        if self.tenant_id != self.principal.tenant_id:
            ours, theirs = (repr(t[:60]) for t in (self.tenant_id, self.principal.tenant_id))
            raise ValueError(f"tenant_id {ours} differs from principal.tenant_id {theirs}")
        return self


# ---------------------------------------------------------------- pack


class PolicyRef(WireModel):
    """Which policy packed a request; ``str()`` gives ``name@version``."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"


class BudgetLedger(WireModel):
    """The token budget of one request, line item by line item (:mod:`ctxbudget.budget`)."""

    input_limit: int
    instructions: int
    conversation: int
    answer_reserve: int
    safety_margin: int
    ceiling: int
    evidence_budget: int


class EvidenceSpan(WireModel):
    """Where part of an evidence text comes from: ``[start, end)`` of one chunk's text."""

    chunk_id: str
    start: int
    end: int


class EvidenceItem(WireModel):
    """One passage of a pack: ids, provenance, trust, text, spans and exact tokens."""

    evidence_id: str
    chunk_ids: tuple[str, ...]
    doc_id: str
    source_id: str
    title: str | None
    version: str | None
    trust: Trust
    text: str
    spans: tuple[EvidenceSpan, ...]
    tokens: int
    compressed: bool


class Coverage(WireModel):
    """The conformal filter's coverage statement for the query class of a pack."""

    alpha: float
    threshold: float | None
    n_calibration: int
    bin: str = "pooled"
    guaranteed: bool
    reason: str | None = None


class Withheld(WireModel):
    """A passage withheld from the prompt: its id and why (never its text)."""

    chunk_id: str
    reason: str
    detail: str | None = None


class WithheldSentence(WireModel):
    """A sentence cut out of a passage the injection gate flagged: where it is in the chunk's
    text (``[start, end)``) and the gate's findings on it (never its text)."""

    chunk_id: str
    start: NonNegInt
    end: NonNegInt
    findings: tuple[str, ...]


class Pack(WireModel):
    """``ctx.pack.v1``: the output for one request and lane, its evidence counted exactly."""

    schema_: Literal["ctx.pack.v1"] = Field(default="ctx.pack.v1", alias="schema")
    request_id: str
    lane: Lane
    cohort: str
    policy: PolicyRef
    query_class: QueryClass
    budget: BudgetLedger
    evidence: tuple[EvidenceItem, ...]
    rendered: str
    evidence_tokens: int
    answerability: Answerability
    dropped: dict[str, int]
    coverage: Coverage | None = None
    replay: ReplayInfo | None = None
    #: Passages the injection gate held back from this pack (ids and the gate's findings,
    #: never their text); empty when the policy renders flagged passages as low trust.
    withheld: tuple[Withheld, ...] = ()
    #: Sentences cut out of flagged passages whose rest is rendered as an excerpt (policy
    #: ``injection: cut``), by chunk id and start; absent when none was cut.
    withheld_sentences: tuple[WithheldSentence, ...] = Field(default=(), exclude_if=lambda v: not v)
    #: The sentence the system prompt should carry for this block (set when the policy
    #: datamarks evidence); absent otherwise.
    evidence_instruction: str | None = Field(default=None, exclude_if=lambda v: v is None)


# ---------------------------------------------------------------- trace, dead letters


class CandidateFate(WireModel):
    """Why one candidate was kept or dropped, as the trace records it."""

    chunk_id: str
    reason: DropReason
    detail: str | None = None
    kept_as: str | None = None


class TraceEvent(WireModel):
    """``ctx.trace_event.v1``: what one stage did with one request in one lane."""

    schema_: Literal["ctx.trace_event.v1"] = Field(default="ctx.trace_event.v1", alias="schema")
    request_id: str
    stage: Literal["route", "consolidate", "select", "compress"]
    lane: Lane
    cohort: str
    policy: PolicyRef
    query_class: QueryClass
    latency_ms: float
    candidate_count: int
    accepted_ids: tuple[str, ...] = ()
    dropped: tuple[CandidateFate, ...] = ()
    budget: BudgetLedger | None = None
    evidence_tokens: int | None = None
    route_rule: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    replay: ReplayInfo | None = None


class DeadLetter(WireModel):
    """``ctx.dead_letter.v1``: an input that could not be processed, its error and its bytes."""

    schema_: Literal["ctx.dead_letter.v1"] = Field(default="ctx.dead_letter.v1", alias="schema")
    request_id: str | None
    stage: str
    error_type: str
    error: str
    source: str
    line: int | None = None
    offset: int | None = None
    #: The original message, whole up to 64 KiB, else its first 64 KiB (see original_bytes).
    raw: str
    raw_encoding: Literal["utf-8", "base64"] = "utf-8"
    #: sha256 (hex) and size in bytes of the whole original message.
    original_sha256: str | None = None
    original_bytes: int | None = None


# ------------------------------------------------- stage batches (intermediate topics)


class Piece(WireModel):
    """A slice ``[start, end)`` of one chunk's text, placed at offset ``at`` of an item's text."""

    chunk_id: str
    start: int
    end: int
    at: int


class CutPassage(WireModel):
    """A flagged passage kept without its offending sentences: the text packed in its place,
    the map of that text back to the chunk's (``pieces``), and what was cut."""

    #: Index into ``batch.candidates``.
    index: NonNegInt
    chunk_id: str
    text: str
    pieces: tuple[Piece, ...]
    withheld: tuple[WithheldSentence, ...]


class RoutedBatch(WireModel):
    """Router output: the class, the policy, the budget ledger and who may be packed."""

    schema_: Literal["ctx.routed_batch.v1"] = Field(default="ctx.routed_batch.v1", alias="schema")
    request_id: str
    lane: Lane
    cohort: str
    policy: PolicyRef
    query_class: QueryClass
    route_rule: str
    history: bool
    budget: BudgetLedger
    conversation_turns: int
    #: Indices into ``batch.candidates`` that passed authorization and the safety gate.
    admissible: tuple[int, ...]
    dropped: tuple[CandidateFate, ...]
    batch: CandidateBatch
    #: Admissible indices the safety gate flagged, when the policy renders flagged passages
    #: as low-trust evidence instead of withholding them (their findings in ``flags``).
    flagged: tuple[int, ...] = ()
    flags: tuple[CandidateFate, ...] = ()
    #: Admissible flagged passages packed without their offending sentences (policy
    #: ``injection: cut``); absent when none was cut.
    cuts: tuple[CutPassage, ...] = Field(default=(), exclude_if=lambda v: not v)


class ConsolidatedItem(WireModel):
    """One source family (or merged span group) with its representative first."""

    item_id: str
    #: Candidate indices, representative first; the first ``unit_size`` form ``text``,
    #: the rest are consolidated copies.
    members: tuple[int, ...]
    unit_size: int
    chunk_ids: tuple[str, ...]
    doc_id: str
    source_id: str
    source_ids: tuple[str, ...]
    title: str | None
    version: str | None
    published_at: str | None
    text: str
    pieces: tuple[Piece, ...]
    score: float | None
    authority: float
    span_start: int | None


class ConsolidatedBatch(WireModel):
    """``ctx.consolidated_batch.v1``: the consolidator's output, one item per source family."""

    schema_: Literal["ctx.consolidated_batch.v1"] = Field(
        default="ctx.consolidated_batch.v1", alias="schema"
    )
    request_id: str
    routed: RoutedBatch
    #: Items ranked best first (score, then authority, then item_id).
    items: tuple[ConsolidatedItem, ...]
    dropped: tuple[CandidateFate, ...]


class Admission(WireModel):
    """An item the selector admitted, in rendering order."""

    item: int
    #: Admission order (0 = admitted first); the ordering policies rank by it.
    rank: int
    utility: float
    estimated_tokens: int
    #: When set, the item must be compressed to at most this many tokens.
    compress_to: int | None = None
    #: Why it earned its place: ``query_terms`` (uncovered query terms), ``facet`` (an
    #: option or sub-question), ``named_entity`` (an entity the question names),
    #: ``bridge:<entity>`` (about an entity an admitted item mentions),
    #: ``shared_name:<name>`` (holds a distinctive name an admitted item hands on),
    #: ``title_name:<name>`` (its title holds a name an admitted item's text hands on), ``excerpt``
    #: (admitted as its best sentences), ``unlinked`` (with ``excerpt``: one sentence fewer, at a
    #: tight budget, for an item neither linked nor matching half the query terms),
    #: ``leftover`` (compressed into the room left).
    basis: tuple[str, ...] = ()


class PackedBatch(WireModel):
    """``ctx.packed_batch.v1``: the selector's output, the admitted items in rendering order."""

    schema_: Literal["ctx.packed_batch.v1"] = Field(default="ctx.packed_batch.v1", alias="schema")
    request_id: str
    consolidated: ConsolidatedBatch
    admitted: tuple[Admission, ...]
    #: Items left out only for lack of budget, best first: the compress stage may top up with them.
    budget_dropped: tuple[int, ...]
    dropped: tuple[CandidateFate, ...]
    coverage: Coverage | None = None
    uncovered: tuple[str, ...] = ()
