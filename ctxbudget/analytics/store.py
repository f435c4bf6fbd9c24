"""The DuckDB side of the sink: one transaction per batch, offsets stored with the rows.

Every table has a primary key, and a batch is written with ``INSERT OR REPLACE``: a record
seen twice (an at-least-once redelivery, a file loaded again) leaves one row, the last one
written. When a trace event replaces an earlier one, the earlier event's decisions are deleted
first, so ``decisions`` always matches ``events``. Kafka offsets (``sink_offsets``) are written
in the same transaction as the rows they cover: after a crash the sink resumes exactly after
the last committed batch, neither losing nor re-reading a record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import orjson

from ctxbudget.analytics import views
from ctxbudget.analytics.records import Row, Rows, utc_now
from ctxbudget.analytics.tables import (
    ALL_TABLES,
    CLAIMS,
    CONTROL_APPLIED,
    CONTROL_EVENTS,
    DECISIONS,
    EVENTS,
    EXPECTED,
    LABELS,
    META,
    OFFSETS,
    PACKS,
    REJECTS,
    SCHEMA_VERSION,
    VERDICTS,
    Table,
)
from ctxbudget.errors import CtxBudgetError


class AuditDbError(CtxBudgetError):
    """The audit database cannot be opened or has an unknown schema version."""


@dataclass
class Counts:
    """What the store holds or has written: rows per table."""

    events: int = 0
    decisions: int = 0
    packs: int = 0
    rejects: int = 0
    controls: int = 0
    applied: int = 0
    verdicts: int = 0
    labels: int = 0

    def add(self, other: Counts) -> None:
        """Add ``other``'s counts to these, in place."""
        self.events += other.events
        self.decisions += other.decisions
        self.packs += other.packs
        self.rejects += other.rejects
        self.controls += other.controls
        self.applied += other.applied
        self.verdicts += other.verdicts
        self.labels += other.labels


