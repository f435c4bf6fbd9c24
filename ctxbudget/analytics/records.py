"""Raw bytes from the audit stream to table rows, or a reject that says why.

A record is dispatched on its ``schema`` field: ``ctx.trace_event.v1`` becomes one ``events``
row and its ``decisions`` rows, ``ctx.pack.v1`` one ``packs`` row, ``ctx.control_event.v1``
one ``control_events`` row, ``ctx.control_applied.v1`` one ``control_applied`` row, and
``ctx.verdict.v1`` (a verdict file) or ``ctx.verdict_event.v1`` (the verify worker's audit
record) one ``verdicts`` row, its ``claims`` rows and its ``expected`` rows, ``ctx.label.v1``
one ``labels`` row per relevant chunk; every
row gets a ``ts`` (the Kafka record timestamp, else the time the sink read it). Anything
else (not JSON, not an object, an unknown schema version, a missing or mistyped field) becomes
a reject that keeps the raw text and the error; nothing is dropped silently.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import ValidationError

from ctxbudget.analytics.tables import BUDGET_ITEMS
from ctxbudget.errors import InputError
from ctxbudget.labels import Label
from ctxbudget.models import describe_validation
from ctxbudget.rollout import ControlApplied, ControlEvent
from ctxbudget.schemas import BudgetLedger, Pack, TraceEvent
from ctxbudget.verification.models import CLAIM_STATUSES, Verdict, VerdictEvent

Row = dict[str, Any]
RejectKind = Literal["not_json", "unknown_schema", "invalid", "empty"]

TRACE_SCHEMA = "ctx.trace_event.v1"
PACK_SCHEMA = "ctx.pack.v1"
CONTROL_SCHEMA = "ctx.control_event.v1"
APPLIED_SCHEMA = "ctx.control_applied.v1"
VERDICT_SCHEMA = "ctx.verdict.v1"
VERDICT_EVENT_SCHEMA = "ctx.verdict_event.v1"
LABEL_SCHEMA = "ctx.label.v1"
KNOWN_SCHEMAS = (
    TRACE_SCHEMA,
    PACK_SCHEMA,
    CONTROL_SCHEMA,
    APPLIED_SCHEMA,
    VERDICT_SCHEMA,
    VERDICT_EVENT_SCHEMA,
    LABEL_SCHEMA,
)
RecordKind = Literal["trace", "pack", "control", "applied", "verdict", "verdict_event", "label"]
Model = TraceEvent | Pack | ControlEvent | ControlApplied | Verdict | VerdictEvent | Label
_MODELS: dict[str, tuple[RecordKind, type[Model]]] = {
    TRACE_SCHEMA: ("trace", TraceEvent),
    PACK_SCHEMA: ("pack", Pack),
    CONTROL_SCHEMA: ("control", ControlEvent),
    APPLIED_SCHEMA: ("applied", ControlApplied),
    VERDICT_SCHEMA: ("verdict", Verdict),
    VERDICT_EVENT_SCHEMA: ("verdict_event", VerdictEvent),
    LABEL_SCHEMA: ("label", Label),
}


def utc_now() -> dt.datetime:
    """The current time in UTC, naive (the ``ts`` columns are UTC ``TIMESTAMP``)."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def kafka_time(timestamp_ms: int | None) -> dt.datetime | None:
    """A Kafka record timestamp (ms since the epoch) as a naive UTC datetime; None when the
    record carries none (``None`` or negative)."""
    if timestamp_ms is None or timestamp_ms < 0:
        return None
    return dt.datetime.fromtimestamp(timestamp_ms / 1000, dt.UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class Position:
    """Where a record came from: a topic partition and offset, or a file and line."""

    origin: str
    part: int
    pos: int
    #: The record's time (UTC): its Kafka timestamp, else when the sink read it.
    ts: dt.datetime | None = None

    @property
    def time(self) -> str:
        """``ts`` (the read time when unset) as an ISO string for the ``ts`` columns."""
        return (self.ts or utc_now()).isoformat()

    def label(self) -> str:
        """``kafka:<topic>/<partition>@<offset>``, or
        ``file:<path>:<line>`` for a file (``part`` < 0)."""
        if self.part < 0:
            return f"file:{self.origin}:{self.pos}"
        return f"kafka:{self.origin}/{self.part}@{self.pos}"


@dataclass
class Rows:
    """The rows one batch of records becomes, in arrival order."""

    events: list[Row] = field(default_factory=list)
    decisions: dict[tuple[str, str, str], list[Row]] = field(default_factory=dict)
    packs: list[Row] = field(default_factory=list)
    rejects: list[Row] = field(default_factory=list)
    controls: list[Row] = field(default_factory=list)
    applied: list[Row] = field(default_factory=list)
    verdicts: list[Row] = field(default_factory=list)
    #: Per verdict (request_id, lane): its claim rows and expected-evidence rows.
    claims: dict[tuple[str, str], list[Row]] = field(default_factory=dict)
    expected: dict[tuple[str, str], list[Row]] = field(default_factory=dict)
    #: Per label (request_id, source), in arrival order: its chunk rows (a later label of
    #: the same key replaces the earlier one).
    labels: dict[tuple[str, str], list[Row]] = field(default_factory=dict)

    def add(self, raw: bytes | None, where: Position) -> None:
        """Parse one record and file its rows (or its reject)."""
        try:
            _, model = parse(raw)
        except RecordError as e:
            self.rejects.append(reject_row(raw, where, e.kind, str(e)))
            return
        if isinstance(model, TraceEvent):
            self.events.append(event_row(model, where))
            key = (model.request_id, model.stage, model.lane)
            self.decisions[key] = decision_rows(model, where)
        elif isinstance(model, Pack):
            self.packs.append(pack_row(model, where))
        elif isinstance(model, ControlEvent):
            self.controls.append(control_row(model, raw or b"", where))
        elif isinstance(model, Verdict | VerdictEvent):
            self.verdicts.append(verdict_row(model, where))
            vkey = (model.request_id, model.lane)
            self.claims[vkey] = claim_rows(model, where)
            self.expected[vkey] = expected_rows(model, where)
        elif isinstance(model, Label):
            lkey = (model.request_id, model.source)
            self.labels.pop(lkey, None)
            self.labels[lkey] = label_rows(model, where)
        else:
            self.applied.append(applied_row(model, where))

    def __len__(self) -> int:
        return (
            len(self.events)
            + len(self.packs)
            + len(self.rejects)
            + len(self.controls)
            + len(self.applied)
            + len(self.verdicts)
            + len(self.labels)
        )


class RecordError(InputError, ValueError):
    """A record the sink cannot store as a row; it becomes a reject."""

    def __init__(self, kind: RejectKind, message: str) -> None:
        super().__init__(message)
        self.kind: RejectKind = kind


def parse(raw: bytes | None) -> tuple[RecordKind, Model]:
    """Validate one record against the wire model its ``schema`` names."""
    if not raw:
        raise RecordError("empty", "empty record (no value)")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise RecordError("not_json", f"not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise RecordError("invalid", f"a JSON {type(data).__name__}, not an object")
    schema = data.get("schema")
    if schema not in KNOWN_SCHEMAS:
        raise RecordError(
            "unknown_schema" if schema is not None else "invalid",
            f"unknown schema {schema!r} (expected one of {', '.join(KNOWN_SCHEMAS)})"
            if schema is not None
            else "schema: field required",
        )
    kind, model = _MODELS[schema]
    try:
        return kind, model.model_validate_json(raw)
    except ValidationError as e:
        problems = describe_validation(e, root="(message)")
        raise RecordError("invalid", f"invalid {model.__name__}: {problems}") from e


def _budget(ledger: BudgetLedger | None) -> Row:
    if ledger is None:
        return dict.fromkeys(BUDGET_ITEMS)
    return {name: getattr(ledger, name) for name in BUDGET_ITEMS}


def event_row(ev: TraceEvent, where: Position) -> Row:
    """The ``events`` row of a trace event: its counts, budget items and details, and
    ``source`` naming where it was read."""
    return {
        "request_id": ev.request_id,
        "stage": ev.stage,
        "lane": ev.lane,
        "cohort": ev.cohort,
        "policy": str(ev.policy),
        "query_class": ev.query_class,
        "latency_ms": ev.latency_ms,
        "candidate_count": ev.candidate_count,
        "accepted_count": len(ev.accepted_ids),
        "dropped_count": len(ev.dropped),
        "accepted_ids": list(ev.accepted_ids),
        "evidence_tokens": ev.evidence_tokens,
        "route_rule": ev.route_rule,
        **_budget(ev.budget),
        "details": ev.details,
        "replay_run_id": ev.replay.run_id if ev.replay else None,
        "source": where.label(),
        "ts": where.time,
    }


def decision_rows(ev: TraceEvent, where: Position | None = None) -> list[Row]:
    """One row per candidate decision of the stage: ``admitted`` first, then each drop."""
    base = {
        "request_id": ev.request_id,
        "lane": ev.lane,
        "stage": ev.stage,
        "ts": (where or Position("", -1, 0)).time,
    }
    rows: list[Row] = [
        {**base, "seq": i, "chunk_id": cid, "reason": "admitted", "detail": None, "kept_as": None}
        for i, cid in enumerate(ev.accepted_ids)
    ]
    start = len(rows)
    rows.extend(
        {
            **base,
            "seq": start + i,
            "chunk_id": fate.chunk_id,
            "reason": fate.reason,
            "detail": fate.detail,
            "kept_as": fate.kept_as,
        }
        for i, fate in enumerate(ev.dropped)
    )
    return rows


def pack_row(pack: Pack, where: Position) -> Row:
    """The ``packs`` row of a pack: its figures, evidence ids and evidence metadata (never the
    text), and its coverage statement spread over ``coverage_*`` columns."""
    cov = pack.coverage
    return {
        "request_id": pack.request_id,
        "lane": pack.lane,
        "cohort": pack.cohort,
        "policy": str(pack.policy),
        "query_class": pack.query_class,
        "evidence_tokens": pack.evidence_tokens,
        **_budget(pack.budget),
        "answerability": pack.answerability,
        "evidence_count": len(pack.evidence),
        "evidence_ids": [e.evidence_id for e in pack.evidence],
        "chunk_ids": [c for e in pack.evidence for c in e.chunk_ids],
        # The evidence text stays out of the audit database (retention): ids, sizes, trust.
        "evidence": [e.model_dump(mode="json", exclude={"text", "spans"}) for e in pack.evidence],
        "dropped": pack.dropped,
        "dropped_total": sum(pack.dropped.values()),
        "coverage_alpha": cov.alpha if cov else None,
        "coverage_threshold": cov.threshold if cov else None,
        "coverage_n_calibration": cov.n_calibration if cov else None,
        "coverage_bin": cov.bin if cov else None,
        "coverage_guaranteed": cov.guaranteed if cov else None,
        "coverage_reason": cov.reason if cov else None,
        "replay_run_id": pack.replay.run_id if pack.replay else None,
        "source": where.label(),
        "ts": where.time,
    }


def control_row(ev: ControlEvent, raw: bytes, where: Position) -> Row:
    """The ``control_events`` row of a control change: the action, the state's version before
    and after, the state after it (percent, killed, shadow, candidate, who and when), and the
    raw JSON."""
    after = ev.after
    return {
        "version_after": after.version,
        "action": ev.action,
        "version_before": ev.before.version if ev.before else None,
        "baseline": after.baseline,
        "candidate": after.candidate,
        "percent": after.percent,
        "killed": after.killed,
        "shadow": after.shadow,
        "cohort_key": after.cohort_key,
        "updated_by": after.updated_by,
        "updated_at": after.updated_at,
        "note": after.note,
        "raw": orjson.loads(raw),
        "source": where.label(),
        "ts": where.time,
    }


def applied_row(ev: ControlApplied, where: Position) -> Row:
    """The ``control_applied`` row of a worker's report that it applied a control version."""
    return {
        "worker": ev.worker,
        "version": ev.version,
        "lag_ms": ev.lag_ms,
        "killed": ev.killed,
        "source": where.label(),
        "ts": where.time,
    }


def verdict_row(v: Verdict | VerdictEvent, where: Position) -> Row:
    """The ``verdicts`` row of a verdict (or of its audit record): claims per status, the
    citation figures and the abstention check."""
    return {
        "request_id": v.request_id,
        "lane": v.lane,
        "cohort": v.cohort,
        "policy": str(v.policy),
        "query_class": v.query_class,
        "form": v.form,
        "claims": len(v.claims),
        **{s: v.counts.get(s, 0) for s in CLAIM_STATUSES},
        "citations": v.citations,
        "citations_supporting": v.citations_supporting,
        "citation_precision": v.citation_precision,
        "claims_needing_evidence": v.claims_needing_evidence,
        "claims_supported": v.claims_supported,
        "citation_completeness": v.citation_completeness,
        "abstained": v.abstained,
        "pack_answerability": v.pack_answerability,
        "abstention": v.abstention,
        "labelled": v.expected is not None,
        "source": where.label(),
        "ts": where.time,
    }


def claim_rows(v: Verdict | VerdictEvent, where: Position) -> list[Row]:
    """One ``claims`` row per claim; the text and the missing values only from a Verdict."""
    base = {"request_id": v.request_id, "lane": v.lane, "ts": where.time}
    if isinstance(v, Verdict):
        return [
            {
                **base,
                "idx": c.index,
                "status": c.status,
                "evidence_ids": list(c.evidence_ids),
                "missing_count": len(c.missing),
                "missing": list(c.missing),
                "text": c.text,
            }
            for c in v.claims
        ]
    return [
        {
            **base,
            "idx": c.index,
            "status": c.status,
            "evidence_ids": list(c.evidence_ids),
            "missing_count": c.missing,
            "missing": None,
            "text": None,
        }
        for c in v.claims
    ]


def expected_rows(v: Verdict | VerdictEvent, where: Position) -> list[Row]:
    """One ``expected`` row per labelled relevant chunk (none without labels)."""
    return [
        {
            "request_id": v.request_id,
            "lane": v.lane,
            "chunk_id": e.chunk_id,
            "query_class": v.query_class,
            "outcome": e.outcome,
            "evidence_id": e.evidence_id,
            "drop_reason": e.drop_reason,
            "detail": e.detail,
            "ts": where.time,
        }
        for e in v.expected or ()
    ]


def label_rows(label: Label, where: Position) -> list[Row]:
    """One ``labels`` row per relevant chunk of a label (none for a label naming none)."""
    return [
        {
            "request_id": label.request_id,
            "source": label.source,
            "chunk_id": chunk_id,
            "origin": where.label(),
            "ts": where.time,
        }
        for chunk_id in dict.fromkeys(label.relevant_chunk_ids)
    ]


def _request_id(raw: bytes) -> str | None:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    rid = data.get("request_id") if isinstance(data, dict) else None
    return rid if isinstance(rid, str) else None


def reject_row(raw: bytes | None, where: Position, kind: RejectKind, error: str) -> Row:
    """The ``rejects`` row of a record that cannot be stored: why, its request id when one can be
    read, and the raw value (base64 when it is not UTF-8)."""
    data = raw or b""
    try:
        text, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(data).decode("ascii"), "base64"
    return {
        "origin": where.origin,
        "part": where.part,
        "pos": where.pos,
        "kind": kind,
        "error": error,
        "request_id": _request_id(data) if data else None,
        "raw": text,
        "raw_encoding": encoding,
        "ts": where.time,
    }
