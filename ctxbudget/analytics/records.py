"""Raw bytes from the audit stream to table rows, or a reject that says why.

A record is dispatched on its ``schema`` field: ``ctx.trace_event.v1`` becomes one ``events``
row and its ``decisions`` rows, ``ctx.pack.v1`` one ``packs`` row. Anything else (not JSON,
not an object, an unknown schema version, a missing or mistyped field) becomes a reject that
keeps the raw text and the error; nothing is dropped silently.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import ValidationError

from ctxbudget.analytics.tables import BUDGET_ITEMS
from ctxbudget.codec import describe_validation
from ctxbudget.schemas import BudgetLedger, Pack, TraceEvent

Row = dict[str, Any]
RejectKind = Literal["not_json", "unknown_schema", "invalid", "empty"]

TRACE_SCHEMA = "ctx.trace_event.v1"
PACK_SCHEMA = "ctx.pack.v1"
KNOWN_SCHEMAS = (TRACE_SCHEMA, PACK_SCHEMA)


@dataclass(frozen=True)
class Position:
    """Where a record came from: a topic partition and offset, or a file and line."""

    origin: str
    part: int
    pos: int

    def label(self) -> str:
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

    def add(self, raw: bytes | None, where: Position) -> None:
        """Parse one record and file its rows (or its reject)."""
        try:
            kind, model = parse(raw)
        except RecordError as e:
            self.rejects.append(reject_row(raw, where, e.kind, str(e)))
            return
        if kind == "trace":
            assert isinstance(model, TraceEvent)
            self.events.append(event_row(model, where))
            self.decisions[(model.request_id, model.stage, model.lane)] = decision_rows(model)
        else:
            assert isinstance(model, Pack)
            self.packs.append(pack_row(model, where))

    def __len__(self) -> int:
        return len(self.events) + len(self.packs) + len(self.rejects)


class RecordError(ValueError):
    """A record the sink cannot store as a row; it becomes a reject."""

    def __init__(self, kind: RejectKind, message: str) -> None:
        super().__init__(message)
        self.kind: RejectKind = kind


def parse(raw: bytes | None) -> tuple[Literal["trace", "pack"], TraceEvent | Pack]:
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
    try:
        if schema == TRACE_SCHEMA:
            return "trace", TraceEvent.model_validate_json(raw)
        return "pack", Pack.model_validate_json(raw)
    except ValidationError as e:
        name = "TraceEvent" if schema == TRACE_SCHEMA else "Pack"
        raise RecordError("invalid", f"invalid {name}: {describe_validation(e)}") from e


def _budget(ledger: BudgetLedger | None) -> Row:
    if ledger is None:
        return dict.fromkeys(BUDGET_ITEMS)
    return {name: getattr(ledger, name) for name in BUDGET_ITEMS}


def event_row(ev: TraceEvent, where: Position) -> Row:
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
    }


def decision_rows(ev: TraceEvent) -> list[Row]:
    """One row per candidate decision of the stage: ``admitted`` first, then each drop."""
    base = {"request_id": ev.request_id, "lane": ev.lane, "stage": ev.stage}
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
    }


def _request_id(raw: bytes) -> str | None:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    rid = data.get("request_id") if isinstance(data, dict) else None
    return rid if isinstance(rid, str) else None


def reject_row(raw: bytes | None, where: Position, kind: RejectKind, error: str) -> Row:
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
    }
