"""The quality report (``bench/quality.py``): what it counts per query, its command line, and
packs read back scoring as the naive admissions do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import quality
from ctxbudget.schemas import BudgetLedger, CandidateBatch, EvidenceItem, Labels, Pack, PolicyRef
from ctxbudget.testing import traffic
from ctxbudget.testing.naive import naive_assemble
from ctxbudget.testing.traffic import BatchTruth, GeneratedBatch
from tests.unit.scored_batches import scored_batch as _batch


def test_budget_is_tight_for_the_naive_fill(generated: list[GeneratedBatch]) -> None:
    """Tuned so that a score-sorted fill loses part of the needed evidence, not all of it."""
    report = quality.evaluate(
        [g.batch for g in generated],
        quality.naive_admissions(g.batch for g in generated),
        {g.truth.request_id: g.truth for g in generated},
    )
    assert report.fraction_overall is not None
    assert 0.6 <= report.fraction_overall <= 0.9
    assert report.over_budget == 0


def test_quality_counts_merged_members_and_families_admitted_twice() -> None:
    """A relevant chunk merged as a member is admitted; a copy beside its original is waste."""
    b = _batch([("orig", 0.9), ("copy", 0.8), ("other", 0.7)], input_limit=5000)
    b = b.model_copy(update={"labels": Labels(relevant_chunk_ids=("c0", "c2"))})
    truth = BatchTruth("r1", {"c0": "original", "c1": "copy", "c2": "original"}, {"c1": "c0"})
    merged = quality.Admission("r1", (quality.AdmittedItem(("c1", "c0")),), 40, 50)
    twice = quality.Admission(
        "r1", (quality.AdmittedItem(("c0",)), quality.AdmittedItem(("c1",))), 60, 50
    )
    q1 = quality.evaluate_query(b, merged, truth)
    q2 = quality.evaluate_query(b, twice, truth)
    assert (q1.relevant_admitted, q1.families_admitted_twice, q1.over_budget) == (1, 0, False)
    assert (q2.relevant_admitted, q2.families_admitted_twice, q2.over_budget) == (1, 1, True)
    assert quality.evaluate_query(b, None, truth).missing


def test_quality_cli_reports_the_naive_baseline_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI path analysts use: generate, then evaluate the baseline from files."""
    out = tmp_path / "batches.jsonl"
    assert traffic.main(["synthetic", "--n", "8", "--out", str(out), "--seed", "2"]) == 0
    assert traffic.truth_path_for(out).is_file()
    capsys.readouterr()
    assert quality.main(["--batches", str(out), "--naive", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["batches"] == 8
    assert data["over_budget"] == 0
    assert data["injected_admitted"] is not None
    assert len(data["per_query"]) == 8


def _pack_from_naive(batch: CandidateBatch, lane: str) -> Pack:
    result = naive_assemble(batch)
    by_id = {c.chunk_id: c for c in batch.candidates}
    items = tuple(
        EvidenceItem(
            evidence_id=f"E{i}",
            chunk_ids=(cid,),
            doc_id=by_id[cid].doc_id,
            source_id=by_id[cid].source_id,
            title=None,
            version=by_id[cid].version,
            trust="normal",
            text=by_id[cid].text,
            spans=(),
            tokens=cost,
            compressed=False,
        )
        for i, (cid, cost) in enumerate(
            zip(result.admitted_chunk_ids, result.admitted_costs, strict=True)
        )
    )
    b = result.budget
    ledger = BudgetLedger(
        input_limit=b.input_limit,
        instructions=b.instructions,
        conversation=b.conversation,
        answer_reserve=b.answer_reserve,
        safety_margin=b.safety_margin,
        ceiling=b.evidence_budget,
        evidence_budget=b.evidence_budget,
    )
    return Pack.model_validate(
        {
            "request_id": batch.request_id,
            "lane": lane,
            "cohort": "all",
            "policy": PolicyRef(name="naive", version="1"),
            "query_class": "point_lookup",
            "budget": ledger,
            "evidence": items,
            "rendered": "",
            "evidence_tokens": result.evidence_tokens,
            "answerability": "ok",
            "dropped": {},
        }
    )


def test_quality_reads_packs_like_the_naive_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], generated: list[GeneratedBatch]
) -> None:
    """Pack v1 lines carrying the naive admissions must score exactly like --naive."""
    batches_file = tmp_path / "b.jsonl"
    traffic.write_traffic(generated[:6], batches_file)
    packs_file = tmp_path / "p.jsonl"
    lines = [
        _pack_from_naive(g.batch, lane).model_dump_json(by_alias=True)
        for g in generated[:6]
        for lane in ("live", "shadow")
    ]
    packs_file.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert quality.main(["--batches", str(batches_file), "--packs", str(packs_file)]) == 2
    assert "--lane" in capsys.readouterr().err
    reports = []
    for extra in (["--packs", str(packs_file), "--lane", "shadow"], ["--naive"]):
        assert quality.main(["--batches", str(batches_file), "--json", *extra]) == 0
        reports.append(json.loads(capsys.readouterr().out))
    for key in ("relevant_admitted", "injected_admitted", "families_admitted_twice"):
        assert reports[0][key] == reports[1][key]
    assert reports[0]["per_query"] == reports[1]["per_query"]


def test_an_older_version_is_counted_against_the_newest_published_by_the_question_date() -> None:
    """A version published after the question's ``as_of`` is not yet the document's newest:
    admitting the one before it is no older version; without ``as_of`` it is."""
    from ctxbudget.testing import candidate

    v1 = candidate("v1", "text", doc_id="d", version="1", published_at="2024-01-01")
    v2 = candidate("v2", "text", doc_id="d", version="2", published_at="2025-08-01")
    assert quality._older_versions([v1], [v1, v2]) == 1
    assert quality._older_versions([v1], [v1, v2], "2025-06-30") == 0
    assert quality._older_versions([v1], [v1, v2], "2025-09-01") == 1
    assert quality._older_versions([v2], [v1, v2], "2025-06-30") == 0
