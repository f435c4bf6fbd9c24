"""Verdicts in the audit database: stored from a verdict file or the verify worker's audit
record, replaced when seen again, summed per class and over time in the report, and shown
claim by claim by `ctxbudget explain`."""

from __future__ import annotations

from pathlib import Path

import duckdb

from ctxbudget.analytics.answers import answer_lines, diagnosis_by_class, precision_over_time
from ctxbudget.analytics.explain import explain
from ctxbudget.analytics.records import Position, Rows
from ctxbudget.analytics.report import build_report
from ctxbudget.analytics.store import AuditStore
from ctxbudget.codec import encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import Labels
from ctxbudget.testing import batch, candidate
from ctxbudget.verification import Answer, AnswerVerifier, facts_from_batch
from ctxbudget.verification.models import VerdictEvent

TEXT = "API keys for the Acme gateway expire after 90 days and can be rotated."


def _store(pipeline: Pipeline, db: Path, *, event: bool = False) -> str:
    b = batch([candidate("keys", TEXT, 9.0)], query="when do keys expire?", request_id="q-1")
    b = b.model_copy(update={"labels": Labels(relevant_chunk_ids=("keys", "gone"))})
    result = pipeline.run(b)
    eid = result.pack.evidence[0].evidence_id
    answer = Answer(
        request_id="q-1", text=f"Keys expire after 90 days [{eid}]. They last 30 days [{eid}]."
    )
    verdict = AnswerVerifier().run(answer, result.pack, facts=facts_from_batch(b, result.traces))
    rows = Rows()
    for i, t in enumerate(result.traces):
        rows.add(encode(t), Position("trace.jsonl", -1, i + 1))
    rows.add(encode(result.pack), Position("packs.jsonl", -1, 1))
    record = VerdictEvent.of(verdict) if event else verdict
    rows.add(encode(record), Position("verdicts.jsonl", -1, 1))
    store = AuditStore(db)
    store.write(rows)
    store.write(rows)  # a redelivery leaves one verdict and one set of claims
    store.close()
    return eid


def test_a_verdict_file_is_stored_and_explained_claim_by_claim(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """One verdict row, two claims (text and missing values kept), two expected rows;
    explain shows them beside the pack."""
    db = tmp_path / "audit.duckdb"
    eid = _store(pipeline, db)
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute(
        "SELECT count(*), sum(supported), sum(unsupported_value) FROM verdicts"
    ).fetchone() == (1, 1, 1)
    claims = con.execute("SELECT idx, status, missing, text FROM claims ORDER BY idx").fetchall()
    assert [c[1] for c in claims] == ["supported", "unsupported_value"]
    assert claims[1][2] == ["30 days"] and claims[1][3] == "They last 30 days."
    assert diagnosis_by_class(con) == [("live", "point_lookup", 2, 1, 0, 0, 1, 0, 0.5)]
    assert [r[2:4] for r in precision_over_time(con)] == [(1, 0.5)]
    assert any("unsupported_value" in line for line in answer_lines(con, "q-1"))
    con.close()
    text = explain(db, "q-1")
    assert text is not None
    assert f"claim 1: unsupported_value [{eid}]; missing 30 days" in text
    assert "expected gone: retrieval_miss" in text
    assert f"expected keys: unsupported as {eid}" in text


def test_the_workers_audit_record_is_stored_without_answer_text(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """From a VerdictEvent: the statuses and counts, no text, the number of missing values."""
    db = tmp_path / "audit.duckdb"
    _store(pipeline, db, event=True)
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT status, missing_count, missing, text FROM claims ORDER BY idx"
    ).fetchall()
    assert rows == [("supported", 0, None, None), ("unsupported_value", 1, None, None)]
    con.close()


def test_the_report_has_a_section_on_answers(pipeline: Pipeline, tmp_path: Path) -> None:
    """The HTML report shows the diagnosis per class and citation precision over time."""
    db = tmp_path / "audit.duckdb"
    _store(pipeline, db)
    files = build_report(db, tmp_path / "report.html", title="t")
    page = files.html.read_text()
    assert "What the answers did with the evidence" in page
    assert "citation precision" in page and "retrieval_miss" in page
