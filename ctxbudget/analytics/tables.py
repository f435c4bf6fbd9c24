"""The audit database's tables. One column list per table gives the DDL and the loader's types.

Rows reach DuckDB as one JSON document per row, parsed in SQL with ``from_json`` against
:func:`struct_spec`; the same :class:`Column` list builds ``CREATE TABLE``, so the two
cannot drift. Bump :data:`SCHEMA_VERSION` on any change a reader would notice.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

SCHEMA_VERSION = "2"

BUDGET_ITEMS: tuple[str, ...] = (
    "input_limit",
    "instructions",
    "conversation",
    "answer_reserve",
    "safety_margin",
    "ceiling",
    "evidence_budget",
)


@dataclass(frozen=True)
class Column:
    """One column: its name, its DuckDB type, and whether it may be NULL."""

    name: str
    type: str
    nullable: bool = True


@dataclass(frozen=True)
class Table:
    """One table: its columns in order and the columns of its primary key."""

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The column names, in table order."""
        return tuple(c.name for c in self.columns)

    def ddl(self) -> str:
        """The ``CREATE TABLE IF NOT EXISTS`` statement, primary key included."""
        cols = [f"{c.name} {c.type}{'' if c.nullable else ' NOT NULL'}" for c in self.columns]
        cols.append(f"PRIMARY KEY ({', '.join(self.key)})")
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  " + ",\n  ".join(cols) + "\n)"

    def struct_spec(self) -> str:
        """The ``from_json`` structure of one row, as a SQL string literal's content."""
        return orjson.dumps({c.name: c.type for c in self.columns}).decode().replace("'", "''")


def _c(name: str, type_: str, nullable: bool = True) -> Column:
    return Column(name, type_, nullable)


_BUDGET = tuple(_c(n, "INTEGER") for n in BUDGET_ITEMS)
#: When the record was produced (its Kafka timestamp) or, when read from a file or a record
#: without one, when the sink read it; UTC.
_TS = _c("ts", "TIMESTAMP", False)

EVENTS = Table(
    "events",
    (
        _c("request_id", "VARCHAR", False),
        _c("stage", "VARCHAR", False),
        _c("lane", "VARCHAR", False),
        _c("cohort", "VARCHAR", False),
        _c("policy", "VARCHAR", False),
        _c("query_class", "VARCHAR", False),
        _c("latency_ms", "DOUBLE", False),
        _c("candidate_count", "INTEGER", False),
        _c("accepted_count", "INTEGER", False),
        _c("dropped_count", "INTEGER", False),
        _c("accepted_ids", "VARCHAR[]", False),
        _c("evidence_tokens", "INTEGER"),
        _c("route_rule", "VARCHAR"),
        *_BUDGET,
        _c("details", "JSON", False),
        _c("replay_run_id", "VARCHAR"),
        _c("source", "VARCHAR", False),
        _TS,
    ),
    key=("request_id", "stage", "lane"),
)

DECISIONS = Table(
    "decisions",
    (
        _c("request_id", "VARCHAR", False),
        _c("lane", "VARCHAR", False),
        _c("stage", "VARCHAR", False),
        _c("seq", "INTEGER", False),
        _c("chunk_id", "VARCHAR", False),
        _c("reason", "VARCHAR", False),
        _c("detail", "VARCHAR"),
        _c("kept_as", "VARCHAR"),
        _TS,
    ),
    key=("request_id", "lane", "stage", "seq"),
)

PACKS = Table(
    "packs",
    (
        _c("request_id", "VARCHAR", False),
        _c("lane", "VARCHAR", False),
        _c("cohort", "VARCHAR", False),
        _c("policy", "VARCHAR", False),
        _c("query_class", "VARCHAR", False),
        _c("evidence_tokens", "INTEGER", False),
        *_BUDGET,
        _c("answerability", "VARCHAR", False),
        _c("evidence_count", "INTEGER", False),
        _c("evidence_ids", "VARCHAR[]", False),
        _c("chunk_ids", "VARCHAR[]", False),
        _c("evidence", "JSON", False),
        _c("dropped", "MAP(VARCHAR, INTEGER)", False),
        _c("dropped_total", "INTEGER", False),
        _c("coverage_alpha", "DOUBLE"),
        _c("coverage_threshold", "DOUBLE"),
        _c("coverage_n_calibration", "INTEGER"),
        _c("coverage_bin", "VARCHAR"),
        _c("coverage_guaranteed", "BOOLEAN"),
        _c("coverage_reason", "VARCHAR"),
        _c("replay_run_id", "VARCHAR"),
        _c("source", "VARCHAR", False),
        _TS,
    ),
    key=("request_id", "lane"),
)

REJECTS = Table(
    "rejects",
    (
        _c("origin", "VARCHAR", False),
        _c("part", "INTEGER", False),
        _c("pos", "BIGINT", False),
        _c("kind", "VARCHAR", False),
        _c("error", "VARCHAR", False),
        _c("request_id", "VARCHAR"),
        _c("raw", "VARCHAR", False),
        _c("raw_encoding", "VARCHAR", False),
        _TS,
    ),
    key=("origin", "part", "pos"),
)

