"""`ctxbudget report`: one self-contained HTML file built from the views, figures inlined.

Every number in the report comes from a view in ``views.py`` (the same ones analysts query),
and every figure is a PNG embedded as a ``data:`` URI and also written beside the report, so
the file opens in a browser with no network and the figures can be pasted elsewhere.
"""

from __future__ import annotations

import base64
import html
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from ctxbudget.analytics import answers, figures, views
from ctxbudget.analytics.store import connect

DIAGNOSES = ("never retrieved", "retrieved but dropped", "admitted", "in flight")

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1100px; color: #222; line-height: 1.4; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2rem;
     border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
table { border-collapse: collapse; margin: .6rem 0; font-size: .85rem; }
th, td { border: 1px solid #ccc; padding: .25rem .5rem; text-align: right; }
th { background: #f3f3f3; } td.t, th.t { text-align: left; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .85rem; color: #555; }
.note { color: #555; font-size: .9rem; } code { background: #f6f6f6; padding: 0 .2rem; }
"""


@dataclass
class ReportFiles:
    """What :func:`build_report` wrote: the HTML file, the figures folder and each figure's PNG."""

    html: Path
    figure_dir: Path
    figures: list[Path] = field(default_factory=list)


@dataclass
class _Doc:
    parts: list[str] = field(default_factory=list)
    figures: list[tuple[str, str, bytes]] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.parts.append(text)

    def h2(self, title: str, note: str = "") -> None:
        self.add(f"<h2>{html.escape(title)}</h2>")
        if note:
            self.add(f'<p class="note">{note}</p>')

    def figure(self, name: str, caption: str, png: bytes) -> None:
        self.figures.append((name, caption, png))
        data = base64.b64encode(png).decode("ascii")
        self.add(
            f'<figure id="fig-{name}"><img alt="{html.escape(caption)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{html.escape(caption)}'
            "</figcaption></figure>"
        )

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> None:
        def cell(tag: str, v: Any) -> str:
            text = "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))
            align = ' class="t"' if isinstance(v, str) or v is None else ""
            return f"<{tag}{align}>{html.escape(text)}</{tag}>"

        head = "".join(f'<th class="t">{html.escape(h)}</th>' for h in headers)
        body = "".join("<tr>" + "".join(cell("td", v) for v in r) + "</tr>" for r in rows)
        self.add(
            f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
        )


def _q(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[Any, ...]]:
    return con.execute(sql).fetchall()


def _cols(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    cur = con.execute(sql)
    return [d[0] for d in cur.description or ()], cur.fetchall()


def diagnosis_rows(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    """The seed's diagnosis table: per lane and class, needed chunks by diagnosis."""
    got: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    reasons: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for lane, cls, diagnosis, reason, n, _ in _q(con, "SELECT * FROM v_diagnosis"):
        got[(lane, cls)][diagnosis] += n
        if diagnosis == "retrieved but dropped":
            reasons[(lane, cls)][reason] += n
    rows = []
    for key in sorted(got):
        counts = got[key]
        total = sum(counts.values())
        why = ", ".join(f"{r} {n}" for r, n in sorted(reasons[key].items(), key=lambda x: -x[1]))
        rows.append(
            (
                *key,
                total,
                counts["never retrieved"],
                counts["retrieved but dropped"],
                why or "",
                counts["admitted"],
                counts["in flight"],
                round(counts["admitted"] / total, 4) if total else None,
            )
        )
    return rows


def _summary(doc: _Doc, con: duckdb.DuckDBPyConnection, db: str) -> None:
    counts = {
        t: _q(con, f"SELECT count(*) FROM {t}")[0][0]
        for t in ("events", "decisions", "packs", "rejects", "control_events")
    }
    doc.add(
        f'<p class="note">From <code>{html.escape(db)}</code>: '
        + ", ".join(f"{n} {t}" for t, n in counts.items())
        + ". Every number below comes from a view documented in <code>ops/analytics.md</code>."
        "</p>"
    )
    doc.h2("Packs per lane and policy", "view <code>v_lane_summary</code>")
    doc.table(*_cols(con, "SELECT * FROM v_lane_summary"))


def _diagnosis(doc: _Doc, con: duckdb.DuckDBPyConnection) -> None:
    doc.h2(
        "Diagnosis of needed evidence",
        "Labelled requests only (the route trace lists the relevant chunk ids). A needed chunk "
        "is <b>never retrieved</b> when it is not among the candidates (retrieval recall: "
        "indexing, filters, candidate depth), <b>retrieved but dropped</b> with the reason "
        "(packing: budget, diversity, score rules), or <b>admitted</b>. Views "
        "<code>v_needed</code>, <code>v_diagnosis</code>.",
    )
    rows = diagnosis_rows(con)
    if not rows:
        doc.add('<p class="note">No labelled requests in this database.</p>')
        return
    doc.table(
        (
            "lane",
            "query class",
            "needed",
            "never retrieved",
            "retrieved but dropped",
            "drop reasons",
            "admitted",
            "in flight",
            "admitted share",
        ),
        rows,
        cls="diagnosis",
    )
    examples = _q(
        con,
        "SELECT lane, request_id, query_class, chunk_id, diagnosis, reason, stage, kept_as "
        "FROM v_needed WHERE diagnosis IN ('never retrieved', 'retrieved but dropped') "
        "ORDER BY diagnosis DESC, lane, request_id, chunk_id LIMIT 25",
    )
    if examples:
        doc.add(
            '<p class="note">First misses (run <code>ctxbudget explain REQUEST_ID --db ...</code>'
            " for the whole story of one):</p>"
        )
        doc.table(
            ("lane", "request", "class", "chunk", "diagnosis", "reason", "stage", "kept as"),
            examples,
        )


def _figures(doc: _Doc, con: duckdb.DuckDBPyConnection) -> None:
    tokens = _q(
        con,
        "SELECT lane, query_class, evidence_tokens FROM v_pack_outcomes "
        "WHERE evidence_tokens IS NOT NULL",
    )
    if tokens:
        doc.h2("Tokens per pack", "view <code>v_pack_outcomes</code>")
        doc.figure(
            "tokens_by_class",
            "Evidence tokens per pack by query class, live vs shadow",
            figures.tokens_by_class(tokens),
        )
    drops = _q(con, "SELECT lane, reason, sum(dropped)::BIGINT FROM v_drop_reasons GROUP BY ALL")
    if drops:
        doc.h2("Drop reasons", "view <code>v_drop_reasons</code>")
        doc.figure("drop_reasons", "Candidates dropped per reason", figures.drop_reasons(drops))
        doc.table(("lane", "reason", "dropped"), sorted(drops, key=lambda r: (r[0], -r[2])))
    needed = _q(
        con,
        "SELECT lane, query_class, needed, retrieved, admitted FROM v_needed_by_class "
        "WHERE needed > 0",
    )
    if needed:
        doc.h2("Admitted vs needed evidence", "view <code>v_needed_by_class</code>")
        doc.figure(
            "needed_by_class",
            "Needed, retrieved and admitted evidence chunks per class (labelled requests)",
            figures.needed_by_class(needed),
        )
        doc.table(*_cols(con, "SELECT * FROM v_needed_by_class"))
    _coverage(doc, con)
    lat = _q(con, "SELECT lane, stage, latency_ms FROM events")
    if lat:
        doc.h2("Latency per stage", "view <code>v_stage_latency</code>")
        doc.figure("latency", "Latency per stage, live vs shadow", figures.latency(lat))
        doc.table(*_cols(con, "SELECT * FROM v_stage_latency"))


def _coverage(doc: _Doc, con: duckdb.DuckDBPyConnection) -> None:
    doc.h2(
        "Coverage against target",
        "Packs whose policy runs the conformal filter carry a coverage field. "
        "<i>filter</i>: share of retrieved needed chunks not dropped by the filter; "
        "<i>pack</i>: share actually admitted. View <code>v_coverage</code>.",
    )
    rows = _q(
        con,
        "SELECT lane, policy, alpha, target, observed_coverage, filter_coverage FROM v_coverage",
    )
    if not rows:
        doc.add('<p class="note">No pack carries a coverage field (no conformal filter).</p>')
        return
    if any(r[4] is not None for r in rows):
        doc.figure("coverage", "Coverage against the 1 - alpha target", figures.coverage(rows))
    doc.table(*_cols(con, "SELECT * FROM v_coverage"))


def _label_coverage(doc: _Doc, con: duckdb.DuckDBPyConnection) -> None:
    doc.h2(
        "Coverage of the labels stream",
        "Labels (<code>ctx.labels.v1</code>, table <code>labels</code>) joined with the live "
        "lane's candidates: the share of labelled relevant chunks that the conformal filter "
        "kept, with its Wilson 95% lower bound, and the share admitted. <i>verify</i> labels "
        "name only chunks that were kept, so their coverage is an upper bound. View "
        "<code>v_label_coverage</code>.",
    )
    if not views.exists(con, "v_label_coverage"):
        doc.add('<p class="note">This database has no labels table (an older sink).</p>')
        return
    headers, rows = _cols(con, "SELECT * FROM v_label_coverage")
    if not rows:
        doc.add('<p class="note">No label matches a live request in this database.</p>')
        return
    span = _q(con, "SELECT min(ts), max(ts) FROM v_label_chunks WHERE matched")[0]
    unit = "hour" if (span[1] - span[0]).total_seconds() > 6 * 3600 else "minute"
    over_time = _q(
        con,
        f"SELECT source, query_class, date_trunc('{unit}', ts) AS t, "
        "count(*) FILTER (WHERE kept_by_filter) / nullif(count(*) FILTER (WHERE retrieved), 0) "
        "FROM v_label_chunks WHERE matched GROUP BY ALL ORDER BY t",
    )
    doc.figure(
        "label_coverage",
        f"Relevant chunks kept by the filter per {unit}, per label source and class",
        figures.label_coverage(over_time),
    )
    doc.table(headers, rows)


def _rejects(doc: _Doc, con: duckdb.DuckDBPyConnection) -> None:
    headers, rows = _cols(con, "SELECT * FROM v_rejects_by_kind")
    doc.h2("Rejected records", "table <code>rejects</code>, view <code>v_rejects_by_kind</code>")
    if rows:
        doc.table(headers, rows)
    else:
        doc.add('<p class="note">None.</p>')


def _timeline(doc: _Doc, con: duckdb.DuckDBPyConnection) -> None:
    span = _q(
        con,
        "SELECT min(ts), max(ts) FROM (SELECT ts FROM packs UNION ALL SELECT ts FROM rejects "
        "UNION ALL SELECT ts FROM control_events)",
    )[0]
    if span[0] is None:
        return
    unit = "hour" if (span[1] - span[0]).total_seconds() > 6 * 3600 else "minute"
    packs = _q(
        con,
        f"SELECT lane, date_trunc('{unit}', ts) AS t, count(*), avg(evidence_tokens), "
        "sum(dropped_total)::BIGINT FROM packs GROUP BY ALL ORDER BY t, lane",
    )
    rejects = _q(
        con, f"SELECT date_trunc('{unit}', ts) AS t, count(*) FROM rejects GROUP BY t ORDER BY t"
    )
    controls = _q(con, "SELECT ts, action FROM control_events ORDER BY ts")
    doc.h2(
        "Over time",
        f"Per {unit} (UTC) from the <code>ts</code> columns (the Kafka record time, or when the "
        "sink read a file): packs and mean evidence tokens per pack per lane, candidates "
        "dropped from packs and rejected records; dotted lines are control changes. Tables "
        "<code>packs</code>, <code>rejects</code>, <code>control_events</code>.",
    )
    doc.figure(
        "over_time",
        f"Packs, tokens per pack, drops and rejects per {unit}",
        figures.over_time(packs, rejects, controls, unit=unit),
    )
    by_bucket: dict[Any, list[Any]] = defaultdict(lambda: [0, 0, 0])
    for _, t, n, _, dropped in packs:
        by_bucket[t][0] += n
        by_bucket[t][1] += dropped or 0
    for t, n in rejects:
        by_bucket[t][2] += n
    doc.table(
        (unit, "packs", "dropped", "rejects"),
        [(t.strftime("%Y-%m-%d %H:%M"), *v) for t, v in sorted(by_bucket.items())],
        cls="timeline",
    )
    if controls:
        doc.table(
            ("time", "action", "version", "percent", "killed", "candidate", "by"),
            _q(
                con,
                "SELECT strftime(ts, '%Y-%m-%d %H:%M:%S'), action, version_after, percent, "
                "killed, candidate, updated_by FROM control_events ORDER BY ts, version_after",
            ),
        )


SECTIONS: tuple[Callable[[_Doc, duckdb.DuckDBPyConnection], None], ...] = (
    _diagnosis,
    answers.report_section,
    _figures,
    _label_coverage,
    _timeline,
    _rejects,
)


def build_report(db: str | Path, output: Path, *, title: str) -> ReportFiles:
    """Write ``output`` (HTML) and ``<stem>_figures/*.png`` beside it."""
    con = connect(db, read_only=True)
    try:
        views.create(con, temp=True)
        doc = _Doc()
        _summary(doc, con, Path(db).name)
        for section in SECTIONS:
            section(doc, con)
    finally:
        con.close()
    output.parent.mkdir(parents=True, exist_ok=True)
    files = ReportFiles(html=output, figure_dir=output.parent / f"{output.stem}_figures")
    files.figure_dir.mkdir(exist_ok=True)
    for name, _, png in doc.figures:
        path = files.figure_dir / f"{name}.png"
        path.write_bytes(png)
        files.figures.append(path)
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>" + "\n".join(doc.parts) + "</body></html>\n"
    )
    output.write_text(page, encoding="utf-8")
    return files
