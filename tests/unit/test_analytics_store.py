"""The audit database: idempotent loads, replace semantics, offsets in the same transaction."""

from __future__ import annotations

import io
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from ctxbudget.analytics.records import Position, Rows
from ctxbudget.analytics.sink import Progress, Sink
from ctxbudget.analytics.store import AuditDbError, AuditStore
from ctxbudget.analytics.tables import ALL_TABLES, META
from ctxbudget.analytics.views import VIEWS
from ctxbudget.cli import main
from ctxbudget.codec import encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.testing.traffic import synthetic
from tests.paths import REPO


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, pipeline: Pipeline) -> tuple[Path, Path]:
    """Trace and pack files of 20 synthetic requests, as `ctxbudget pack` writes them."""
    root = tmp_path_factory.mktemp("audit")
    results = [pipeline.run(g.batch) for g in synthetic(20, seed=4)]
    trace, packs = root / "trace.jsonl", root / "packs.jsonl"
    trace.write_bytes(b"".join(encode(t) + b"\n" for r in results for t in r.traces))
    packs.write_bytes(b"".join(encode(r.pack) + b"\n" for r in results))
    return trace, packs


def _counts(db: Path) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
            for t in ("events", "decisions", "packs", "rejects")
        }
    finally:
        con.close()


def _load(db: Path, *paths: Path, batch_size: int = 500) -> None:
    store = AuditStore(db)
    try:
        Sink(store, batch_size=batch_size, progress=Progress(stream=io.StringIO())).run_files(
            [str(p) for p in paths]
        )
    finally:
        store.close()


def test_loading_a_file_twice_leaves_the_same_rows(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    """Keys are (request_id, stage, lane) and (request_id, lane): a second load changes nothing."""
    db = tmp_path / "a.duckdb"
    _load(db, *files, batch_size=7)
    first = _counts(db)
    assert first["events"] == 80 and first["packs"] == 20 and first["rejects"] == 0
    _load(db, *files)
    assert _counts(db) == first


def test_a_replaced_event_replaces_its_decisions(tmp_path: Path, pipeline: Pipeline) -> None:
    """The same key with other content: the last event wins and no stale decision is left."""
    g = synthetic(1, seed=9)[0]
    live = pipeline.run(g.batch).traces[2]  # select: many drops
    fewer = live.model_copy(update={"dropped": live.dropped[:1]})
    assert len(live.dropped) > 1
    store = AuditStore(tmp_path / "r.duckdb")
    try:
        for ev in (live, fewer):
            rows = Rows()
            rows.add(encode(ev), Position("f", -1, 1))
            store.write(rows)
        n = store.con.execute("SELECT count(*) FROM decisions").fetchone()
    finally:
        store.close()
    assert n == (len(live.accepted_ids) + 1,)


def test_offsets_are_committed_with_the_rows(tmp_path: Path, pipeline: Pipeline) -> None:
    """sink_offsets holds the next offset and adds up the records consumed per partition."""
    traces = pipeline.run(synthetic(1, seed=2)[0].batch).traces
    store = AuditStore(tmp_path / "o.duckdb")
    try:
        for start in (0, 2):
            rows = Rows()
            for off in (start, start + 1):
                rows.add(encode(traces[off]), Position("audit", 3, off))
            store.write(rows, {("audit", 3): (start + 2, 2)})
        assert store.offsets() == {("audit", 3): 4}
        got = store.con.execute("SELECT records FROM sink_offsets").fetchone()
    finally:
        store.close()
    assert got == (4,)


def test_the_cli_keeps_bad_lines_and_exits_1(files: tuple[Path, Path], tmp_path: Path) -> None:
    """A bad line is a row in rejects with its line number; the exit status says so."""
    trace, _ = files
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(trace.read_bytes() + b"{oops\n" + b'{"schema": "ctx.trace_event.v2"}\n')
    db = tmp_path / "c.duckdb"
    result = CliRunner().invoke(main, ["audit-sink", "--to", str(db), "--from-file", str(bad)])
    assert result.exit_code == 1, result.output
    assert "80 events" in result.output and "2 rejects" in result.output
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT pos, kind FROM rejects ORDER BY pos").fetchall()
    con.close()
    assert rows == [(81, "not_json"), (82, "unknown_schema")]


def test_a_database_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    """Never mix two schema versions in one file."""
    db = tmp_path / "v.duckdb"
    AuditStore(db).close()
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(AuditDbError, match="schema version 0"):
        AuditStore(db)


def test_the_ops_guide_names_every_column_and_view() -> None:
    """ops/analytics.md is the analysts' schema reference: nothing may go missing from it."""
    text = (REPO / "ops" / "analytics.md").read_text()
    missing = [
        f"{t.name}.{c}" for t in ALL_TABLES if t is not META for c in t.names if c not in text
    ]
    missing += [v.name for v in VIEWS if f"`{v.name}`" not in text]
    assert missing == []