CONTROL_EVENTS = Table(
    "control_events",
    (
        _c("version_after", "BIGINT", False),
        _c("action", "VARCHAR", False),
        _c("version_before", "BIGINT"),
        _c("baseline", "VARCHAR", False),
        _c("candidate", "VARCHAR"),
        _c("percent", "DOUBLE", False),
        _c("killed", "BOOLEAN", False),
        _c("shadow", "BOOLEAN", False),
        _c("cohort_key", "VARCHAR", False),
        _c("updated_by", "VARCHAR"),
        _c("updated_at", "VARCHAR"),
        _c("note", "VARCHAR"),
        _c("raw", "JSON", False),
        _c("source", "VARCHAR", False),
        _TS,
    ),
    key=("version_after", "action"),
)

CONTROL_APPLIED = Table(
    "control_applied",
    (
        _c("worker", "VARCHAR", False),
        _c("version", "BIGINT", False),
        _c("lag_ms", "DOUBLE", False),
        _c("killed", "BOOLEAN", False),
        _c("source", "VARCHAR", False),
        _TS,
    ),
    key=("worker", "version"),
)

VERDICTS = Table(
    "verdicts",
    (
        _c("request_id", "VARCHAR", False),
        _c("lane", "VARCHAR", False),
        _c("cohort", "VARCHAR", False),
        _c("policy", "VARCHAR", False),
        _c("query_class", "VARCHAR", False),
        _c("form", "VARCHAR", False),
        _c("claims", "INTEGER", False),
        _c("supported", "INTEGER", False),
        _c("fabricated_id", "INTEGER", False),
        _c("unsupported_value", "INTEGER", False),
        _c("uncited", "INTEGER", False),
        _c("uncheckable", "INTEGER", False),
        _c("citations", "INTEGER", False),
        _c("citations_supporting", "INTEGER", False),
        _c("citation_precision", "DOUBLE"),
        _c("claims_needing_evidence", "INTEGER", False),
        _c("claims_supported", "INTEGER", False),
        _c("citation_completeness", "DOUBLE"),
        _c("abstained", "BOOLEAN", False),
        _c("pack_answerability", "VARCHAR", False),
        _c("abstention", "VARCHAR", False),
        _c("labelled", "BOOLEAN", False),
        _c("source", "VARCHAR", False),
        _TS,
    ),
    key=("request_id", "lane"),
)

#: One row per claim of a verdict; ``text`` and ``missing`` only when read from a Verdict
#: (the audit topic's VerdictEvent carries no answer text).
CLAIMS = Table(
    "claims",
    (
        _c("request_id", "VARCHAR", False),
        _c("lane", "VARCHAR", False),
        _c("idx", "INTEGER", False),
        _c("status", "VARCHAR", False),
        _c("evidence_ids", "VARCHAR[]", False),
        _c("missing_count", "INTEGER", False),
        _c("missing", "VARCHAR[]"),
        _c("text", "VARCHAR"),
        _TS,
    ),
    key=("request_id", "lane", "idx"),
)

#: One row per labelled relevant chunk of a verdict: the four-way diagnosis.
EXPECTED = Table(
    "expected",
    (
        _c("request_id", "VARCHAR", False),
        _c("lane", "VARCHAR", False),
        _c("chunk_id", "VARCHAR", False),
        _c("query_class", "VARCHAR", False),
        _c("outcome", "VARCHAR", False),
        _c("evidence_id", "VARCHAR"),
        _c("drop_reason", "VARCHAR"),
        _c("detail", "VARCHAR"),
        _TS,
    ),
    key=("request_id", "lane", "chunk_id"),
)

#: One row per relevant chunk of a Label (``ctx.labels.v1``); a later label of the same
#: request and source replaces the earlier one's rows.
LABELS = Table(
    "labels",
    (
        _c("request_id", "VARCHAR", False),
        _c("source", "VARCHAR", False),
        _c("chunk_id", "VARCHAR", False),
        _c("origin", "VARCHAR", False),
        _TS,
    ),
    key=("request_id", "source", "chunk_id"),
)

OFFSETS = Table(
    "sink_offsets",
    (
        _c("topic", "VARCHAR", False),
        _c("part", "INTEGER", False),
        _c("next_offset", "BIGINT", False),
        _c("records", "BIGINT", False),
        _c("ts", "TIMESTAMP"),  # when the sink last committed this partition's offset (UTC)
    ),
    key=("topic", "part"),
)

META = Table("meta", (_c("key", "VARCHAR", False), _c("value", "VARCHAR", False)), key=("key",))

ALL_TABLES: tuple[Table, ...] = (
    META,
    EVENTS,
    DECISIONS,
    PACKS,
    REJECTS,
    CONTROL_EVENTS,
    CONTROL_APPLIED,
    VERDICTS,
    CLAIMS,
    EXPECTED,
    LABELS,
    OFFSETS,
)
