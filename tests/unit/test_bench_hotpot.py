"""HotpotQA traffic (bench/hotpot.py), read from the shared data folder."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bench import hotpot
from ctxbudget.schemas import CandidateBatch
from ctxbudget.testing.naive import default_counter, naive_budget
from ctxbudget.testing.traffic import (
    KINDS,
    TENANT,
    BatchTruth,
    GeneratedBatch,
    TrafficError,
    chunk_id_for,
    default_data_dir,
    doc_id_for,
    read_truth,
)

SETTINGS = [(b, a) for b in ("moderate", "tight") for a in (False, True)]
EVIDENCE_BUDGET = {"moderate": (650, 760), "tight": (370, 450)}
INJECTION_MARKERS = ("Ignore previous", "system:", "tool_call", "\u200b", "</evidence>", "###")


def _folder() -> Path:
    return default_data_dir() / hotpot.HOTPOT_DIRNAME


@pytest.fixture(scope="module")
def corpus() -> hotpot.HotpotCorpus:
    if not _folder().is_dir():
        pytest.skip(f"HotpotQA sample not found at {_folder()}")
    return hotpot.HotpotCorpus.load(_folder())


@pytest.fixture(scope="module")
def traffic(corpus: hotpot.HotpotCorpus) -> dict[tuple[str, bool], list[GeneratedBatch]]:
    return {
        (b, a): hotpot.from_hotpot(_folder(), seed=1, budget=b, awkward=a, corpus=corpus)
        for b, a in SETTINGS
    }


@pytest.fixture(scope="module")
def questions(corpus: hotpot.HotpotCorpus) -> dict[str, hotpot.HotpotQuestion]:
    return {q.qid: q for q in hotpot.load_hotpot(_folder())}


def _originals(g: GeneratedBatch) -> list[str]:
    return [c.chunk_id for c in g.batch.candidates if g.truth.kind_of(c.chunk_id) == "original"]


@pytest.mark.parametrize(("budget", "awkward"), SETTINGS)
def test_every_line_validates_and_there_is_one_batch_per_question(
    budget: str, awkward: bool, traffic: dict[tuple[str, bool], list[GeneratedBatch]]
) -> None:
    """100 batches per setting, one per question, each a valid candidate batch."""
    generated = traffic[(budget, awkward)]
    assert len(generated) == 100
    ids = [g.batch.request_id for g in generated]
    assert len(set(ids)) == 100
    mode = "awk" if awkward else "clean"
    assert all(i.startswith(f"hotpot-{budget}-{mode}-") for i in ids)
    for g in generated:
        line = g.to_json()
        assert json.loads(line)["schema"] == "ctx.candidate_batch.v1"
        assert CandidateBatch.model_validate_json(line) == g.batch
        assert g.truth.request_id == g.batch.request_id
        assert g.batch.conversation == ()
        assert g.batch.instructions.tokens is None
        assert g.batch.model.tokenizer == "cl100k_base"
        assert g.batch.answer_contract.kind == "short_fact"


@pytest.mark.parametrize(("budget", "awkward"), SETTINGS)
def test_relevant_ids_are_the_supporting_paragraphs_among_the_candidates(
    budget: str, awkward: bool, traffic: dict[tuple[str, bool], list[GeneratedBatch]]
) -> None:
    """The relevant ids are the two supporting paragraphs, both original candidates."""
    for g in traffic[(budget, awkward)]:
        assert g.batch.labels is not None
        relevant = set(g.batch.labels.relevant_chunk_ids)
        assert len(relevant) == 2  # every sampled question has two supporting paragraphs
        assert relevant <= {c.chunk_id for c in g.batch.candidates}
        assert {g.truth.kind_of(cid) for cid in relevant} == {"original"}
        assert set(g.truth.support) == relevant


@pytest.mark.parametrize(("budget", "awkward"), SETTINGS)
def test_every_supporting_sentence_is_in_its_paragraph(
    budget: str,
    awkward: bool,
    traffic: dict[tuple[str, bool], list[GeneratedBatch]],
    questions: dict[str, hotpot.HotpotQuestion],
) -> None:
    """Every supporting fact is in the truth once, a trimmed sentence of its paragraph."""
    for g in traffic[(budget, awkward)]:
        q = questions[g.batch.request_id.rsplit("-", 1)[1]]
        n_facts = len(set(q.supporting_facts))
        assert sum(len(s) for s in g.truth.support.values()) == n_facts
        texts = {
            c.chunk_id: c.text
            for c in g.batch.candidates
            if g.truth.kind_of(c.chunk_id) == "original"
        }
        for chunk_id, sentences in g.truth.support.items():
            assert sentences
            for sentence in sentences:
                assert sentence and sentence == sentence.strip()
                assert sentence in texts[chunk_id]


def test_originals_are_one_wikipedia_source_with_stable_ids(
    traffic: dict[tuple[str, bool], list[GeneratedBatch]],
    questions: dict[str, hotpot.HotpotQuestion],
) -> None:
    """Originals hold the whole context under stable ids, all from one Wikipedia source."""
    clean = traffic[("moderate", False)]
    for g in clean:
        q = questions[g.batch.request_id.rsplit("-", 1)[1]]
        by_id = {c.chunk_id: c for c in g.batch.candidates}
        for title, sentences in q.context:  # the distractor pool is always in
            c = by_id[chunk_id_for("hotpot", title)]
            assert c.title == title
            assert c.text == "".join(sentences).strip()
            assert c.doc_id == doc_id_for("hotpot", title)
        for c in g.batch.candidates:
            assert c.source_id == "wikipedia"
            assert c.tenant_id == TENANT and c.access_label == "public"
            assert c.version == "1" and c.authority is None and c.published_at is None
            assert c.span is not None and (c.span.start, c.span.end) == (0, len(c.text))
            assert c.rerank_score is None and c.retrieval_score is not None
            assert c.tokens is None or c.tokens == default_counter().count(c.text)
            assert c.metadata == {"retriever": "bm25"}
    for generated in traffic.values():
        for g in generated:
            originals = [c for c in g.batch.candidates if g.truth.kind_of(c.chunk_id) == "original"]
            assert {c.source_id for c in originals} == {"wikipedia"}


def test_clean_traffic_has_10_to_25_candidates_sorted_by_bm25(
    traffic: dict[tuple[str, bool], list[GeneratedBatch]],
) -> None:
    """Clean batches hold 10 to 25 candidates, drawn per question, sorted by BM25."""
    for budget in ("moderate", "tight"):
        counts = [len(g.batch.candidates) for g in traffic[(budget, False)]]
        assert all(10 <= n <= 25 for n in counts)
        assert len(set(counts)) > 5  # drawn per query, not fixed
    for generated in traffic.values():
        for g in generated:
            keys = [(-(c.retrieval_score or 0.0), c.chunk_id) for c in g.batch.candidates]
            assert keys == sorted(keys)


def test_settings_share_their_originals(
    traffic: dict[tuple[str, bool], list[GeneratedBatch]],
) -> None:
    """Paired comparisons: the budget and the awkward extras are the only differences."""
    base = [sorted(_originals(g)) for g in traffic[("moderate", False)]]
    for generated in traffic.values():
        assert [sorted(set(_originals(g))) for g in generated] == base
    awk_m, awk_t = traffic[("moderate", True)], traffic[("tight", True)]
    for a, b in zip(awk_m, awk_t, strict=True):
        assert a.batch.candidates == b.batch.candidates
        assert a.truth.kinds == b.truth.kinds and a.truth.families == b.truth.families


@pytest.mark.parametrize(("budget", "awkward"), SETTINGS)
def test_evidence_budget_is_in_range(
    budget: str, awkward: bool, traffic: dict[tuple[str, bool], list[GeneratedBatch]]
) -> None:
    """The naive evidence budget of each batch lies in its setting's range."""
    lo, hi = EVIDENCE_BUDGET[budget]
    counter = default_counter()
    for g in traffic[(budget, awkward)]:
        assert lo <= naive_budget(g.batch, counter).evidence_budget <= hi


