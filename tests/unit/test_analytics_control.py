"""Control events in their own tables, a ``ts`` on every row, the report's time axis."""

from __future__ import annotations

import datetime as dt
import io
from dataclasses import dataclass
from pathlib import Path

import duckdb
from click.testing import CliRunner

from ctxbudget.analytics.records import Position, Rows
from ctxbudget.analytics.report import build_report
from ctxbudget.analytics.sink import Progress, Sink
from ctxbudget.analytics.store import AuditStore
from ctxbudget.analytics.tables import ALL_TABLES, META, OFFSETS
from ctxbudget.cli import main
from ctxbudget.codec import encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.rollout import ControlApplied, ControlEvent, ControlState
from ctxbudget.testing.traffic import synthetic
from tests.unit.kafka_fakes import SlicedSource


def _control_lines() -> list[bytes]:
    s0 = ControlState(baseline="default@1", version=3)
    s1 = s0.model_copy(
        update={
            "candidate": "default@2",
            "percent": 10.0,
            "version": 4,
            "updated_by": "ops",
            "updated_at": "2026-01-02T03:04:05Z",
        }
    )
    s2 = s1.model_copy(update={"killed": True, "version": 5})
    return [
        encode(ControlEvent(action="set", before=s0, after=s1)),
        encode(ControlEvent(action="kill", before=s1, after=s2)),
        encode(ControlApplied(worker="w-1", version=4, lag_ms=12.5, killed=False)),
        encode(ControlApplied(worker="w-1", version=5, lag_ms=8.0, killed=True)),
    ]


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_control_events_are_stored_not_rejected_and_idempotent(tmp_path: Path) -> None:
    """`audit-sink --from-file`: control records land in their tables, twice loaded = once."""
    src = tmp_path / "audit.jsonl"
    src.write_bytes(b"".join(line + b"\n" for line in _control_lines()))
    db = tmp_path / "a.duckdb"
    before = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    for _ in range(2):
        res = CliRunner().invoke(main, ["audit-sink", "--to", str(db), "--from-file", str(src)])
        assert res.exit_code == 0, res.output
        assert "0 rejects" in res.output and "4 control events" in res.output
    after = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    assert _rows(db, "SELECT count(*) FROM rejects") == [(0,)]
    got = _rows(
        db,
        "SELECT action, version_before, version_after, percent, killed, shadow, candidate, "
        "updated_by, updated_at, json_extract_string(raw, '$.schema') FROM control_events "
        "ORDER BY version_after",
    )
    assert got == [
        ("set", 3, 4, 10.0, False, False, "default@2", "ops", "2026-01-02T03:04:05Z",
         "ctx.control_event.v1"),
        ("kill", 4, 5, 10.0, True, False, "default@2", "ops", "2026-01-02T03:04:05Z",
         "ctx.control_event.v1"),
    ]  # fmt: skip
    assert _rows(db, "SELECT worker, version, lag_ms, killed FROM control_applied ORDER BY 2") == [
        ("w-1", 4, 12.5, False),
        ("w-1", 5, 8.0, True),
    ]
    for table in ("control_events", "control_applied"):
        (lo, hi), *_ = _rows(db, f"SELECT min(ts), max(ts) FROM {table}")
        assert isinstance(lo, dt.datetime) and isinstance(hi, dt.datetime)
        assert before <= lo <= hi <= after  # the ingest time (UTC) for a file


def test_every_data_table_has_a_not_null_ts() -> None:
    """Every audit table but the meta and offsets tables has a TIMESTAMP ts column, NOT NULL."""
    for table in ALL_TABLES:
        if table in (META, OFFSETS):
            continue
        ts = [c for c in table.columns if c.name == "ts"]
        assert ts and ts[0].type == "TIMESTAMP" and not ts[0].nullable, table.name


@dataclass(frozen=True)
class _Rec:
    topic: str
    partition: int
    offset: int
    value: bytes | None
    timestamp: int | None


def test_kafka_rows_carry_the_record_timestamp(tmp_path: Path, pipeline: Pipeline) -> None:
    """From Kafka, ``ts`` is the record's timestamp on every table; without one, the read time."""
    result = pipeline.run(next(iter(synthetic(1, seed=2))).batch)
    t0 = dt.datetime(2026, 3, 1, 12, 0, 0)
    ms = int(t0.replace(tzinfo=dt.UTC).timestamp() * 1000)
    values = [
        *(encode(t) for t in result.traces),
        encode(result.pack),
        *_control_lines(),
        b"{not json",
    ]
    recs = [_Rec("audit", 0, i, v, ms + 60_000 * i) for i, v in enumerate(values)]
    recs.append(_Rec("audit", 0, len(values), b"{also bad", None))
    store = AuditStore(tmp_path / "k.duckdb")
    try:
        sink = Sink(store, batch_size=3, progress=Progress(stream=io.StringIO()))
        sink.run_kafka(SlicedSource(recs), until_idle=0)
        con = store.con
        n_traces = len(result.traces)
        first = con.execute("SELECT min(ts), max(ts) FROM events").fetchone()
        assert first == (t0, t0 + dt.timedelta(minutes=n_traces - 1))
        assert con.execute("SELECT count(*) FROM decisions WHERE ts IS NULL").fetchone() == (0,)
        assert con.execute("SELECT ts FROM packs").fetchall() == [
            (t0 + dt.timedelta(minutes=n_traces),)
        ]
        got = con.execute("SELECT ts FROM control_events ORDER BY version_after").fetchall()
        assert [r[0] for r in got] == [
            t0 + dt.timedelta(minutes=n_traces + 1),
            t0 + dt.timedelta(minutes=n_traces + 2),
        ]
        rejects = con.execute("SELECT pos, ts FROM rejects ORDER BY pos").fetchall()
        assert rejects[0][1] == t0 + dt.timedelta(minutes=len(values) - 1)
        assert rejects[1][1] > dt.datetime(2026, 6, 1)  # no record timestamp: the read time
        assert con.execute("SELECT count(*) FROM sink_offsets WHERE ts IS NULL").fetchone() == (0,)
    finally:
        store.close()


def test_the_report_has_a_time_axis(tmp_path: Path, pipeline: Pipeline) -> None:
    """An "Over time" section: a figure and a per-minute table with packs, drops, rejects."""
    db = tmp_path / "r.duckdb"
    store = AuditStore(db)
    try:
        rows = Rows()
        t0 = dt.datetime(2026, 3, 1, 12, 0, 30)
        for i, g in enumerate(synthetic(4, seed=5)):
            res = pipeline.run(g.batch)
            rows.add(encode(res.pack), Position("audit", 0, i, t0 + dt.timedelta(minutes=i // 2)))
        rows.add(b"bad", Position("audit", 0, 10, t0 + dt.timedelta(minutes=1)))
        rows.add(_control_lines()[0], Position("audit", 0, 11, t0 + dt.timedelta(minutes=1)))
        store.write(rows)
    finally:
        store.close()
    files = build_report(db, tmp_path / "r.html", title="t")
    page = files.html.read_text()
    assert "<h2>Over time</h2>" in page and "Per minute (UTC)" in page
    assert "2026-03-01 12:00" in page and "2026-03-01 12:01" in page
    assert "over_time.png" in {p.name for p in files.figures}
    assert "https://" not in page and "http://" not in page
