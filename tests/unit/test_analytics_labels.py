"""The labels stream in the audit database: one row per relevant chunk, a later label of the
same request and source replacing the earlier, joined with the live lane's candidate fates
into the filter's coverage per source and class, and plotted in the report."""

from __future__ import annotations

from pathlib import Path

import duckdb

from ctxbudget.analytics.records import Position, Rows
from ctxbudget.analytics.report import build_report
from ctxbudget.analytics.store import AuditStore
from ctxbudget.codec import encode
from ctxbudget.labels import Label
from ctxbudget.pipeline import Pipeline
from ctxbudget.schemas import CandidateFate, TraceEvent
from ctxbudget.testing import batch, candidate

TEXT = "API keys for the Acme gateway expire after 90 days and can be rotated."
CAKE = "A recipe for lemon cake with butter and sugar."


def _as_filtered(trace: TraceEvent, chunk_id: str) -> TraceEvent:
    """The trace as if the conformal filter had dropped ``chunk_id`` at select."""
    accepted = tuple(c for c in trace.accepted_ids if c != chunk_id)
    if trace.stage != "select":
        return trace.model_copy(update={"accepted_ids": accepted})
    dropped = (*trace.dropped, CandidateFate(chunk_id=chunk_id, reason="conformal"))
    return trace.model_copy(update={"accepted_ids": accepted, "dropped": dropped})


def _rows(pipeline: Pipeline) -> Rows:
    b = batch(
        [candidate("keys", TEXT, 9.0), candidate("keys2", TEXT, 8.0), candidate("cake", CAKE, 0.5)],
        query="when do keys expire?",
        request_id="q-1",
    )
    result = pipeline.run(b)
    rows = Rows()
    for i, t in enumerate(result.traces):
        t = _as_filtered(t, "cake") if t.stage in ("select", "compress") else t
        rows.add(encode(t), Position("trace.jsonl", -1, i + 1))
    return rows


def _label(rid: str, ids: tuple[str, ...], source: str = "analyst") -> bytes:
    return encode(
        Label.model_validate({"request_id": rid, "relevant_chunk_ids": ids, "source": source})
    )


def test_labels_join_the_live_candidates_into_coverage_per_source(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """keys2 (a duplicate of the admitted keys) counts as admitted, cake (dropped by the
    filter) as not kept, gone (never a candidate) as not retrieved; an unknown request is
    not matched; the second analyst label replaces the first."""
    rows = _rows(pipeline)
    rows.add(_label("q-1", ("keys",)), Position("labels.jsonl", -1, 1))
    rows.add(_label("q-1", ("keys", "keys2", "cake", "gone")), Position("labels.jsonl", -1, 2))
    rows.add(_label("q-1", ("keys",), "verify"), Position("labels.jsonl", -1, 3))
    rows.add(_label("q-404", ("x",)), Position("labels.jsonl", -1, 4))
    db = tmp_path / "audit.duckdb"
    store = AuditStore(db)
    written = store.write(rows)
    store.write(rows)  # a redelivery changes nothing
    assert written.labels == 6 and store.counts().labels == 6
    store.close()
    con = duckdb.connect(str(db), read_only=True)
    from ctxbudget.analytics import views

    views.create(con, temp=True)
    got = con.execute(
        "SELECT source, query_class, labelled_requests, relevant, retrieved, kept_by_filter, "
        "admitted, filter_coverage, pack_coverage FROM v_label_coverage"
    ).fetchall()
    assert got == [
        ("analyst", "point_lookup", 1, 4, 3, 2, 2, 0.6667, 0.6667),
        ("verify", "point_lookup", 1, 1, 1, 1, 1, 1.0, 1.0),
    ]
    low = con.execute(
        "SELECT filter_coverage_low FROM v_label_coverage WHERE source = 'analyst'"
    ).fetchone()
    assert low is not None and 0.2 < low[0] < 0.6667  # Wilson, 2 of 3
    con.close()
    files = build_report(db, tmp_path / "report.html", title="labels")
    assert "label_coverage.png" in {p.name for p in files.figures}
    assert "Coverage of the labels stream" in files.html.read_text()


def test_a_database_without_the_labels_table_still_reports(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """A file written before the labels table existed: the section says so, nothing fails."""
    db = tmp_path / "old.duckdb"
    store = AuditStore(db)
    store.write(_rows(pipeline))
    store.close()
    con = duckdb.connect(str(db))
    con.execute("DROP VIEW v_label_coverage")
    con.execute("DROP VIEW v_label_chunks")
    con.execute("DROP TABLE labels")
    con.close()
    files = build_report(db, tmp_path / "report.html", title="old")
    assert "no labels table" in files.html.read_text()