def test_same_seed_gives_identical_output(
    traffic: dict[tuple[str, bool], list[GeneratedBatch]],
) -> None:
    """Built again from scratch (own index): byte-identical batches and truth."""
    again = hotpot.from_hotpot(_folder(), seed=1, budget="tight", awkward=True)
    first = traffic[("tight", True)]
    assert [g.to_json() for g in again] == [g.to_json() for g in first]
    assert [g.truth.to_json() for g in again] == [g.truth.to_json() for g in first]
    other = hotpot.from_hotpot(_folder(), seed=2, budget="tight", awkward=True)
    assert [g.to_json() for g in other] != [g.to_json() for g in first]


def test_awkward_traffic_mixes_in_the_known_cases(
    traffic: dict[tuple[str, bool], list[GeneratedBatch]],
) -> None:
    """Awkward traffic holds every known awkward case often enough; clean only originals."""
    generated = traffic[("moderate", True)]
    seen: Counter[str] = Counter()
    for g in generated:
        kinds = set(g.truth.kinds.values())
        assert kinds <= set(KINDS)
        seen.update(kinds)
        if max(Counter(c.chunk_id for c in g.batch.candidates).values()) >= 2:
            seen["duplicate_id"] += 1
        for c in g.batch.candidates:
            kind = g.truth.kind_of(c.chunk_id)
            if kind == "cross_tenant":
                assert c.tenant_id != TENANT
            if kind == "injected":
                assert any(m in c.text for m in INJECTION_MARKERS)
            if kind == "copy":
                assert c.source_id != "wikipedia"
    assert seen["cross_tenant"] > 60 and seen["injected"] > 60
    for case in ("copy", "stale", "overlap", "unauthorized", "duplicate_id"):
        assert seen[case] >= 10, case
    for g in traffic[("moderate", False)]:
        assert set(g.truth.kinds.values()) == {"original"}


