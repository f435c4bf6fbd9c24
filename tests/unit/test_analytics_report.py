"""The views, the report and `explain` on a known trace: every number checked independently."""

from __future__ import annotations

import base64
import io
import re
from collections import Counter
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import pytest

from ctxbudget.analytics import views
from ctxbudget.analytics.explain import explain
from ctxbudget.analytics.report import build_report
from ctxbudget.analytics.sink import Progress, Sink
from ctxbudget.analytics.store import AuditStore
from ctxbudget.codec import encode
from ctxbudget.pipeline import Pipeline
from ctxbudget.policy import PolicyStore
from ctxbudget.schemas import CandidateBatch, Coverage, Labels, Pack
from ctxbudget.testing import batch, candidate
from ctxbudget.testing.traffic import synthetic

COVERAGE = Coverage(alpha=0.2, threshold=0.1, n_calibration=100, guaranteed=True)


@dataclass
class Run:
    lane: str
    batch: CandidateBatch
    pack: Pack


@dataclass
class Known:
    db: Path
    runs: list[Run]


def _hand_batch() -> CandidateBatch:
    """One needed chunk admitted, one retrieved but unauthorized, one never retrieved."""
    cands = [
        candidate("a", "API keys expire after 90 days unless they are rotated.", 0.9),
        candidate("b", "API keys expire; see the secret runbook.", 0.8, access_label="secret"),
    ]
    return batch(
        cands,
        "when do API keys expire?",
        request_id="hand-1",
        labels={"relevant_chunk_ids": ("a", "b", "zz")},
    )


def _batches() -> list[CandidateBatch]:
    out = [_hand_batch()]
    for i, g in enumerate(synthetic(24, seed=6)):
        b = g.batch
        if i % 3 == 0 and b.labels is not None:  # a needed chunk retrieval never found
            ids = (*b.labels.relevant_chunk_ids, f"missing-{i}")
            b = b.model_copy(update={"labels": Labels(relevant_chunk_ids=ids)})
        out.append(b)
    return out


@pytest.fixture(scope="module")
def known(
    tmp_path_factory: pytest.TempPathFactory, store: PolicyStore, pipeline: Pipeline
) -> Known:
    root = tmp_path_factory.mktemp("known")
    lean = Pipeline.from_store(store, "lean@1")
    runs: list[Run] = []
    traces, packs = [], []
    for b in _batches():
        live = pipeline.run(b)
        shadow = lean.run(b, lane="shadow", cohort="lean")
        shadow_pack = shadow.pack.model_copy(update={"coverage": COVERAGE})
        runs += [Run("live", b, live.pack), Run("shadow", b, shadow_pack)]
        traces += [*live.traces, *shadow.traces]
        packs += [live.pack, shadow_pack]
    (root / "t.jsonl").write_bytes(b"".join(encode(t) + b"\n" for t in traces))
    (root / "p.jsonl").write_bytes(b"".join(encode(p) + b"\n" for p in packs))
    db = root / "audit.duckdb"
    audit = AuditStore(db)
    Sink(audit, progress=Progress(stream=io.StringIO())).run_files(
        [str(root / "t.jsonl"), str(root / "p.jsonl")]
    )
    audit.close()
    return Known(db, runs)


def _expected_diagnosis(runs: list[Run]) -> dict[tuple[str, str], Counter[str]]:
    """From the batches and packs alone, not from the trace: the seed's three outcomes."""
    out: dict[tuple[str, str], Counter[str]] = {}
    for r in runs:
        assert r.batch.labels is not None
        needed = set(r.batch.labels.relevant_chunk_ids)
        retrieved = {c.chunk_id for c in r.batch.candidates}
        admitted = {cid for e in r.pack.evidence for cid in e.chunk_ids}
        c = out.setdefault((r.lane, r.pack.query_class), Counter())
        c["never retrieved"] += len(needed - retrieved)
        c["admitted"] += len(needed & admitted)
        c["retrieved but dropped"] += len((needed & retrieved) - admitted)
    return out


