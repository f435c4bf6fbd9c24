"""`ctxbudget explain`: one request, candidate by candidate, lane by lane, then both packs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import orjson

from ctxbudget.analytics import views
from ctxbudget.analytics.answers import answer_lines
from ctxbudget.analytics.store import connect
from ctxbudget.analytics.tables import BUDGET_ITEMS

STAGES = ("route", "consolidate", "select", "compress")


def _grid(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> list[str]:
    cells = [[("" if v is None else str(v)) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = [indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    line.append(indent + "  ".join("-" * w for w in widths))
    line.extend(
        indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in cells
    )
    return line


def _decision(reason: str, detail: str | None, kept_as: str | None) -> str:
    text = "ok" if reason == "admitted" else reason
    if kept_as:
        text += f"→{kept_as}"
    if detail:
        text += f" ({detail})"
    return text


def _budget_line(row: dict[str, Any]) -> str:
    b = {k: row[k] for k in BUDGET_ITEMS}
    if b["input_limit"] is None:
        return "  budget: (not traced)"
    room = (
        b["input_limit"]
        - b["instructions"]
        - b["conversation"]
        - b["answer_reserve"]
        - b["safety_margin"]
    )
    return (
        f"  budget: input_limit {b['input_limit']} - instructions {b['instructions']}"
        f" - conversation {b['conversation']} - answer_reserve {b['answer_reserve']}"
        f" - safety_margin {b['safety_margin']} = {room}; ceiling {b['ceiling']}"
        f" -> evidence_budget {b['evidence_budget']}"
    )


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description or ()]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _lane(con: duckdb.DuckDBPyConnection, rid: str, route: dict[str, Any]) -> list[str]:
    lane = route["lane"]
    details = orjson.loads(route["details"]) if route["details"] else {}
    needed = set(details.get("relevant_chunk_ids") or [])
    out = [
        f"lane {lane}: policy {route['policy']}, cohort {route['cohort']}, "
        f"class {route['query_class']} (rule {route['route_rule']}), "
        f"{route['candidate_count']} candidates"
        + (f", {len(needed)} needed (labels)" if details.get("labelled") else ""),
        _budget_line(route),
    ]
    per: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for d in _rows(
        con,
        "SELECT stage, chunk_id, reason, detail, kept_as FROM decisions "
        "WHERE request_id = ? AND lane = ? ORDER BY stage, seq",
        [rid, lane],
    ):
        per[d["chunk_id"]][d["stage"]].append(_decision(d["reason"], d["detail"], d["kept_as"]))
    fates = {
        f["chunk_id"]: f
        for f in _rows(
            con,
            "SELECT chunk_id, fate, effective_reason FROM v_candidate_fates "
            "WHERE request_id = ? AND lane = ?",
            [rid, lane],
        )
    }
    table = []
    for cid in sorted(fates, key=lambda c: (fates[c]["fate"] != "admitted", c)):
        f = fates[cid]
        fate = f["fate"]
        if f["effective_reason"] != fate:
            fate += f" (family: {f['effective_reason']})"
        table.append(
            (
                cid,
                "yes" if cid in needed else "",
                *("; ".join(per[cid].get(s, [])) or "-" for s in STAGES),
                fate,
            )
        )
    out.extend(_grid(("candidate", "needed", *STAGES, "fate"), table))
    missing = sorted(needed - set(fates))
    if missing:
        out.append(f"  never retrieved (needed, not among the candidates): {', '.join(missing)}")
    return out


def _packs(con: duckdb.DuckDBPyConnection, rid: str) -> list[str]:
    packs = {
        p["lane"]: p
        for p in _rows(con, "SELECT * FROM v_pack_outcomes WHERE request_id = ?", [rid])
    }
    stored = {
        p["lane"]: p
        for p in _rows(
            con, "SELECT lane, evidence, chunk_ids FROM packs WHERE request_id = ?", [rid]
        )
    }
    if not packs:
        return ["packs: none recorded"]
    lanes = sorted(packs, key=lambda lane: (lane != "live", lane))
    fields = (
        ("policy", "policy"),
        ("cohort", "cohort"),
        ("answerability", "answerability"),
        ("evidence_tokens", "evidence_tokens"),
        ("evidence_budget", "evidence_budget"),
        ("evidence items", "evidence_count"),
        ("coverage alpha", "coverage_alpha"),
        ("coverage guaranteed", "coverage_guaranteed"),
    )
    rows: list[list[Any]] = [[label, *(packs[ln][key] for ln in lanes)] for label, key in fields]
    evidence = {ln: _evidence_lines(stored.get(ln)) for ln in lanes}
    depth = max(len(v) for v in evidence.values())
    for i in range(depth):
        rows.append(
            [
                "evidence" if i == 0 else "",
                *(evidence[ln][i] if i < len(evidence[ln]) else "" for ln in lanes),
            ]
        )
    out = ["packs side by side:", *_grid(("", *lanes), rows)]
    if len(lanes) == 2 and all(ln in stored for ln in lanes):
        a, b = (set(stored[ln]["chunk_ids"]) for ln in lanes)
        out.append(f"  chunks only in {lanes[0]}: {', '.join(sorted(a - b)) or '-'}")
        out.append(f"  chunks only in {lanes[1]}: {', '.join(sorted(b - a)) or '-'}")
    return out


def _evidence_lines(pack: dict[str, Any] | None) -> list[str]:
    if pack is None:
        return ["(pack not stored)"]
    items = (
        orjson.loads(pack["evidence"]) if isinstance(pack["evidence"], str) else pack["evidence"]
    )
    return [
        f"{e['evidence_id']} {e['tokens']}t {e['trust']}"
        + (" compressed" if e["compressed"] else "")
        + f" [{', '.join(e['chunk_ids'])}]"
        for e in items
    ]


def explain(db: str | Path, request_id: str) -> str | None:
    """The explanation of one request as text, or None when the database does not know it."""
    con = connect(db, read_only=True)
    try:
        views.create(con, temp=True)
        routes = _rows(
            con,
            "SELECT * FROM events WHERE request_id = ? AND stage = 'route' "
            "ORDER BY lane = 'shadow', lane",
            [request_id],
        )
        known = con.execute(
            "SELECT (SELECT count(*) FROM events WHERE request_id = $1)"
            " + (SELECT count(*) FROM packs WHERE request_id = $1)",
            [request_id],
        ).fetchone()
        if not known or not known[0]:
            return None
        out = [f"request {request_id}"]
        for route in routes:
            out.append("")
            out.extend(_lane(con, request_id, route))
        if not routes:
            out.append("(no route trace recorded for this request)")
        out.append("")
        out.extend(_packs(con, request_id))
        claims = answer_lines(con, request_id)
        if claims:
            out.append("")
            out.extend(claims)
        return "\n".join(out) + "\n"
    finally:
        con.close()