def test_truth_support_and_qtype_round_trip(
    traffic: dict[tuple[str, bool], list[GeneratedBatch]],
    questions: dict[str, hotpot.HotpotQuestion],
) -> None:
    """Truth lines round-trip support and question type; an older line still reads."""
    qtypes: Counter[str | None] = Counter()
    for g in traffic[("moderate", True)]:
        line = g.truth.to_json()
        data = json.loads(line)
        assert "support" in data and data["qtype"] in ("bridge", "comparison")
        assert BatchTruth.from_json(line) == g.truth
        q = questions[g.batch.request_id.rsplit("-", 1)[1]]
        assert g.truth.qtype == q.qtype
        qtypes[g.truth.qtype] += 1
    assert qtypes == Counter({"bridge": 78, "comparison": 22})
    old = '{"schema": "bench.batch_truth.v1", "request_id": "r", "kinds": {"c": "original"}}'
    legacy = BatchTruth.from_json(old)
    assert legacy.support == {} and legacy.qtype is None
    assert "support" not in legacy.to_json() and "qtype" not in legacy.to_json()


def test_cli_writes_batches_and_truth_outside_the_repository(
    tmp_path: Path, corpus: hotpot.HotpotCorpus
) -> None:
    """The converter writes 100 batches and their truth to a path outside the repository."""
    out = tmp_path / "hotpot.jsonl"
    code = hotpot.main(["--budget", "tight", "--out", str(out), "--data-dir", str(_folder())])
    assert code == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 100
    truth = read_truth(tmp_path / "hotpot.truth.jsonl")
    assert set(truth) == {json.loads(line)["request_id"] for line in lines}


def test_cli_refuses_to_write_inside_the_repository(tmp_path: Path) -> None:
    """The converter exits 2 on an output path inside the repository and writes nothing."""
    inside = hotpot.REPO_ROOT / "hotpot-should-not-exist.jsonl"
    assert hotpot.main(["--budget", "moderate", "--out", str(inside)]) == 2
    assert not inside.exists()


def test_missing_data_is_a_clear_error(tmp_path: Path) -> None:
    """A missing folder is a TrafficError naming it; an unknown budget a ValueError."""
    with pytest.raises(TrafficError, match="HotpotQA sample not found"):
        hotpot.from_hotpot(tmp_path)
    with pytest.raises(ValueError, match="budget"):
        hotpot.from_hotpot(tmp_path, budget="roomy")
