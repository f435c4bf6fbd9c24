"""Audit records to rows: every trace event, pack and bad record has a defined place."""

from __future__ import annotations

import base64

import orjson
import pytest

from ctxbudget.analytics.records import Position, RecordError, Rows, parse
from ctxbudget.codec import encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import CandidateBatch
from ctxbudget.testing import batch, candidate

HERE = Position("trace.jsonl", -1, 7)


def _labelled() -> CandidateBatch:
    cands = [
        candidate("a", "API keys expire after 90 days unless rotated.", 0.9),
        candidate("b", "API keys are secret.", 0.8, access_label="secret"),
    ]
    return batch(cands, "when do API keys expire?", labels={"relevant_chunk_ids": ("a", "zz")})


def test_a_trace_event_becomes_one_event_row_and_its_decisions(pipeline: Pipeline) -> None:
    """Route: one 'admitted' row per accepted id, then one row per drop, in order."""
    route = pipeline.run(_labelled()).traces[0]
    rows = Rows()
    rows.add(encode(route), HERE)
    (event,) = rows.events
    assert event["stage"] == "route" and event["source"] == "file:trace.jsonl:7"
    assert event["details"]["relevant_chunk_ids"] == ["a", "zz"]
    decisions = rows.decisions[("req-1", "route", "live")]
    assert [(d["seq"], d["chunk_id"], d["reason"]) for d in decisions] == [
        (0, "a", "admitted"),
        (1, "b", "unauthorized"),
    ]


def test_a_pack_becomes_one_row_without_its_text(pipeline: Pipeline) -> None:
    """Evidence text stays out of the audit database; ids, tokens and trust stay in."""
    pack = pipeline.run(_labelled()).pack
    rows = Rows()
    rows.add(encode(pack), Position("ctx.packs.v1", 2, 40))
    (row,) = rows.packs
    assert row["chunk_ids"] == ["a"] and row["evidence_tokens"] == pack.evidence_tokens
    assert row["source"] == "kafka:ctx.packs.v1/2@40"
    assert "text" not in row["evidence"][0] and row["dropped"] == {"unauthorized": 1}


@pytest.mark.parametrize(
    ("raw", "kind", "message"),
    [
        (b"{nope", "not_json", "not valid JSON"),
        (b"", "empty", "empty record"),
        (b"[1, 2]", "invalid", "not an object"),
        (b'{"request_id": "r"}', "invalid", "schema: field required"),
        (b'{"schema": "ctx.trace_event.v2"}', "unknown_schema", "ctx.trace_event.v2"),
        (b'{"schema": "ctx.pack.v1", "request_id": "r"}', "invalid", "lane"),
        (b'{"schema": "ctx.trace_event.v1", "stage": "x"}', "invalid", "request_id"),
    ],
)
def test_bad_records_are_named_by_kind(raw: bytes, kind: str, message: str) -> None:
    """Each way a record can be bad has its own kind and a message naming the problem."""
    with pytest.raises(RecordError, match=message) as err:
        parse(raw)
    assert err.value.kind == kind


def test_a_reject_keeps_the_raw_bytes_and_the_request_id() -> None:
    """Text is kept as is; bytes that are not UTF-8 are kept as base64."""
    rows = Rows()
    rows.add(b'{"schema": "ctx.trace_event.v9", "request_id": "r-9"}', HERE)
    rows.add(b"\xff\xfe not utf-8", Position("t", 0, 3))
    text, binary = rows.rejects
    assert text["request_id"] == "r-9" and text["kind"] == "unknown_schema"
    assert orjson.loads(text["raw"])["schema"] == "ctx.trace_event.v9"
    assert binary["raw_encoding"] == "base64"
    assert base64.b64decode(binary["raw"]) == b"\xff\xfe not utf-8"
    assert (binary["origin"], binary["part"], binary["pos"]) == ("t", 0, 3)
