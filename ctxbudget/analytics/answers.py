"""What the answers did with the packs, from the ``verdicts``, ``claims`` and ``expected``
tables: the report's sections (the four-way diagnosis per query class, citation precision
over time) and the claims of one request for ``ctxbudget explain``.

A database written before these tables existed has none of them: every function here then
says so instead of failing.
"""

from __future__ import annotations

from typing import Any, Protocol

import duckdb

from ctxbudget.verification.models import OUTCOMES

__all__ = ["answer_lines", "diagnosis_by_class", "has_verdicts", "precision_over_time"]


class Doc(Protocol):
    """The part of the report's document these sections write to."""

    def add(self, text: str) -> None: ...
    def h2(self, title: str, note: str = "") -> None: ...
    def table(self, headers: Any, rows: Any, cls: str = "") -> None: ...


def has_verdicts(con: duckdb.DuckDBPyConnection) -> bool:
    """The database has the verdict tables (and at least one verdict)."""
    found = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'verdicts'"
    ).fetchone()
    if not found or not found[0]:
        return False
    n = con.execute("SELECT count(*) FROM verdicts").fetchone()
    return bool(n and n[0])


def diagnosis_by_class(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    """Per lane and query class: expected chunks, then the count of each outcome, then the
    share cited (used or unsupported)."""
    counts = ", ".join(f"count(*) FILTER (WHERE outcome = '{o}')" for o in OUTCOMES)
    rows = con.execute(
        f"SELECT lane, query_class, count(*), {counts}, "
        "round(count(*) FILTER (WHERE outcome IN ('used', 'unsupported')) / count(*), 4) "
        "FROM expected GROUP BY lane, query_class ORDER BY lane, query_class"
    ).fetchall()
    return [tuple(r) for r in rows]


def precision_over_time(
    con: duckdb.DuckDBPyConnection, bucket: str = "hour"
) -> list[tuple[Any, ...]]:
    """Per lane and time bucket (``hour`` or ``day``): answers, citation precision and
    completeness (micro-averaged), unsupported claims, abstention flags."""
    if bucket not in ("hour", "day"):
        raise ValueError(f"bucket must be hour or day, got {bucket!r}")
    rows = con.execute(
        f"SELECT lane, strftime(date_trunc('{bucket}', ts), '%Y-%m-%d %H:%M') AS t, count(*), "
        "round(sum(citations_supporting) / nullif(sum(citations), 0), 4), "
        "round(sum(claims_supported) / nullif(sum(claims_needing_evidence), 0), 4), "
        "sum(unsupported_value + fabricated_id + uncited), "
        "count(*) FILTER (WHERE abstention <> 'consistent') "
        "FROM verdicts GROUP BY lane, t ORDER BY lane, t"
    ).fetchall()
    return [tuple(r) for r in rows]


def report_section(doc: Doc, con: duckdb.DuckDBPyConnection) -> None:
    """The report's section on answers: diagnosis per class, precision over time."""
    doc.h2(
        "What the answers did with the evidence",
        "From the verify stage (tables <code>verdicts</code>, <code>claims</code>, "
        "<code>expected</code>). Every expected passage of a labelled request is a "
        "<b>retrieval_miss</b> (never a candidate), a <b>packing_drop</b> (a candidate not "
        "admitted), <b>ignored</b> (admitted, not cited), <b>unsupported</b> (cited by a claim "
        "that failed its check) or <b>used</b>.",
    )
    if not has_verdicts(con):
        doc.add('<p class="note">No verdicts in this database.</p>')
        return
    rows = diagnosis_by_class(con)
    if rows:
        doc.table(("lane", "query class", "expected", *OUTCOMES, "cited share"), rows)
    else:
        doc.add('<p class="note">No labelled requests among the verdicts.</p>')
    doc.table(
        (
            "lane",
            "hour (UTC)",
            "answers",
            "citation precision",
            "completeness",
            "unsupported claims",
            "abstention flags",
        ),
        precision_over_time(con),
    )


def answer_lines(con: duckdb.DuckDBPyConnection, request_id: str) -> list[str]:
    """Each lane's verdict of one request, claim by claim (empty when there is none)."""
    if not has_verdicts(con):
        return []
    out: list[str] = []
    verdicts = con.execute(
        "SELECT lane, form, citation_precision, citation_completeness, abstention "
        "FROM verdicts WHERE request_id = ? ORDER BY lane = 'shadow', lane",
        [request_id],
    ).fetchall()
    for lane, form, precision, completeness, abstention in verdicts:
        out.append(
            f"answer ({lane}, {form}): citation precision {precision}, completeness "
            f"{completeness}, abstention {abstention}"
        )
        claims = con.execute(
            "SELECT idx, status, evidence_ids, missing_count, missing, text FROM claims "
            "WHERE request_id = ? AND lane = ? ORDER BY idx",
            [request_id, lane],
        ).fetchall()
        for idx, status, ids, n_missing, missing, text in claims:
            cited = f"[{', '.join(ids)}]" if ids else "(no citation)"
            lacks = f"; missing {', '.join(missing)}" if missing else ""
            if not missing and n_missing:
                lacks = f"; {n_missing} value(s) missing"
            shown = f" {text!r}" if text else ""
            out.append(f"  claim {idx}: {status} {cited}{lacks}{shown}")
        expected = con.execute(
            "SELECT chunk_id, outcome, evidence_id, drop_reason FROM expected "
            "WHERE request_id = ? AND lane = ? ORDER BY chunk_id",
            [request_id, lane],
        ).fetchall()
        for chunk, outcome, eid, reason in expected:
            where = f" as {eid}" if eid else ""
            why = f" ({reason})" if reason else ""
            out.append(f"  expected {chunk}: {outcome}{where}{why}")
    return out
