"""Evaluation traffic (:mod:`ctxbudget.testing.traffic`): the synthetic generator, its truth
and awkward cases, the MS MARCO traffic."""

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
    CandidateBatch,
)
from ctxbudget.testing import traffic
from ctxbudget.testing.traffic import KINDS, AwkwardRates, BatchTruth, GeneratedBatch

CHUNK_ID = re.compile(r"^ch-[0-9a-f]{12}$")
INJECTION_MARKERS = ("Ignore previous", "system:", "tool_call", "\u200b", "</evidence>", "###")


def _data_dir() -> Path:
    env = os.environ.get("CTXBUDGET_DATA_DIR")
    return Path(env) if env else Path(__file__).parents[3] / "shared" / "data"


def _has_msmarco(base: Path) -> bool:
    return any((p / "corpus.jsonl").is_file() for p in (base, base / traffic.MSMARCO_DIRNAME))


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


def test_msmarco_cli_refuses_to_write_inside_the_repo() -> None:
    """Dataset-derived files must never land in the repository (research licences)."""
    inside = Path(__file__).resolve().parents[2] / "msmarco-traffic.jsonl"
    assert traffic.main(["msmarco", "--out", str(inside), "--seed", "1"]) == 2
    assert not inside.exists()
    assert traffic.main(["dbpedia", "--out", str(inside), "--seed", "1"]) == 2
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


@pytest.mark.skipif(
    not (_data_dir() / "dbpedia_entity_beir_subset" / "corpus.jsonl").is_file(),
    reason=f"DBPedia-Entity subset not found under {_data_dir()} (set CTXBUDGET_DATA_DIR)",
)
def test_dbpedia_traffic_keeps_entity_names_as_titles() -> None:
    """Entity-search traffic: one batch per judged query, the entity name as the title (not
    in the text), the highly relevant entities as labels, the same bytes every time."""
    batches = traffic.from_dbpedia(_data_dir(), seed=1)
    assert len(batches) == 40
    assert [g.to_json() for g in batches[:3]] == [
        g.to_json() for g in traffic.from_dbpedia(_data_dir(), seed=1)[:3]
    ]
    originals = [
        c for g in batches for c in g.batch.candidates if g.truth.kind_of(c.chunk_id) == "original"
    ]
    assert originals and all(c.title for c in originals)
    assert sum(len(g.batch.labels.relevant_chunk_ids) for g in batches if g.batch.labels) >= 40


def test_no_version_is_published_after_the_date_dated_questions_ask_about() -> None:
    """The truth labels a document's newest version as needed; a dated question (``as_of``)
    must find that same version, so the newest version of every document is published by
    then (a later date on another chunk of the same version does not make it a new one)."""
    from ctxbudget.testing.traffic.assemble import AS_OF

    batches = traffic.synthetic(300, seed=5)
    dated = [g for g in batches if g.batch.query.as_of is not None]
    assert dated and {g.batch.query.as_of for g in dated} == {AS_OF}
    checked = 0
    for g in batches:
        by_doc: dict[str, dict[str, list[str]]] = {}
        for c in g.batch.candidates:
            if c.version is not None and c.published_at is not None:
                by_doc.setdefault(c.doc_id, {}).setdefault(c.version, []).append(c.published_at)
        for versions in by_doc.values():
            if len(versions) > 1:
                newest = max(versions, key=int)
                assert min(versions[newest]) <= AS_OF
                checked += 1
    assert checked