def connect(path: str | Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the audit database; a clear error when another process holds its lock."""
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as e:
        hint = (
            " (DuckDB allows one writing process: stop `ctxbudget audit-sink` on this file, "
            "or report from a copy made while it is stopped)"
            if "lock" in str(e).lower()
            else ""
        )
        raise AuditDbError(f"cannot open {path}: {e}{hint}") from e
    except duckdb.Error as e:  # not a DuckDB file, or one DuckDB cannot read
        raise AuditDbError(f"cannot open {path} as a DuckDB audit database: {e}") from e


def _column(values: list[Any]) -> np.ndarray[Any, np.dtype[np.object_]]:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _dedupe(rows: Iterable[Row], key: tuple[str, ...]) -> list[Row]:
    """The last row per key, in first-seen order (one INSERT may not touch a key twice)."""
    last: dict[tuple[Any, ...], Row] = {}
    for row in rows:
        k = tuple(row[c] for c in key)
        last.pop(k, None)
        last[k] = row
    return list(last.values())


class AuditStore:
    """The audit database, open for writing by one sink."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.con = connect(self.path)
        self._create()

    def _create(self) -> None:
        con = self.con
        con.execute("BEGIN")
        for table in ALL_TABLES:
            con.execute(table.ddl())
        found = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if found is None:
            con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [SCHEMA_VERSION])
        elif found[0] != SCHEMA_VERSION:
            con.execute("ROLLBACK")
            raise AuditDbError(
                f"{self.path} has audit schema version {found[0]}, this ctxbudget writes "
                f"version {SCHEMA_VERSION}: sink into a new file"
            )
        views.create(con)
        con.execute("COMMIT")

    def close(self) -> None:
        """Close the database; every batch is already committed by :meth:`write`."""
        self.con.close()

    def offsets(self) -> dict[tuple[str, int], int]:
        """The next offset to read per (topic, partition), as last committed here."""
        rows = self.con.execute(f"SELECT topic, part, next_offset FROM {OFFSETS.name}").fetchall()
        return {(t, int(p)): int(o) for t, p, o in rows}

    def counts(self) -> Counts:
        """The rows each table holds now."""

        def n(table: Table) -> int:
            got = self.con.execute(f"SELECT count(*) FROM {table.name}").fetchone()
            return int(got[0]) if got else 0

        return Counts(
            n(EVENTS),
            n(DECISIONS),
            n(PACKS),
            n(REJECTS),
            n(CONTROL_EVENTS),
            n(CONTROL_APPLIED),
            n(VERDICTS),
            n(LABELS),
        )

    def write(
        self, rows: Rows, offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None
    ) -> Counts:
        """Write one batch and (for Kafka) its offsets in one transaction.

        ``offsets`` maps (topic, partition) to (next offset, records consumed in this batch).
        """
        con = self.con
        events = _dedupe(rows.events, EVENTS.key)
        con.execute("BEGIN")
        try:
            if events:
                self._replace_decisions(events)
                self._insert(EVENTS, events)
                decisions = [
                    d
                    for e in events
                    for d in rows.decisions[(e["request_id"], e["stage"], e["lane"])]
                ]
                self._insert(DECISIONS, decisions)
            else:
                decisions = []
            packs = _dedupe(rows.packs, PACKS.key)
            self._insert(PACKS, packs)
            rejects = _dedupe(rows.rejects, REJECTS.key)
            self._insert(REJECTS, rejects)
            controls = _dedupe(rows.controls, CONTROL_EVENTS.key)
            self._insert(CONTROL_EVENTS, controls)
            applied = _dedupe(rows.applied, CONTROL_APPLIED.key)
            self._insert(CONTROL_APPLIED, applied)
            verdicts = _dedupe(rows.verdicts, VERDICTS.key)
            self._write_verdicts(verdicts, rows)
            label_rows = self._write_labels(rows)
            if offsets:
                self._save_offsets(offsets)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return Counts(
            len(events),
            len(decisions),
            len(packs),
            len(rejects),
            len(controls),
            len(applied),
            len(verdicts),
            label_rows,
        )

    def _write_labels(self, rows: Rows) -> int:
        """Each label's chunk rows, after deleting the rows of an earlier label of the same
        request and source; the number of rows written."""
        if not rows.labels:
            return 0
        keys = {
            "request_id": _column([k[0] for k in rows.labels]),
            "source": _column([k[1] for k in rows.labels]),
        }
        with self._registered("label_keys", keys):
            self.con.execute(
                f"DELETE FROM {LABELS.name} t USING label_keys k "
                "WHERE t.request_id = k.request_id AND t.source = k.source"
            )
        chunks = [r for per in rows.labels.values() for r in per]
        self._insert(LABELS, chunks)
        return len(chunks)

    def _write_verdicts(self, verdicts: list[Row], rows: Rows) -> None:
        """Verdict rows, their claims and expected evidence; a verdict seen again replaces
        its earlier rows (the claims and diagnosis of the earlier one are deleted first)."""
        if not verdicts:
            return
        keys = {c: _column([v[c] for v in verdicts]) for c in ("request_id", "lane")}
        with self._registered("verdict_keys", keys):
            for table in (CLAIMS, EXPECTED):
                self.con.execute(
                    f"DELETE FROM {table.name} t USING verdict_keys k "
                    "WHERE t.request_id = k.request_id AND t.lane = k.lane"
                )
        self._insert(VERDICTS, verdicts)
        for table, per in ((CLAIMS, rows.claims), (EXPECTED, rows.expected)):
            self._insert(table, [r for v in verdicts for r in per[(v["request_id"], v["lane"])]])

    def _insert(self, table: Table, rows: list[Row]) -> None:
        if not rows:
            return
        cols = ", ".join(table.names)
        with self._registered("rows_src", {"j": _column([orjson.dumps(r).decode() for r in rows])}):
            self.con.execute(
                f"INSERT OR REPLACE INTO {table.name} ({cols}) "
                f"SELECT unnest(from_json(j, '{table.struct_spec()}')) FROM rows_src"
            )

    @contextmanager
    def _registered(self, name: str, columns: dict[str, Any]) -> Iterator[None]:
        """Expose a dict of NumPy columns to SQL under ``name`` for one statement."""
        self.con.register(name, columns)
        try:
            yield
        finally:
            self.con.unregister(name)

    def _replace_decisions(self, events: list[Row]) -> None:
        """Delete the decisions of events about to be replaced (same key, maybe other content)."""
        names = ("request_id", "stage", "lane")
        with self._registered("new_keys", {c: _column([e[c] for e in events]) for c in names}):
            existing = self.con.execute(
                "SELECT k.request_id, k.stage, k.lane FROM new_keys k "
                "SEMI JOIN events e USING (request_id, stage, lane)"
            ).fetchall()
        if not existing:
            return
        old = {c: _column([row[i] for row in existing]) for i, c in enumerate(names)}
        with self._registered("old_keys", old):
            self.con.execute(
                "DELETE FROM decisions d USING old_keys o WHERE d.request_id = o.request_id "
                "AND d.stage = o.stage AND d.lane = o.lane"
            )

    def _save_offsets(self, offsets: Mapping[tuple[str, int], tuple[int, int]]) -> None:
        now = utc_now()
        for (topic, part), (next_offset, consumed) in sorted(offsets.items()):
            self.con.execute(
                f"INSERT INTO {OFFSETS.name} VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (topic, part) DO UPDATE SET next_offset = excluded.next_offset, "
                "records = sink_offsets.records + excluded.records, ts = excluded.ts",
                [topic, part, next_offset, consumed, now],
            )


__all__ = ["META", "AuditDbError", "AuditStore", "Counts", "connect"]
