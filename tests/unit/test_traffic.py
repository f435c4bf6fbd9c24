"""Evaluation traffic, the naive baseline and the quality report (bench/)."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from bench import quality
from ctxbudget.schemas import (
    AnswerContract,
    BudgetLedger,
    Candidate,
    CandidateBatch,
    EvidenceItem,
    Instructions,
    Labels,
    ModelSpec,
    Pack,
    PolicyRef,
    Principal,
    Query,
    Turn,
)
from ctxbudget.testing import traffic
from ctxbudget.testing.naive import (
    DEFAULT_ANSWER_RESERVE,
    SAFETY_MARGIN,
    SEPARATOR_TOKENS,
    default_counter,
    naive_assemble,
    naive_budget,
)
from ctxbudget.testing.traffic import KINDS, AwkwardRates, BatchTruth, GeneratedBatch

CHUNK_ID = re.compile(r"^ch-[0-9a-f]{12}$")
INJECTION_MARKERS = ("Ignore previous", "system:", "tool_call", "\u200b", "</evidence>", "###")


def _data_dir() -> Path:
    env = os.environ.get("CTXBUDGET_DATA_DIR")
    return Path(env) if env else Path(__file__).parents[3] / "shared" / "data"


def _has_msmarco(base: Path) -> bool:
    return any((p / "corpus.jsonl").is_file() for p in (base, base / traffic.MSMARCO_DIRNAME))


@pytest.fixture(scope="module")
def generated() -> list[GeneratedBatch]:
    return traffic.synthetic(60, seed=11)


@pytest.fixture(scope="module")
def every_case() -> list[GeneratedBatch]:
    return traffic.synthetic(12, seed=5, rates=AwkwardRates.all_cases())


# ---------------------------------------------------------------- synthetic generator


def test_synthetic_is_deterministic_for_a_seed() -> None:
    """Replay and benchmarks need byte-identical traffic for the same seed."""
    first = traffic.synthetic(15, seed=3)
    again = traffic.synthetic(15, seed=3)
    other = traffic.synthetic(15, seed=4)
    assert [g.to_json() for g in first] == [g.to_json() for g in again]
    assert [g.truth.to_json() for g in first] == [g.truth.to_json() for g in again]
    assert [g.to_json() for g in first] != [g.to_json() for g in other]


def test_synthetic_lines_validate_as_candidate_batch_v1(generated: list[GeneratedBatch]) -> None:
    """Every line must parse under the wire contract the workers consume."""
    for g in generated:
        line = g.to_json()
        parsed = CandidateBatch.model_validate_json(line)
        assert json.loads(line)["schema"] == "ctx.candidate_batch.v1"
        assert parsed == g.batch
        assert parsed.principal.tenant_id == "acme" == parsed.tenant_id
        assert parsed.principal.access_labels == ("public", "internal")
        assert parsed.query.class_hint is None
        assert len(parsed.candidates) == 22


def test_labels_name_only_retrieved_originals(generated: list[GeneratedBatch]) -> None:
    """Copies, stale, injected and foreign passages must never count as needed evidence."""
    for g in generated:
        assert g.batch.labels is not None
        relevant = g.batch.labels.relevant_chunk_ids
        assert len(relevant) >= 2
        ids = {c.chunk_id for c in g.batch.candidates}
        assert set(relevant) <= ids
        assert {g.truth.kind_of(cid) for cid in relevant} == {"original"}


def test_nothing_visible_to_the_packer_reveals_the_kind(generated: list[GeneratedBatch]) -> None:
    """The packer may tell a copy from an original only through its text."""
    for g in generated:
        for c in g.batch.candidates:
            assert CHUNK_ID.match(c.chunk_id), c.chunk_id
            assert set(c.metadata) == {"retriever"}
            assert c.metadata["retriever"] in {"bm25", "hybrid"}


def _squash(text: str) -> str:
    return re.sub(r"\W+", "", text).lower()


def _case_copy(b: CandidateBatch, t: BatchTruth) -> bool:
    by_id = {c.chunk_id: c for c in b.candidates}
    for c in b.candidates:
        if t.kind_of(c.chunk_id) == "copy":
            o = by_id[t.family_of(c.chunk_id)]
            differs = c.doc_id != o.doc_id and c.source_id != o.source_id and c.text != o.text
            if differs and _squash(o.text) in _squash(c.text):
                return True
    return False


def _case_duplicate_id(b: CandidateBatch, t: BatchTruth) -> bool:
    return max(Counter(c.chunk_id for c in b.candidates).values()) >= 2


def _case_stale(b: CandidateBatch, t: BatchTruth) -> bool:
    for old in (c for c in b.candidates if t.kind_of(c.chunk_id) == "stale"):
        new = [c for c in b.candidates if c.doc_id == old.doc_id and c.version == "2"]
        if old.version == "1" and new and (old.published_at or "") < (new[0].published_at or ""):
            return old.text != new[0].text
    return False


def _case_cross_tenant(b: CandidateBatch, t: BatchTruth) -> bool:
    return any(c.tenant_id not in (None, b.principal.tenant_id) for c in b.candidates)


def _case_unauthorized(b: CandidateBatch, t: BatchTruth) -> bool:
    labels = b.principal.access_labels
    return any(c.access_label is not None and c.access_label not in labels for c in b.candidates)


def _case_injected(b: CandidateBatch, t: BatchTruth) -> bool:
    return any(
        t.is_injected(c.chunk_id) and any(m in c.text for m in INJECTION_MARKERS)
        for c in b.candidates
    )


def _case_overlap(b: CandidateBatch, t: BatchTruth) -> bool:
    for a in b.candidates:
        for c in b.candidates:
            if a.chunk_id < c.chunk_id and a.doc_id == c.doc_id and a.version == c.version:
                assert a.span is not None and c.span is not None
                if a.span.start < c.span.end and c.span.start < a.span.end:
                    return True
    return False


CASES: dict[str, Callable[[CandidateBatch, BatchTruth], bool]] = {
    "copy": _case_copy,
    "duplicate_id": _case_duplicate_id,
    "stale": _case_stale,
    "cross_tenant": _case_cross_tenant,
    "unauthorized": _case_unauthorized,
    "injected": _case_injected,
    "overlap": _case_overlap,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_synthetic_traffic_includes_each_awkward_case(
    case: str, generated: list[GeneratedBatch], every_case: list[GeneratedBatch]
) -> None:
    """The product is tested on each awkward case, at default rates and when forced."""
    check = CASES[case]
    assert any(check(g.batch, g.truth) for g in generated)
    assert all(check(g.batch, g.truth) for g in every_case)


def test_awkward_cases_score_in_the_top_band(every_case: list[GeneratedBatch]) -> None:
    """A score-sorted assembler must meet the awkward passages before most originals."""
    for g in every_case:
        originals = [c for c in g.batch.candidates if g.truth.kind_of(c.chunk_id) == "original"]
        floor = sorted((c.rerank_score or 0.0 for c in originals), reverse=True)[2]
        for c in g.batch.candidates:
            if g.truth.kind_of(c.chunk_id) in {"copy", "injected", "cross_tenant"}:
                assert (c.rerank_score or 0.0) >= floor


def test_truth_lines_round_trip(generated: list[GeneratedBatch]) -> None:
    """quality.py reads back exactly what the generator knew."""
    for g in generated[:5]:
        assert BatchTruth.from_json(g.truth.to_json()) == g.truth
        assert set(g.truth.kinds.values()) <= set(KINDS)


def test_awkward_rates_outside_zero_one_are_rejected() -> None:
    """A misconfigured rate must fail at construction, naming the field."""
    with pytest.raises(ValueError, match="injected"):
        AwkwardRates(injected=1.5)


# ---------------------------------------------------------------- naive assembler


def _batch(
    texts: list[tuple[str, float]],
    *,
    input_limit: int,
    reserve: int | None = None,
    conversation: tuple[Turn, ...] = (),
) -> CandidateBatch:
    candidates = tuple(
        Candidate(
            chunk_id=f"c{i}",
            doc_id=f"d{i}",
            source_id="s",
            text=text,
            rerank_score=score,
            retrieval_score=1.0,
        )
        for i, (text, score) in enumerate(texts)
    )
    return CandidateBatch(
        request_id="r1",
        tenant_id="acme",
        principal=Principal(tenant_id="acme", access_labels=("public",)),
        query=Query(text="q"),
        conversation=conversation,
        instructions=Instructions(text=None, tokens=100),
        model=ModelSpec(name="m", input_limit=input_limit),
        answer_contract=AnswerContract(kind="short_fact", reserve_tokens=reserve),
        candidates=candidates,
    )


def test_naive_budget_follows_the_budget_equation() -> None:
    """Input limit minus instructions, conversation, reserve (500 by default) and margin 64."""
    turn = Turn(role="user", text="an earlier question about retention")
    b = _batch([("x", 1.0)], input_limit=2000, conversation=(turn,))
    budget = naive_budget(b)
    conv = default_counter().count(turn.text)
    assert budget.conversation == conv
    assert budget.answer_reserve == DEFAULT_ANSWER_RESERVE
    assert budget.evidence_budget == 2000 - 100 - conv - DEFAULT_ANSWER_RESERVE - SAFETY_MARGIN
    assert naive_budget(_batch([], input_limit=2000, reserve=300)).answer_reserve == 300


def test_naive_fill_stops_at_the_first_passage_that_does_not_fit() -> None:
    """The baseline tail-drops: a small passage after a misfit is not admitted."""
    big = "word " * 200
    small = "short passage"
    cost = default_counter().count(small) + SEPARATOR_TOKENS
    limit = 100 + DEFAULT_ANSWER_RESERVE + SAFETY_MARGIN + cost + 10
    b = _batch([(small, 0.9), (big, 0.8), (small + "!", 0.7)], input_limit=limit)
    result = naive_assemble(b)
    assert result.admitted_chunk_ids == ("c0",)
    assert result.evidence_tokens == cost <= result.budget.evidence_budget


def test_naive_ties_break_by_chunk_id_descending_and_missing_scores_sort_last() -> None:
    """Equal scores must not depend on input order (the whole key sorts descending)."""
    b = _batch([("b", 0.5), ("a", 0.5), ("z", 0.9)], input_limit=10_000)
    unscored = b.candidates[0].model_copy(update={"chunk_id": "c9", "rerank_score": None})
    b = b.model_copy(update={"candidates": (*b.candidates, unscored)})
    assert naive_assemble(b).admitted_chunk_ids == ("c2", "c1", "c0", "c9")


def test_naive_admits_nothing_when_the_frame_eats_the_budget() -> None:
    """A prompt frame larger than the input limit leaves a zero budget, not a negative one."""
    result = naive_assemble(_batch([("x", 1.0)], input_limit=300))
    assert result.budget.evidence_budget == 0
    assert result.admitted_chunk_ids == ()
    assert not result.over_budget


def test_naive_never_exceeds_its_budget(generated: list[GeneratedBatch]) -> None:
    """The one property the baseline does have: the budget holds."""
    for g in generated:
        result = naive_assemble(g.batch)
        assert result.evidence_tokens == sum(result.admitted_costs)
        assert result.evidence_tokens <= result.budget.evidence_budget


def test_naive_admits_injected_and_cross_tenant_passages(
    every_case: list[GeneratedBatch],
) -> None:
    """The baseline's known flaw, which the product's gates exist to fix."""
    kinds: Counter[str] = Counter()
    for g in every_case:
        for cid in naive_assemble(g.batch).admitted_chunk_ids:
            kinds[g.truth.kind_of(cid) or "?"] += 1
    assert kinds["injected"] >= 1
    assert kinds["cross_tenant"] >= 1
    assert kinds["copy"] >= 1


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


# ---------------------------------------------------------------- quality


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


def test_msmarco_cli_refuses_to_write_inside_the_repo() -> None:
    """Dataset-derived files must never land in the repository (research licences)."""
    inside = Path(__file__).resolve().parents[2] / "msmarco-traffic.jsonl"
    assert traffic.main(["msmarco", "--out", str(inside), "--seed", "1"]) == 2
    assert not inside.exists()


# ---------------------------------------------------------------- MS MARCO


@pytest.mark.skipif(
    not _has_msmarco(_data_dir()),
    reason=f"MS MARCO subset not found under {_data_dir()} (set CTXBUDGET_DATA_DIR)",
)
def test_msmarco_traffic_has_labels_every_case_and_a_tight_budget() -> None:
    """The realistic traffic keeps its promises: labels, awkward cases, a budget that bites."""
    batches = traffic.from_msmarco(_data_dir(), seed=1)
    assert len(batches) == 43
    assert [g.to_json() for g in batches[:3]] == [
        g.to_json() for g in traffic.from_msmarco(_data_dir(), seed=1)[:3]
    ]
    for g in batches:
        assert 10 <= len(g.batch.candidates) <= 25
        assert g.batch.labels is not None and len(g.batch.labels.relevant_chunk_ids) >= 2
        assert {g.truth.kind_of(c) for c in g.batch.labels.relevant_chunk_ids} == {"original"}
    for case, check in CASES.items():
        assert any(check(g.batch, g.truth) for g in batches), case
    report = quality.evaluate(
        [g.batch for g in batches],
        quality.naive_admissions(g.batch for g in batches),
        {g.truth.request_id: g.truth for g in batches},
    )
    assert report.fraction_overall is not None
    assert 0.65 <= report.fraction_overall <= 0.9
    assert report.injected_admitted and report.cross_tenant_admitted