def _query(db: Path, sql: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        views.create(con, temp=True)
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_the_diagnosis_view_matches_the_batches_and_packs(known: Known) -> None:
    """Never retrieved / retrieved but dropped / admitted, per lane and class, exactly."""
    got: dict[tuple[str, str], Counter[str]] = {}
    for lane, cls, diagnosis, _, n, _ in _query(known.db, "SELECT * FROM v_diagnosis"):
        got.setdefault((lane, cls), Counter())[diagnosis] += n
    expected = _expected_diagnosis(known.runs)
    assert got == {k: +v for k, v in expected.items()}
    assert sum(c["never retrieved"] for c in got.values()) == 2 * (1 + 8)


def test_the_hand_made_request_is_diagnosed_chunk_by_chunk(known: Known) -> None:
    """a admitted, b dropped as unauthorized at route, zz never retrieved."""
    rows = _query(
        known.db,
        "SELECT chunk_id, diagnosis, reason, stage FROM v_needed "
        "WHERE request_id = 'hand-1' AND lane = 'live' ORDER BY chunk_id",
    )
    assert rows == [
        ("a", "admitted", None, "compress"),
        ("b", "retrieved but dropped", "unauthorized", "route"),
        ("zz", "never retrieved", None, None),
    ]


def test_admitted_fates_are_exactly_the_pack_chunks(known: Known) -> None:
    """The fate view and the packs agree on what went into every pack."""
    got: dict[tuple[str, str], set[str]] = {}
    for rid, lane, cid in _query(
        known.db,
        "SELECT request_id, lane, chunk_id FROM v_candidate_fates WHERE fate = 'admitted'",
    ):
        got.setdefault((str(rid), str(lane)), set()).add(str(cid))
    expected = {
        (r.pack.request_id, r.lane): {c for e in r.pack.evidence for c in e.chunk_ids}
        for r in known.runs
        if r.pack.evidence
    }
    assert got == expected


def test_drop_reasons_and_coverage_add_up(known: Known) -> None:
    """v_drop_reasons sums the packs' dropped counts; v_coverage reads the packs' alpha."""
    got = dict(
        ((str(lane), str(reason)), int(n))  # type: ignore[call-overload]
        for lane, reason, n in _query(
            known.db, "SELECT lane, reason, sum(dropped) FROM v_drop_reasons GROUP BY ALL"
        )
    )
    expected: Counter[tuple[str, str]] = Counter()
    for r in known.runs:
        for reason, n in r.pack.dropped.items():
            expected[(r.lane, reason)] += n
    assert got == dict(expected)
    ((lane, alpha, target, packs),) = _query(
        known.db, "SELECT lane, alpha, target, packs FROM v_coverage"
    )
    assert (lane, alpha, target, packs) == ("shadow", 0.2, 0.8, 25)


class _Cells(HTMLParser):
    """Rows of the table with class="diagnosis", and the <img> sources."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.imgs: list[str] = []
        self._in = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._in = a.get("class") == "diagnosis"
        elif tag == "tr" and self._in:
            self.rows.append([])
        elif tag == "td" and self._in:
            self._cell = []
        elif tag == "img":
            self.imgs.append(a.get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._in = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def test_the_report_shows_the_diagnosis_and_embeds_every_figure(
    known: Known, tmp_path: Path
) -> None:
    """The HTML table carries the view's numbers; each figure is inline and beside the file."""
    files = build_report(known.db, tmp_path / "r.html", title="t")
    html = files.html.read_text()
    cells = _Cells()
    cells.feed(html)
    table = {(r[0], r[1]): r for r in cells.rows if r}
    for (lane, cls), c in _expected_diagnosis(known.runs).items():
        row = table[(lane, cls)]
        assert row[2] == str(sum(c.values()))
        assert (row[3], row[4], row[6]) == (
            str(c["never retrieved"]),
            str(c["retrieved but dropped"]),
            str(c["admitted"]),
        )
    names = sorted(p.name for p in files.figures)
    assert names == [
        "coverage.png",
        "drop_reasons.png",
        "latency.png",
        "needed_by_class.png",
        "over_time.png",
        "tokens_by_class.png",
    ]
    inline = [base64.b64decode(s.split(",", 1)[1]) for s in cells.imgs]
    assert sorted(inline) == sorted(p.read_bytes() for p in files.figures)
    assert all(b.startswith(b"\x89PNG") for b in inline)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "must not load anything"


def test_explain_tells_the_story_of_one_request(known: Known) -> None:
    """Every candidate with its fate per lane, the budget line, both packs side by side."""
    text = explain(known.db, "hand-1")
    assert text is not None
    assert "lane live: policy default@1" in text and "lane shadow: policy lean@1" in text
    assert re.search(r"^  b\s+yes\s+unauthorized \(access_label\)", text, re.M)
    assert "never retrieved (needed, not among the candidates): zz" in text
    assert "budget: input_limit 4096" in text and "packs side by side:" in text
    assert explain(known.db, "no-such-request") is None
